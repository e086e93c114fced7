#!/usr/bin/env bash
# Runs tests/k8s_manifest_test.py (what it checks is said there) on the
# manifests in this test's runfiles. Skips, passing, where the tools are
# missing: kubectl (with its built-in kustomize) or python3-yaml.
#
# Usage: k8s_manifest_test.sh <tern binary> <k8s_manifest_test.py>
set -euo pipefail
TERN=$(readlink -f "$1")
CHECK=$2
export PATH=$PATH:/usr/local/bin:/usr/bin:/bin

command -v kubectl >/dev/null || { echo "SKIPPED: no kubectl (deploy/install-deps.sh installs kubernetes-client)"; exit 0; }
python3 -c 'import yaml' 2>/dev/null || { echo "SKIPPED: no python3-yaml (deploy/install-deps.sh)"; exit 0; }

# kustomize refuses symbolic links that leave the kustomization's folder,
# and runfiles are links: check a copy.
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/tern-k8s.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp -rL deploy "$WORK/deploy"
if command -v yamllint >/dev/null; then
  yamllint -d '{extends: default, rules: {line-length: {max: 110}, document-start: disable,
    comments: {min-spaces-from-content: 1}, comments-indentation: disable, truthy: {check-keys: false}}}' \
    "$WORK/deploy/k8s" "$WORK/deploy/compose"
fi
exec python3 "$CHECK" --tern "$TERN" --deploy "$WORK/deploy" --self_test
