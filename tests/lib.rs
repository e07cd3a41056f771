//! The one integration-test binary: a module per feature, shared helpers in `support`.

mod support;

mod bad_input;
mod chaos;
mod cluster_care;
mod cluster_lock;
mod cordons;
mod debian;
mod etcd_backup;
mod fail_closed;
mod fake_cluster;
mod file_cycles;
mod flavors;
mod forks;
mod golden;
mod hooks;
mod kubeadm;
mod kured;
mod layers;
mod lease;
mod live_plan;
mod openshift;
mod openshift_control_plane;
mod ops;
mod plan;
mod poller;
mod real_api;
mod reboot;
mod reliability;
mod restore_cluster;
mod ssh;
mod strategies;
mod tasks;
mod upgrade;
