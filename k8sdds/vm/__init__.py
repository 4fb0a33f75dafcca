"""An ARM machine on this one: Debian's arm64 system (its kernel, systemd, sshd; no
Kubernetes part until `k8sdds cluster install`), booted by qemu-system-aarch64 as an emulated
Cortex-A53 (a Raspberry Pi 3's core) with its own address on a bridge of this machine.

`image` builds the machine's disk once (cached); `seed` is what makes one machine of it
(its name, address, keys); `machine` boots and stops one. The machine proves what runs on
ARM (the software stack, kubeadm joining it, pods on it), not a Pi's speed: TCG emulates
every instruction."""
