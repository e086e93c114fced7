#!/usr/bin/env bash
# tern in containers, as its users run it (deploy/README.md):
#   1. builds the runtime image around the binary Bazel has just built
#      (deploy/docker/build-runtime-image.sh; building from source inside
#      the test would cost CI a second full build). The base image and the
#      library layer are reused when present, so later runs take seconds;
#   2. deploy/compose/local.yaml with podman-compose: 2 shards, 4 workers,
#      LeNet on synthetic data, TernGrad, 20 steps, in plaintext with
#      TERN_INSECURE (the shards say so). Every worker exits 0 after 20
#      steps with the same final parameter checksum; each shard exits 0 on
#      SIGTERM;
#   2b. the same with tls-local.yaml merged in: certificates made with the
#      image's `tern certs` (as deploy/compose/tls-local.yaml says), mutual
#      TLS on every link (a plaintext health check is refused), the same
#      checksum as in plaintext;
#   3. deploy/compose/geo.yaml, 2 regions x 1 worker (WeightGrad, WAN links
#      shaped with tbf): every worker exits 0 and ends with its LPS's final
#      checksum, the same in both regions;
#   4. tears down containers, volumes and networks, also on failure.
# Needs root and podman (deploy/install-deps.sh installs it, and
# deploy/containers.conf adapts it to hosts like CI's): without root or
# podman it prints "SKIPPED: <reason>" and passes; a podman that is
# installed but cannot run fails it.
#
# Usage: container_test.sh <tern binary> <deploy folder>
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

TERN=$(readlink -f "$1")
DEPLOY=$(readlink -f "$2")
IMAGE=localhost/tern:test
STEPS=20
START=$(date +%s)

