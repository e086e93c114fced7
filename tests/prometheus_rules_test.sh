#!/usr/bin/env bash
# deploy/prometheus/tern-alerts.yml loads: `promtool check rules` (Debian's
# prometheus package) accepts every rule and expression.
# Usage: prometheus_rules_test.sh <tern-alerts.yml>
set -euo pipefail
command -v promtool >/dev/null || {
  echo "SKIPPED: promtool is not installed (deploy/install-deps.sh installs prometheus)"
  exit 0
}
promtool check rules "$1"
