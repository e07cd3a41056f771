module upgrade-tests/real-cluster-workload

go 1.24
