#!/usr/bin/env bash
# The runtime stage of tern's images (Dockerfile and Dockerfile.prebuilt run
# this one script, so the two cannot drift): the shared libraries `tern`
# links against, the Fashion-MNIST package for the demo, iproute2 for the
# geo compose file's WAN shaping, and the non-root user `tern` (uid 10001)
# that owns /runs and /checkpoints.
#
#   install-runtime.sh [cpu|cuda]
#
# `cuda`: the image brings its own CUDA libtorch (/opt/libtorch), so
# Debian's CPU libtorch is left out.
set -euo pipefail
torch=${1:-cpu}

packages=(
  # gRPC, Protocol Buffers, Abseil, spdlog/fmt (Debian 12's sonames).
  libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9
  # XXH3, the parameter checksum (common/checksum).
  libxxhash0
  # prometheus-cpp's registry and exposer (civetweb comes with it), for
  # --metrics_listen (common/metrics).
  libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  # libtorch's own dependencies that are not pulled in with it.
  libopenblas0-pthread libgomp1 libatomic1
  # Google Benchmark, for `tern bench`.
  libbenchmark1debian
  # Data for `--dataset fashion-mnist` (its default --data_dir).
  dataset-fashion-mnist
  # tc, for tern-shape (deploy/compose/geo.yaml); ca-certificates for TLS.
  iproute2 ca-certificates
)
case "$torch" in
  cpu) packages+=(libtorch1.13) ;;
  cuda) ;;
  *) echo "install-runtime: unknown torch '$torch' (cpu or cuda)" >&2; exit 2 ;;
esac

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb

useradd --uid 10001 --user-group --home-dir /home/tern --create-home --shell /usr/sbin/nologin tern
# Named volumes mounted here start with this ownership (docker and podman
# copy it from the image), so the non-root user can write runs and
# checkpoints.
install -d -o tern -g tern /runs /checkpoints
install -d /etc/tern /etc/tern/tls
