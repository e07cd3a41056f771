// etcd as its release binary is (go.etcd.io/etcd/server/v3's own main.go), built by scripts/real-cluster for the
// etcd image kubeadm asks for: a module of its own per version, because etcd's server module replaces its sibling
// modules by relative paths, so `go install go.etcd.io/etcd/server/v3@VERSION` refuses it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
