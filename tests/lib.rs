mod support;

mod etcd_backup;
mod fake_cluster;
