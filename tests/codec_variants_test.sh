#!/usr/bin/env bash
# docs/codec_variants.sh maps a results table's row names to `tern launch`
# flags. This checks the mapping of each kind of name, that a name it does
# not know is refused rather than run as something else, and that every
# flag it prints is one `tern launch --help` lists (a renamed flag would
# otherwise fail only hours into a convergence run).
#
# Usage: codec_variants_test.sh <tern binary> <docs/codec_variants.sh>
set -euo pipefail

TERN=$1
# shellcheck source=../docs/codec_variants.sh
source "$2"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

expect() {
  local got
  got=$(flags_of "$1") || fail "$1: refused"
  [[ "$got" == "$2" ]] || fail "$1: got '$got', want '$2'"
}

expect fp32 "--codec fp32"
expect terngrad "--codec terngrad"
expect terngrad-shared-clip "--codec terngrad --clip_rule shared"
expect terngrad-noclip "--codec terngrad --clip 0"
expect terngrad-perlayer "--codec terngrad --partition_bytes 16777216"
expect threshold-0.01 "--codec threshold --tau 0.01"
expect dropping-90 "--codec dropping --drop_ratio 0.9"
expect dropping-1bit "--codec dropping --drop_survivors 1bit"
expect dropping-99.9-tensor-2bit \
  "--codec dropping --drop_ratio 0.999 --drop_scope tensor --drop_survivors 2bit"

for bad in terngrad-typo dropping-3bit dropping- dropping-9x; do
  if flags_of "$bad" >/dev/null 2>&1; then fail "$bad: accepted"; fi
done

check_rows "fp32 terngrad-noclip dropping-90" || fail "check_rows refused good rows"
if check_rows "fp32 terngrad-typo" 2>/dev/null; then fail "check_rows: accepted terngrad-typo"; fi

help=$("$TERN" launch --help)
for name in terngrad-shared-clip terngrad-noclip terngrad-perlayer \
  threshold-0.01 dropping-99.9-tensor-2bit; do
  for flag in $(flags_of "$name"); do
    [[ "$flag" == --* ]] || continue
    grep -q -- "^ *$flag " <<<"$help" || fail "$name: tern launch has no $flag"
  done
done
echo PASS