skip() {
  echo "SKIPPED: $*"
  exit 0
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
elapsed() { echo $(($(date +%s) - START)); }

[[ $(id -u) -eq 0 ]] || skip "needs root (rootless podman is not set up by install-deps.sh)"
command -v podman >/dev/null || skip "podman is not installed (deploy/install-deps.sh)"
command -v podman-compose >/dev/null || skip "podman-compose is not installed (deploy/install-deps.sh)"
export CONTAINERS_CONF=${CONTAINERS_CONF:-$DEPLOY/containers.conf}
# Installed but broken is a failure, not a skip: the project's machines run
# podman as root (deploy/containers.conf adapts it), so CI must not turn
# green without running the containers.
podman info >/dev/null 2>&1 || fail "podman is installed but cannot run here: $(podman info 2>&1 | tail -n 1)"

# The compose files, their settings and the run's output in one folder.
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/tern-ct.XXXXXX")
cp -rL "$DEPLOY/compose" "$WORK/compose"
rm -f "$WORK/compose/.env"  # every setting below is explicit
PROJECTS=()
lps_sums=()

teardown() {
  local project
  for project in "${PROJECTS[@]}"; do
    podman ps -aq --filter "label=io.podman.compose.project=$project" |
      xargs -r podman rm -f -t 2 >/dev/null 2>&1 || true
    podman volume ls -q --filter "label=io.podman.compose.project=$project" |
      xargs -r podman volume rm -f >/dev/null 2>&1 || true
    podman network ls -q --filter "label=io.podman.compose.project=$project" |
      xargs -r podman network rm -f >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap teardown EXIT

compose() {  # project "file [override...]" args...
  local project=$1 file file_args=()
  for file in $2; do file_args+=(-f "$WORK/compose/$file"); done
  shift 2
  podman-compose --no-ansi -p "$project" "${file_args[@]}" "$@" \
    >>"$WORK/$project-compose.log" 2>&1 ||
    { tail -n 30 "$WORK/$project-compose.log" >&2; fail "podman-compose $* for $project failed"; }
}

container() {  # project service
  echo "${1}_${2}_1"
}

# Waits until every named container has exited (timeout in seconds).
wait_exited() {
  local timeout=$1
  shift
  local name
  for _ in $(seq 1 "$timeout"); do
    local running=0
    for name in "$@"; do
      [[ $(podman inspect --format '{{.State.Status}}' "$name") == exited ]] || running=1
    done
    [[ $running -eq 0 ]] && return 0
    sleep 1
  done
  for name in "$@"; do
    echo "---- $name ($(podman inspect --format '{{.State.Status}}' "$name"))" >&2
    podman logs --tail 20 "$name" >&2 || true
  done
  fail "containers still running after ${timeout} s"
}

expect_exit_0() {  # container...
  local name code
  for name in "$@"; do
    code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
    if [[ "$code" != 0 ]]; then
      podman logs --tail 30 "$name" >&2 || true
      fail "$name exited $code"
    fi
  done
}

# Final checksum and step count of each worker's metrics file: "checksum steps".
final_records() {  # volume-folder file...
  python3 - "$@" <<'PY'
import json, sys
folder = sys.argv[1]
for name in sys.argv[2:]:
    with open(f"{folder}/{name}") as f:
        records = [json.loads(line) for line in f if line.strip()]
    final = records[-1]
    if not final.get("final"):
        sys.exit(f"FAIL: {name}: the last record is not final")
    print(name, final.get("param_checksum"), len(records))
PY
}

# ---- 1. the image ----
"$DEPLOY/docker/build-runtime-image.sh" "$TERN" "$IMAGE"
podman run --rm "$IMAGE" --version
[[ $(podman image inspect --format '{{.Config.User}}' "$IMAGE") == tern ]] ||
  fail "the image does not run as the user tern"
echo "container_test: image ready after $(elapsed) s"

export TERN_IMAGE=$IMAGE TERN_MODEL=lenet TERN_DATASET=synthetic TERN_STEPS=$STEPS
export TERN_BATCH_SIZE=32 TERN_SEED=7 TERN_EVAL_EVERY=0 TERN_CHECKPOINT_EVERY=10
export TERN_LOG_LEVEL=info TERN_CODEC=terngrad

# ---- 2. local.yaml: 2 shards, 4 workers (2b: with tls-local.yaml) ----
export TERN_RUN_ID=ct-$$

# Runs local.yaml (plus the overrides in $2) as project $1: both shards
# healthy, every worker done with one checksum (left in local_sum), the
# shards exit 0 on SIGTERM. $3 runs once the shards are healthy, with their
# names.
run_local() {  # project "files" check-while-serving
  local project=$1 files=$2 while_serving=$3 t0 name attempt i
  PROJECTS+=("$project")
  t0=$(date +%s)
  compose "$project" "$files" up -d --no-build
  local workers=() shards=("$(container "$project" ps-0)" "$(container "$project" ps-1)")
  for i in 0 1 2 3; do workers+=("$(container "$project" "worker-$i")"); done
  # The compose healthcheck (`tern health`), run on demand: podman has no
  # timers without systemd. Both shards must become healthy.
  for name in "${shards[@]}"; do
    for attempt in $(seq 1 30); do
      podman healthcheck run "$name" >/dev/null 2>&1 && break
      [[ $attempt -lt 30 ]] || fail "$name never became healthy ($(podman inspect --format '{{.State.Status}}' "$name"))"
      sleep 1
    done
  done
  echo "container_test: $files: both shards healthy (tern health) after $(($(date +%s) - t0)) s"
  "$while_serving" "${shards[@]}"
  wait_exited 300 "${workers[@]}"
  expect_exit_0 "${workers[@]}"
  local took=$(($(date +%s) - t0))
  # Without systemd podman complains about healthcheck timers: exit codes tell.
  podman stop -t 20 "${shards[@]}" >/dev/null 2>&1
  expect_exit_0 "${shards[@]}"

  local runs records checksums
  runs=$(podman volume inspect --format '{{.Mountpoint}}' "${project}_runs")
  records=$(final_records "$runs" ct-$$-worker-{0,1,2,3}.jsonl) || fail "$records"
  echo "$records" | sed "s/^/$files: /"
  [[ $(echo "$records" | awk '{print $3}' | sort -u) == "$STEPS" ]] ||
    fail "$files: workers did not record $STEPS steps each"
  checksums=$(echo "$records" | awk '{print $2}' | sort -u)
  [[ $(echo "$checksums" | wc -l) -eq 1 && "$checksums" == 0x* ]] ||
    fail "$files: the workers' final checksums differ: $checksums"
  echo "container_test: $files: 4 workers x $STEPS steps, checksum $checksums, compose up to last worker done in ${took} s"
  local_sum=$checksums
}

# Plaintext is explicit: each shard warns that it serves in plaintext.
says_plaintext() {  # shard...
  local name log
  for name in "$@"; do
    log=$(podman logs "$name" 2>&1)
    [[ "$log" == *"--insecure: listening on 0.0.0.0:50051 in plaintext"* ]] ||
      fail "$name does not say that it serves in plaintext (TERN_INSECURE)"
  done
}

# Under TLS a shard warns of nothing, and refuses a plaintext health check.
speaks_tls_only() {  # shard...
  local name log
  for name in "$@"; do
    log=$(podman logs "$name" 2>&1)
    [[ "$log" != *"plaintext"* ]] || fail "$name serves in plaintext under tls-local.yaml: $log"
    if podman exec -e TERN_TLS_CERT= -e TERN_TLS_KEY= -e TERN_TLS_CA= "$name" \
      tern health localhost:50051 --timeout=3 >/dev/null 2>&1; then
      fail "$name answered a plaintext health check under tls-local.yaml"
    fi
  done
}

run_local "tern-ct-local-$$" local.yaml says_plaintext
plain_sum=$local_sum

# 2b. The certificates as tls-local.yaml's header makes them: a folder the
# image's user owns, `tern certs` run through the image, ca.key removed.
install -d -o 10001 -g 10001 "$WORK/compose/tls"
podman run --rm -v "$WORK/compose/tls:/out" "$IMAGE" \
  certs --out /out --run_id "$TERN_RUN_ID" --shards 2 --workers 4 >/dev/null ||
  fail "tern certs in the image could not write the certificates"
rm "$WORK/compose/tls/ca.key"
run_local "tern-ct-tls-$$" "local.yaml tls-local.yaml" speaks_tls_only
[[ "$local_sum" == "$plain_sum" ]] ||
  fail "tls-local.yaml: checksum $local_sum, but $plain_sum in plaintext (same seed and steps)"

# ---- 3. geo.yaml: 2 regions x 1 worker ----
GEO=tern-ct-geo-$$
PROJECTS+=("$GEO")
export TERN_GEO_RUN_ID=ctgeo-$$ TERN_GEO_MODE=weightgrad TERN_SYNC_EVERY=5
export TERN_GEO_REGIONS=2 TERN_GEO_WORKERS_PER_REGION=1 TERN_WAN_MBIT=100
t0=$(date +%s)
compose "$GEO" geo.yaml up -d --no-build global lps-0 lps-1 worker-0-0 worker-1-0
geo_workers=("$(container "$GEO" worker-0-0)" "$(container "$GEO" worker-1-0)")
servers=("$(container "$GEO" lps-0)" "$(container "$GEO" lps-1)" "$(container "$GEO" global)")
wait_exited 300 "${geo_workers[@]}"
expect_exit_0 "${geo_workers[@]}"
geo_s=$(($(date +%s) - t0))
for d in 0 1; do
  # Whole logs into variables: `grep -q` would cut the pipe (pipefail).
  log=$(podman logs "$(container "$GEO" "lps-$d")" 2>&1)
  [[ "$log" == *"shaped to 100 mbit/s"* ]] || fail "geo.yaml: lps-$d's WAN link was not shaped"
done
log=$(podman logs "$(container "$GEO" global)" 2>&1)
[[ $(grep -c "shaped to 100 mbit/s" <<<"$log") -ge 2 ]] ||
  fail "geo.yaml: the global server's WAN links were not shaped"
# Plaintext on the WAN is explicit (TERN_INSECURE): both ends say so.
[[ "$log" == *"--insecure: listening on 0.0.0.0:50060 in plaintext"* ]] ||
  fail "geo.yaml: the global server does not say that it serves in plaintext"
log=$(podman logs "$(container "$GEO" lps-0)" 2>&1)
[[ "$log" == *"--insecure: connecting to the global server at global:50060 in plaintext"* ]] ||
  fail "geo.yaml: lps-0 does not say that it reaches the global server in plaintext"
podman stop -t 20 "${servers[@]}" >/dev/null 2>&1
expect_exit_0 "${servers[@]}"

# Each LPS must have logged its own final checksum: one missing would
# otherwise leave the other's alone to "agree".
for d in 0 1; do
  log=$(podman logs "$(container "$GEO" "lps-$d")" 2>&1)
  sum=$(grep -o 'final synchronization done.*final checksum 0x[0-9a-f]*' <<<"$log" |
    grep -o '0x[0-9a-f]*$' | tail -n 1) || fail "geo.yaml: lps-$d logged no final checksum"
  lps_sums+=("$sum")
done
lps_checksums=$(printf '%s\n' "${lps_sums[@]}" | sort -u)
[[ $(echo "$lps_checksums" | wc -l) -eq 1 && "$lps_checksums" == 0x* ]] ||
  fail "geo.yaml: the LPSs end with checksums '$lps_checksums'"
runs=$(podman volume inspect --format '{{.Mountpoint}}' "${GEO}_runs")
records=$(final_records "$runs" ctgeo-$$-worker-{0,1}-0.jsonl) || fail "$records"
echo "$records" | sed 's/^/geo.yaml: /'
[[ $(echo "$records" | awk '{print $3}' | sort -u) == "$STEPS" ]] ||
  fail "geo.yaml: workers did not record $STEPS steps each"
[[ $(echo "$records" | awk '{print $2}' | sort -u) == "$lps_checksums" ]] ||
  fail "geo.yaml: workers end at $(echo "$records" | awk '{print $2}' | tr '\n' ' '), the LPSs at $lps_checksums"
echo "container_test: geo.yaml: 2 regions x 1 worker x $STEPS steps, LPS and worker checksum $lps_checksums, ${geo_s} s"

echo "container_test: PASS in $(elapsed) s"
