# k8sdds: the two commands of the README, and what they need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PHASE  := $(PYTHON) .ci/phase
# the project's modules compiled once into their __pycache__ (ignored by git), not again by
# every test process and every `python -m k8sdds` a test starts: an environment that says
# PYTHONDONTWRITEBYTECODE otherwise makes each process compile them from source (make check
# on 2 cores, 2026-11-29: 85 s with it, 63 s without)
unexport PYTHONDONTWRITEBYTECODE
# Apache Otava's change points (`k8sdds history`), installed as a library without its command
# line's dependencies, whose pins (numpy 2.2, scipy below 1.17) the rest of k8sdds cannot take
OTAVA  := 0.8.0
# Debian packages: the engine (ddsperf), the namespace tooling (iproute2, nftables for the
# nodes' masquerade), userspace WireGuard for the encrypted datapaths where the kernel has
# none, the network baseline engines (ping, iperf3, qperf, ab with nginx), mosquitto, and
# clang-19, libbpf's headers and bpftool for the emulated Cilium's eBPF programs
APT_PACKAGES := cyclonedds-tools iproute2 iputils-ping procps python3-venv wireguard-go \
                wireguard-tools nftables iptables ipset ethtool iperf3 qperf apache2-utils nginx-light \
                mosquitto clang-19 libbpf-dev bpftool

# and what only the tests need: a real browser for the report test, openssl to check signatures,
# etcd for the real kube-apiserver the kubernetes backend is tested against, sshd for the
# bare-host commands, Debian's arm64 cross gcc to link the Rust engines for a Pi 4/5, QEMU for
# the ARM test host (k8sdds vm)
TEST_APT_PACKAGES := chromium chromium-driver openssl etcd-server openssh-server debootstrap umoci skopeo \
                     containerd runc containernetworking-plugins busybox-static \
                     postgresql qemu-user-static gcc libc6-dev libpcap-dev \
                     gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-system-arm qemu-utils \
                     cyclonedds-dev cyclonedds-tools g++ g++-aarch64-linux-gnu g++-arm-linux-gnueabihf \
                     prometheus
# what `make perftest` compiles with: Cyclone DDS's headers and IDL compiler, g++, and Debian's
# cross g++ for each of PERFTEST_ARCHES (Debian architectures beside this machine's: arm64 for a
# Pi 4/5, armhf for a Pi 3)
PERFTEST_ARCHES ?=
CROSS_GXX := $(subst arm64,g++-aarch64-linux-gnu,$(subst armhf,g++-arm-linux-gnueabihf,$(PERFTEST_ARCHES)))
PERFTEST_PACKAGES = cyclonedds-dev cyclonedds-tools g++ $(CROSS_GXX)
# RTI Perftest's sources for `make perftest` (a clone of github.com/rticommunity/rtiperftest, or
# a tar archive of one); `make test` takes the copy beside the project when there is one
PERFTEST_SRC ?= $(firstword $(wildcard ../shared/third_party/rtiperftest-*.tar.gz))
export PERFTEST_SRC

.PHONY: demo test check docs install engines perftest test-perftest system-deps test-deps k8s-test-binaries vm-disk lint clean

# the tests that need no root, no namespaces, no sshd, no kube-apiserver, no database server
# and no fuzzer's minutes
FAST := not emulated and not kube and not ssh and not image and not kubelet and not service \
        and not build and not sources

## demo: install everything, run schedules/quick.csv on three datapaths, three repeats each in
## rounds (so that every change the answer states has an interval), write the report, print where
demo: install
	$(BIN)/k8sdds run --sch schedules/quick.csv --datapath host,flannel-hostgw,flannel-vxlan --repeats 3 --order rounds --out logs --report

## test: install what the tests need and lint, then the whole test suite: two test processes
## side by side with the builds beside them (.ci/builds: the Kubernetes parts, the engines,
## Perftest and the ARM disks in two lanes, each test waiting only for what it needs), then
## the tests that must run alone (marker exclusive); each phase timed by .ci/phase
## (K8SDDS_TIMELINE: the file its times go to; `.ci/run` prints them); each phase exec'd,
## so that a SIGTERM to make reaches it and, through it, what it runs
test:
	@exec $(PHASE) "Debian packages" -- $(MAKE) --no-print-directory system-deps APT_PACKAGES="$(TEST_APT_PACKAGES)"
	@exec $(PHASE) "k8sdds and its test extras" -- $(MAKE) --no-print-directory install $(VENV)/.test-extras
	@exec $(PHASE) ruff -- $(BIN)/ruff check .
	@exec $(PHASE) "tests, two processes, the builds beside them" -- $(PYTHON) .ci/builds -- \
	  $(BIN)/pytest -q -rs -n 2 --dist loadfile --no-loadscope-reorder -m "not exclusive" --durations=25
	@exec $(PHASE) "tests, exclusive" -- $(BIN)/pytest -q -rs -m exclusive --durations=5

