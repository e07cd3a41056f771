//go:build tools

package tools

// The node and add-on commands of scripts/real-cluster (a kubeadm cluster of real kubelets), beside tools.go's:
// kept out of tools.go so that scripts/build-k8s, which the other tests run, does not build them.
import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
