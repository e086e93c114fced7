# The rows of the results tables, by name: `flags_of NAME` prints the
# `tern launch` flags of one row. Sourced by docs/codec-table.sh and
# docs/convergence.sh so that a name means the same run in every table.
#
#   fp32, fp16, terngrad, onebit, threshold, adaptive, dropping, qsgd
#                          the codec with its defaults (kernels/codec_options.h)
#   terngrad-shared-clip   clipped at the shared scaler only (--clip_rule shared)
#   terngrad-noclip        no clipping (--clip 0; TernGrad Table 2's ablation)
#   terngrad-perlayer      one scaler per layer: chunks of up to 16 MiB, so
#                          LeNet's largest layer (12.25 MiB) is one chunk
#   threshold-TAU          threshold with --tau TAU (e.g. threshold-0.01)
#   dropping[-PCT][-tensor][-1bit|-2bit]
#                          dropping PCT percent (--drop_ratio PCT/100, default
#                          99), one threshold per chunk instead of one over
#                          the gradient, survivors as 1-bit or 2-bit codes
#                          (e.g. dropping-99.9-tensor-2bit)

flags_of() {
  local name="$1"
  case "$name" in
    terngrad-shared-clip) echo "--codec terngrad --clip_rule shared" ;;
    terngrad-noclip) echo "--codec terngrad --clip 0" ;;
    terngrad-perlayer) echo "--codec terngrad --partition_bytes 16777216" ;;
    threshold-*) echo "--codec threshold --tau ${name#threshold-}" ;;
    dropping-*) dropping_flags "${name#dropping-}" ;;
    *-*) echo "codec_variants.sh: unknown row '$name'" >&2; return 2 ;;
    *) echo "--codec $name" ;;
  esac
}

# check_rows "NAME ...": fails, naming the first unknown row, before any
# run starts.
check_rows() {
  local name
  for name in $1; do flags_of "$name" >/dev/null || return 2; done
}

# The flags of dropping-<parts>, parts separated by '-'.
dropping_flags() {
  local flags="--codec dropping" part
  [[ -n "$1" && "$1" != -* && "$1" != *- && "$1" != *--* ]] ||
    { echo "codec_variants.sh: dropping-$1: an empty part" >&2; return 2; }
  local IFS=-
  for part in $1; do
    case "$part" in
      tensor) flags+=" --drop_scope tensor" ;;
      1bit|2bit) flags+=" --drop_survivors $part" ;;
      *[!0-9.]*|"") echo "codec_variants.sh: dropping: unknown part '$part'" >&2; return 2 ;;
      *) flags+=" --drop_ratio $(awk -v p="$part" 'BEGIN { print p / 100 }')" ;;
    esac
  done
  echo "$flags"
}
