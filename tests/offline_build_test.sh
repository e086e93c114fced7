#!/usr/bin/env bash
# Fails if the build could reach the network: tern builds offline from
# Debian's packages (WORKSPACE, third_party/*.bzl and .bazelrc are read).
set -euo pipefail

status=0
for file in "$@"; do
  # Comments may name the rules; code may not.
  code=$(sed 's/#.*//' "$file")
  if grep -nE '\b(http_archive|http_file|http_jar|git_repository|new_git_repository|download_and_extract|ctx\.download)\b' <<<"$code"; then
    echo "FAIL: $file fetches from the network; tern must build offline" >&2
    status=1
  fi
  if grep -nE 'https?://' <<<"$code"; then
    echo "FAIL: $file names a URL outside a comment" >&2
    status=1
  fi
done
[[ $# -gt 0 ]] || { echo "FAIL: no files given" >&2; exit 1; }
[[ $status -eq 0 ]] && echo "offline: $# build files checked, none downloads"
exit $status
