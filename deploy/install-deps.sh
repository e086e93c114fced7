#!/usr/bin/env bash
# Installs every Debian package tern needs to build, test and run its demo.
# Idempotent: when everything is present it installs nothing and touches no
# package list. Run as root (or with sudo) on Debian 12 (bookworm).
set -euo pipefail

packages=(
  # Build: Bazel 4.2.3 and the rules it loads offline.
  bazel-bootstrap bazel-platforms bazel-skylib
  g++ clang-14 libclang-rt-14-dev lld-14
  # Libraries tern links against.
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libspdlog-dev libfmt-dev libtorch-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev
  libxxhash-dev
  # OpenSSL's libcrypto: `tern certs` makes the run's CA and certificates.
  libssl-dev
  # An optimized BLAS for libtorch (Debian's default is the reference one,
  # about 10x slower on the MLP and LeNet layers).
  libopenblas0-pthread
  # Data for the demo and the training tests.
  dataset-fashion-mnist
  # Tools the scripts and tests call.
  python3 iproute2 procps
  # tests/hostile_input_test.sh: an attacker speaking HTTP/2 and gRPC.
  python3-h2 python3-grpcio python3-protobuf
  # `tern plot`: it draws its PNG charts with matplotlib (Agg, no display).
  python3-matplotlib
  # examples/ and tests/torchscript_train_test.sh: PyTorch (the same 1.13 as
  # libtorch-dev) scripts and saves the TorchScript models tern worker loads.
  python3-torch
  # The PyTorch API (python/tern): its C++ module is built with pybind11
  # against Python's headers.
  pybind11-dev python3-dev
  # --metrics_listen (common/metrics): prometheus-cpp's registry and pull
  # exposer; the Prometheus server scrapes a run in tests/metrics_test.sh.
  prometheus-cpp-dev prometheus
)
# Containers: tests/container_test.sh and tests/k8s_manifest_test.sh
# (deploy/README.md). An image's builder stage sets TERN_DEPS_NO_CONTAINERS=1.
if [[ -z "${TERN_DEPS_NO_CONTAINERS:-}" ]]; then
  packages+=(podman podman-compose runc netavark aardvark-dns iptables debootstrap
    yamllint python3-yaml)
  # Any kubectl with kustomize will do; Debian's conflicts with Google's.
  command -v kubectl >/dev/null || packages+=(kubernetes-client)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root" >&2
    exit 1
  fi
else
  SUDO=
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
