//! The one integration-test binary: a module per feature, shared helpers in `support`.

mod support;

mod bad_input;
mod etcd_backup;
mod fake_cluster;
mod hooks;
mod ops;
mod plan;
mod reboot;
mod ssh;
mod strategies;
mod tasks;
mod upgrade;