## docs: the documentation site (Sphinx) into docs/_build/html; warnings are errors
docs: $(BIN)/k8sdds $(VENV)/.test-extras
	$(BIN)/sphinx-build -q -W --keep-going -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

## check: lint and the fast tests (no root, no namespaces, no network), for developers
check: $(BIN)/k8sdds $(VENV)/.test-extras
	$(BIN)/ruff check .
	$(BIN)/pytest -q -m "$(FAST)" -n 2

## install: Debian packages (as root) and the Python package in .venv: what `make demo` runs
## (Cyclone DDS and the network engines); `make engines` builds k8sdds' own MQTT and Zenoh
## clients, which the demo does not run
install: system-deps $(BIN)/k8sdds

## engines: k8sdds-mqtt (Go), k8sdds-zenoh (Rust; also the Zenoh router), k8sdds-discovery (C on Debian's Cyclone DDS, which it installs), cached in $K8SDDS_ENGINE_BIN or /var/cache/k8sdds/bin, for this machine and for a Pi (mqtt and discovery: arm64 and armhf; zenoh: arm64, where Debian's aarch64-linux-gnu-gcc is); without a toolchain, that engine is left out and says it is not built
engines: build-mqtt-amd64 build-mqtt-arm64 build-mqtt-armhf build-zenoh-amd64 \
         build-discovery-amd64 build-discovery-arm64 build-discovery-armhf
	@$(MAKE) --no-print-directory build-zenoh-arm64 \
	  || echo "the zenoh engine is not built for arm64 (above: why); the arm64 image goes without it"

# build-NAME: one artefact the tests need, cached (`.ci/builds --list` names them all; `make
# test` builds them beside the tests, in two lanes)
build-mqtt-%:
	@if PATH="$$PATH:/usr/local/go/bin" command -v go >/dev/null; then ARCH=$* ENGINES=mqtt engines/build; \
	else echo "no Go toolchain: the mqtt engine is not built (\`k8sdds engines\` says so)"; fi

build-zenoh-%:
	@if ! PATH="$$PATH:$$HOME/.cargo/bin" command -v cargo >/dev/null; then \
	  echo "no Rust toolchain (cargo): the zenoh engine is not built (\`k8sdds engines\` says so)"; \
	elif [ "$*" != amd64 ] && ! command -v aarch64-linux-gnu-gcc >/dev/null; then \
	  echo "no aarch64-linux-gnu-gcc: the zenoh engine is not built for $*"; \
	else ARCH=$* ENGINES=zenoh engines/build; fi

# k8sdds-discovery (engines/discovery) for one Debian architecture: Cyclone DDS's headers and
# IDL compiler, and the architecture's gcc (Debian's cross gcc for a Pi); the Pis' Cyclone
# DDS comes from Debian's packages, as Perftest's does
DISCOVERY_GCC = $(subst arm64,gcc-aarch64-linux-gnu,$(subst armhf,gcc-arm-linux-gnueabihf,$(subst amd64,gcc,$(1))))
build-discovery-%: $(BIN)/k8sdds
	@$(MAKE) --no-print-directory system-deps APT_PACKAGES="cyclonedds-dev cyclonedds-tools $(call DISCOVERY_GCC,$*)"
	@if [ "$*" = "$$(dpkg --print-architecture)" ]; then $(PYTHON) engines/discovery/build.py; \
	else $(BIN)/python engines/discovery/build.py --arch $*; fi

## perftest: RTI Perftest's own program (perftest_cpp) built on Cyclone DDS from PERFTEST_SRC
## (engines/perftest: k8sdds' implementation of Perftest's middleware interface), for this
## machine and each of PERFTEST_ARCHES, cached in $K8SDDS_ENGINE_BIN or /var/cache/k8sdds/bin;
## engine=rtiperftest then runs it
perftest: $(if $(PERFTEST_ARCHES),$(BIN)/k8sdds)
	@if [ -z "$(PERFTEST_SRC)" ]; then echo "make perftest: give RTI Perftest's sources: make perftest PERFTEST_SRC=DIR (a clone of github.com/rticommunity/rtiperftest, or an archive of one)"; exit 2; fi
	@$(MAKE) --no-print-directory system-deps APT_PACKAGES="$(PERFTEST_PACKAGES)"
	$(PYTHON) engines/perftest/build.py "$(PERFTEST_SRC)"
	@for arch in $(PERFTEST_ARCHES); do $(BIN)/python engines/perftest/build.py "$(PERFTEST_SRC)" --arch $$arch || exit 1; done

