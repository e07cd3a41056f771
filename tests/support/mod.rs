pub mod etcd;
pub mod fake_cluster;
