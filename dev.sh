#!/usr/bin/env bash
# The project's entry points for people and CI. Each command installs what
# is missing first (deploy/install-deps.sh: Debian packages, as root).
#
#   ./dev.sh demo          train LeNet on Fashion-MNIST: 2 shards, 4 workers, TernGrad
#   ./dev.sh test          build everything and run every test
#   ./dev.sh test asan     the same under a sanitizer (asan, ubsan or tsan)
#   ./dev.sh test sanitize ASan and UBSan in one build over what CI covers
#   ./dev.sh build         build the default (CUDA-free) configuration
#   ./dev.sh bench         codec throughput, with ratios to memcpy
set -euo pipefail
cd "$(dirname "$0")"

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
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
    targets=(//...)
    if [[ -n "${2:-}" ]]; then
      case "$2" in
        asan|ubsan|tsan) config=(--config="$2") ;;
        # The servers, the kernels and what they share; worker/ is left out
        # (its tests spend their time inside an uninstrumented libtorch).
        # Only what the tests run is built: the benchmarks' binaries would
        # be compiled again for nothing.
        sanitize)
          config=(--config=sanitize --build_tests_only)
          targets=(//common/... //kernels/... //core/... //server/... //global/...)
          ;;
        *) echo "dev.sh: unknown sanitizer '$2' (expected asan, ubsan, tsan or sanitize)" >&2; exit 2 ;;
      esac
    fi
    bazel test "${bazel_flags[@]}" "${config[@]}" "${targets[@]}"
    ;;
  demo)
    install_deps
    bazel build "${bazel_flags[@]}" //tern
    # About 5 minutes on 2 cores. The job is given through TERN_* variables
    # so that arguments (they go to `tern launch`) override it, e.g.
    # --codec=fp32 to compare, --steps=100 for a quick look.
    TERN_SHARDS=${TERN_SHARDS:-2} TERN_WORKERS=${TERN_WORKERS:-4} TERN_MODEL=${TERN_MODEL:-lenet} TERN_DATASET=${TERN_DATASET:-fashion-mnist} \
      TERN_CODEC=${TERN_CODEC:-terngrad} TERN_STEPS=${TERN_STEPS:-1000} TERN_EVAL_EVERY=${TERN_EVAL_EVERY:-250} \
      bazel-bin/tern/tern launch "${@:2}"
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
