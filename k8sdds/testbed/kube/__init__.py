"""A real Kubernetes cluster on the emulated testbed (`k8sdds testbed up --kubernetes`): the
control plane in the first node's namespace, containerd + runc + kubelet + kube-proxy in every
worker's, pods networked by the CNI plugins over the testbed's datapath wiring."""