# the tests build Perftest from the sources beside the project (../shared/third_party), for
# this machine and the ARM test hosts
test-perftest: build-perftest-amd64 build-perftest-arm64 build-perftest-armhf

build-perftest-%: $(BIN)/k8sdds
	@if [ -z "$(PERFTEST_SRC)" ]; then echo "no RTI Perftest sources (PERFTEST_SRC): engine=rtiperftest's live tests are skipped"; \
	elif [ "$*" = "$$(dpkg --print-architecture)" ]; then $(PYTHON) engines/perftest/build.py "$(PERFTEST_SRC)"; \
	else $(BIN)/python engines/perftest/build.py "$(PERFTEST_SRC)" --arch $*; fi

## test-deps: the tests' Debian packages first (the Go builds need gcc and libpcap-dev for
## flannel's and weave's cgo parts), then the Go-built Kubernetes parts
test-deps:
	@$(MAKE) --no-print-directory system-deps APT_PACKAGES="$(TEST_APT_PACKAGES)"
	@$(MAKE) --no-print-directory k8s-test-binaries

## k8s-test-binaries: kube-apiserver, kubelet, the controllers, kube-proxy, kubectl, kubeadm, etcd, coredns, flannel, kube-router, Weave Net, metrics-server and kwok (Go; cached); and cross-compiled, side by side: for arm64 and for arm each, the kubelet, kubeadm, kubectl and kube-proxy, CoreDNS and flannel (what `cluster install` puts on the ARM test hosts, and the images `cluster images --build` makes for them)
k8s-test-binaries: build-k8s-amd64 build-cni-amd64
	@$(MAKE) --no-print-directory -j2 build-k8s-arm64 build-k8s-armhf

# the Kubernetes parts (what the Pi tutorial and every kubelet cluster need) apart from the
# CNIs only their own tests use (Weave Net, kube-router, Cilium): the first are on the cold
# run's longest path, the second are not
K8S_CORE := kubernetes etcd kwok crictl coredns flannel metrics_server
K8S_CNIS := weave kube_router cilium
build-k8s-amd64 build-cni-amd64: build-%-amd64:
	@if PATH="$$PATH:/usr/local/go/bin" command -v go >/dev/null; then \
	  K8S_PARTS="$(if $(filter k8s,$*),$(K8S_CORE),$(K8S_CNIS))" .ci/k8s-test-binaries; \
	else echo "no Go toolchain: the kubernetes backend's tests will be skipped"; fi

# the ARM parts: Debian's architecture name (armhf) is Go's arm
build-k8s-arm64 build-k8s-armhf: build-k8s-%:
	@if PATH="$$PATH:/usr/local/go/bin" command -v go >/dev/null; then \
	  goarch=$(subst armhf,arm,$*); .ci/k8s-cross-binaries $$goarch coredns flannel \
	  && K8S_COMPONENTS="kubelet kubeadm kubectl kube-proxy" .ci/k8s-cross-binaries $$goarch kubernetes; \
	else echo "no Go toolchain: the Kubernetes parts for $* are not built"; fi

## vm-disk: the ARM test hosts' disks (`k8sdds vm build`: Debian arm64 and armhf with sshd, as a fresh Raspberry Pi OS, no node part: the tests put those on with `k8sdds cluster install`; as root, once, cached in /var/cache/k8sdds/vm), the two built side by side (each runs its packages' scripts on one core, under qemu-user)
vm-disk:
	@$(MAKE) --no-print-directory -j2 build-vm-arm64 build-vm-armhf

build-vm-%: $(BIN)/k8sdds
	@if [ "$$(id -u)" -eq 0 ]; then $(BIN)/k8sdds vm build --arch $*; \
	else echo "not root: the $* ARM test host's disk is not built (its tests are skipped)"; fi

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f '$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then \
	  echo "missing Debian packages:$$missing (install them as root: apt-get install$$missing)"; exit 1; \
	fi; \
	echo "installing$$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null

$(BIN)/k8sdds: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	$(BIN)/pip install -q --no-deps apache-otava==$(OTAVA)
	@touch $@

# what only the tests and the docs need (pytest, ruff, Sphinx, schemathesis, ...)
$(VENV)/.test-extras: $(BIN)/k8sdds
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

lint: $(VENV)/.test-extras
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
