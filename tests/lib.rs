//! The one integration-test binary: a module per feature, shared helpers in `support`.

mod support;

mod etcd_backup;
mod fake_cluster;
mod hooks;
mod plan;
mod ssh;
mod tasks;
mod upgrade;
