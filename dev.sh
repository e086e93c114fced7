#!/usr/bin/env bash
# The project's entry points for people and CI. Each command installs what
# is missing first (deploy/install-deps.sh: Debian packages, as root).
#
#   ./dev.sh demo          train LeNet on Fashion-MNIST: 2 shards, 4 workers, TernGrad
#   ./dev.sh test          build everything and run every test
#   ./dev.sh test asan     the same under a sanitizer (asan, ubsan or tsan)
#   ./dev.sh build         build the default (CUDA-free) configuration
#   ./dev.sh bench         codec throughput, with ratios to memcpy
set -euo pipefail
cd "$(dirname "$0")"

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
}

install_deps() {
  ./deploy/install-deps.sh
}

# CI machines have 2 cores and no terminal: plain progress lines.
bazel_flags=()
if [[ ! -t 1 ]]; then
  bazel_flags+=(--curses=no --color=no --show_progress_rate_limit=30)
fi

cmd=${1:-}
case "$cmd" in
  test)
    install_deps
    config=()
    if [[ -n "${2:-}" ]]; then
      case "$2" in
        asan|ubsan|tsan) config=(--config="$2") ;;
        *) echo "dev.sh: unknown sanitizer '$2' (expected asan, ubsan or tsan)" >&2; exit 2 ;;
      esac
    fi
    bazel test "${bazel_flags[@]}" "${config[@]}" //...
    ;;
  demo)
    install_deps
    bazel build "${bazel_flags[@]}" //tern
    # About 5 minutes on 2 cores; extra arguments go to `tern launch`
    # (e.g. --codec=fp32 to compare, --steps=100 for a quick look).
    bazel-bin/tern/tern launch --shards=2 --workers=4 --model=lenet \
      --dataset=fashion-mnist --codec=terngrad --steps=1000 --eval_every=250 \
      "${@:2}"
    ;;
  build)
    install_deps
    bazel build "${bazel_flags[@]}" //...
    ;;
  bench)
    install_deps
    bazel build "${bazel_flags[@]}" //tern && bazel-bin/tern/tern bench kernels "${@:2}"
    ;;
  -h|--help|help)
    usage
    ;;
  *)
    usage >&2
    exit 2
    ;;
esac
