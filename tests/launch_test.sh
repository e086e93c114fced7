#!/usr/bin/env bash
# End to end, across processes: `tern launch` runs 2 shards and 3 workers of
# TernGrad's LeNet on the synthetic data set, then this checks what the run
# must show (DESIGN sections 3, 5, 7 and 8):
#   - launch exits 0 and writes a summary;
#   - every worker's loss falls;
#   - every worker ends with the same param_checksum (parameter localization);
#   - push and pull bytes per step match the sizes computed here from the
#     model's tensor sizes and the partition rule (2-bit codes + a scaler per
#     chunk; sums of 3 codes in ceil(log2 7) = 3 bits + a scaler: the run
#     names these fixed-size layouts, the defaults' sizes depend on the data);
# with --tls, every link mutual TLS with the run's own certificates (a
# plaintext client is refused by its shard);
# and how it fails: a bad flag gives exit 1 and names the flag; Ctrl-C,
# SIGTERM or SIGKILL of launch leaves no child running.
#
# Usage: launch_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

show() {
  echo "---- $1" >&2
  tail -n "${2:-60}" "$1" >&2 || true
}

# ---------------------------------------------------------------- a run ---
OUT="$TMP/run"
rc=0
"$TERN" launch --shards 2 --workers 3 --dataset synthetic --model lenet \
  --steps 40 --eval_every 20 --batch_size 32 --lr 0.01 --out_dir "$OUT" \
  --packing 2bit --sum_packing bits \
  --progress_every_s 5 >"$TMP/summary.txt" 2>"$TMP/launch.err" || rc=$?
if [[ $rc -ne 0 ]]; then
  show "$TMP/launch.err" 120
  show "$TMP/summary.txt"
  fail "tern launch exited $rc"
fi
cat "$TMP/summary.txt"
grep -q '^\[ps/1\] ' "$TMP/launch.err" || fail "no [ps/1] lines on stderr"
grep -q '^\[worker/2\] ' "$TMP/launch.err" || fail "no [worker/2] lines"
grep -q '^\[launch\] step ' "$TMP/launch.err" || fail "no progress lines"
for f in ps-0.log ps-1.log worker-0.log worker-1.log worker-2.log \
         worker-0.jsonl worker-1.jsonl worker-2.jsonl summary.json; do
  [[ -s "$OUT/$f" ]] || fail "$OUT/$f is missing or empty"
done

python3 - "$OUT" <<'PY'
import json, math, sys

out = sys.argv[1]
workers, steps = 3, 40

# LeNet of TernGrad (worker/models.h): conv1, conv2, fc1, logits, weight and
# bias each; partition_bytes 4 MiB = 1048576 floats a chunk at most, a tensor
# cut into k = ceil(n / max) chunks whose sizes differ by at most one
# (common/partitioner.h), so fc1 (3211264) is 4 chunks. (The default
# --shard_assignment even cuts fc1 where the second shard's half of the
# model begins, and each half in two: also 4 chunks, each within 2% of
# these, so the bytes below differ by a few in a million.)
tensors = [800, 32, 51200, 64, 3211264, 1024, 10240, 10]
max_elements = (4 << 20) // 4
chunks = []
for n in tensors:
    k = max(1, -(-n // max_elements))
    chunks += [n // k + (1 if i < n % k else 0) for i in range(k)]
assert len(chunks) == 11 and sum(chunks) == sum(tensors), chunks
bits = math.ceil(math.log2(2 * workers + 1))
push_expected = sum(-(-m // 4) + 4 for m in chunks)
pull_expected = sum(-(-(m * bits) // 8) + 4 for m in chunks)
fp32_expected = 4 * sum(tensors)

def near(value, expected, what):
    if abs(value - expected) > 0.05 * expected:
        sys.exit(f"FAIL: {what} = {value}, expected {expected} within 5%")

checksums = []
for w in range(workers):
    with open(f"{out}/worker-{w}.jsonl") as f:
        records = [json.loads(line) for line in f if line.strip()]
    steps_seen = [r["step"] for r in records]
    if steps_seen != list(range(steps)):
        sys.exit(f"FAIL: worker {w} recorded steps {steps_seen}")
    for r in records:
        if r["worker"] != w:
            sys.exit(f"FAIL: worker {w}'s file has a record of {r['worker']}")
        near(r["push_bytes"], push_expected, f"worker {w} step {r['step']} push_bytes")
        near(r["pull_bytes"], pull_expected, f"worker {w} step {r['step']} pull_bytes")
        if r["fp32_bytes"] != fp32_expected:
            sys.exit(f"FAIL: fp32_bytes {r['fp32_bytes']} != {fp32_expected}")
        if r["push_msg_bytes"] < r["push_bytes"] or r["pull_msg_bytes"] < r["pull_bytes"]:
            sys.exit(f"FAIL: a message smaller than its payload: {r}")
    first = sum(r["loss"] for r in records[:10]) / 10
    last = sum(r["loss"] for r in records[-10:]) / 10
    print(f"worker {w}: loss {first:.4f} (first 10 steps) -> {last:.4f} (last 10)")
    if not last < first:
        sys.exit(f"FAIL: worker {w}'s loss did not fall: {first} -> {last}")
    # Worker 0 evaluates every --eval_every steps; the others only at the
    # end (launch gives them --eval_every=0).
    evaluated = [r["step"] for r in records if "test_accuracy" in r]
    expected_evals = [19, 39] if w == 0 else [39]
    if evaluated != expected_evals:
        sys.exit(f"FAIL: worker {w} evaluated at steps {evaluated}, expected {expected_evals}")
    final = records[-1]
    if final.get("final") is not True or "param_checksum" not in final:
        sys.exit(f"FAIL: worker {w}'s last record is not a final one: {final}")
    if not 0 <= final["test_accuracy"] <= 1:
        sys.exit(f"FAIL: test_accuracy {final['test_accuracy']}")
    checksums.append(final["param_checksum"])
if len(set(checksums)) != 1:
    sys.exit(f"FAIL: final param_checksum differ: {checksums}")

with open(f"{out}/summary.json") as f:
    summary = json.load(f)
if summary["status"] != "ok" or summary["exit_code"] != 0:
    sys.exit(f"FAIL: summary status {summary['status']}")
if summary["checksums_agree"] is not True or summary["workers_finished"] != workers:
    sys.exit(f"FAIL: summary {summary}")
near(summary["push_bytes_per_step"], push_expected, "summary push_bytes_per_step")
near(summary["pull_bytes_per_step"], pull_expected, "summary pull_bytes_per_step")
near(summary["push_ratio_vs_fp32"], fp32_expected / push_expected, "push ratio")
near(summary["pull_ratio_vs_fp32"], fp32_expected / pull_expected, "pull ratio")
if summary["steps"] != steps or not summary["steps_per_s"] > 0:
    sys.exit(f"FAIL: summary steps {summary['steps']} at {summary['steps_per_s']}/s")
if summary["final_test_accuracy"] is None:
    sys.exit("FAIL: no final test accuracy in the summary")
print(f"push {summary['push_bytes_per_step']:.0f} B/step (expected {push_expected}), "
      f"pull {summary['pull_bytes_per_step']:.0f} B/step (expected {pull_expected}), "
      f"{summary['push_ratio_vs_fp32']:.2f}x / {summary['pull_ratio_vs_fp32']:.2f}x "
      f"less than fp32")
PY

# --------------------------------------------------------------- --tls ---
# `tern launch --tls` makes the run's CA and a certificate per identity in
# OUT/tls and every link is mutual TLS: the run trains to identical replicas,
# and while its shard serves (the workers take seconds to join) a client
# with a worker's certificate is answered, a plaintext one or one without a
# certificate is not. The workers are stopped (SIGSTOP) while the checks
# run, so that the shard outlives them however fast the workers train; the
# checks take a few seconds, well within the shard's 50 s barrier timeout.
OUT_TLS="$TMP/tls-run"
TLS_STEPS=60
"$TERN" launch --tls --shards 1 --workers 2 --dataset synthetic --model lenet \
  --steps "$TLS_STEPS" --eval_every 0 --batch_size 8 --out_dir "$OUT_TLS" \
  >"$TMP/tls.txt" 2>"$TMP/tls.err" &
tls_pid=$!
# The launcher starts the workers once its shard has written its port.
tls_workers_started() {
  mapfile -t tls_workers < <(pgrep -P "$tls_pid" -f ' worker ')
  [[ -s "$OUT_TLS/ps-0.port" && ${#tls_workers[@]} == 2 ]]
}
deadline=$((SECONDS + 60))
until tls_workers_started; do
  kill -0 "$tls_pid" 2>/dev/null || break
  [[ $SECONDS -lt $deadline ]] ||
    { kill -TERM "$tls_pid"; fail "--tls: no ps-0.port and two workers in 60 s"; }
  sleep 0.05
done
if tls_workers_started && kill -STOP "${tls_workers[@]}"; then
  shard="127.0.0.1:$(cat "$OUT_TLS/ps-0.port")"
  as_worker=(--tls_cert "$OUT_TLS/tls/worker-0.pem"
             --tls_key "$OUT_TLS/tls/worker-0.key"
             --tls_ca "$OUT_TLS/tls/ca.pem")
  # At once: each `tern health` takes a second or two to start and fail.
  "$TERN" health "$shard" --timeout 10 "${as_worker[@]}" >"$TMP/h1" 2>&1 &
  h1=$!
  "$TERN" health "$shard" --timeout 2 >"$TMP/h2" 2>&1 &
  h2=$!
  "$TERN" health "$shard" --timeout 2 --tls_ca "$OUT_TLS/tls/ca.pem" \
    >"$TMP/h3" 2>&1 &
  h3=$!
  rc1=0 rc2=0 rc3=0
  wait "$h1" || rc1=$?
  wait "$h2" || rc2=$?
  wait "$h3" || rc3=$?
  # The shard still serves: the refusals were TLS's, not a stopped shard's.
  rc4=0
  "$TERN" health "$shard" --timeout 10 "${as_worker[@]}" >"$TMP/h4" 2>&1 || rc4=$?
  kill -CONT "${tls_workers[@]}"
  ((rc1 == 0)) || { cat "$TMP/h1" >&2; fail "--tls: health with the worker's certificate failed"; }
  ((rc2 != 0)) || fail "--tls: a plaintext client got an answer from the shard"
  ((rc3 != 0)) || fail "--tls: a client without a certificate got an answer from the shard"
  ((rc4 == 0)) || { cat "$TMP/h4" >&2; fail "--tls: the shard stopped before the checks ended"; }
  echo "--tls: the shard answers a worker's certificate, refuses plaintext and no certificate"
else
  fail "--tls: the run ended before its shard could be asked (its workers: ${tls_workers[*]:-none found})"
fi
rc=0
wait "$tls_pid" || rc=$?
if [[ $rc -ne 0 ]]; then
  show "$TMP/tls.err" 80
  show "$TMP/tls.txt"
  fail "tern launch --tls exited $rc"
fi
cat "$TMP/tls.txt"
grep -q '^  tls  *mutual TLS on every link' "$TMP/tls.txt" ||
  fail "--tls: the summary does not say TLS was on"
for f in ca.pem ca.key ps-0.pem ps-0.key worker-0.pem worker-0.key \
         worker-1.pem worker-1.key; do
  [[ -s "$OUT_TLS/tls/$f" ]] || fail "--tls: $OUT_TLS/tls/$f is missing"
done
for f in ps-1.pem worker-2.pem global.pem lps-0.pem; do
  [[ ! -e "$OUT_TLS/tls/$f" ]] || fail "--tls: $f is not an identity of the run"
done
[[ $(stat -c %a "$OUT_TLS/tls/ps-0.key") == 600 ]] || fail "--tls: ps-0.key is not 0600"
python3 - "$OUT_TLS" "$TLS_STEPS" <<'PY'
import json, sys
out, steps = sys.argv[1], int(sys.argv[2])
with open(f"{out}/summary.json") as f:
    summary = json.load(f)
if summary["status"] != "ok" or summary["checksums_agree"] is not True:
    sys.exit(f"FAIL: --tls summary {summary}")
if summary["workers_finished"] != 2 or summary["steps"] != steps:
    sys.exit(f"FAIL: --tls run did not finish: {summary}")
tls = summary.get("tls")
if not tls or tls.get("mutual") is not True or tls.get("certs_dir") != f"{out}/tls":
    sys.exit(f"FAIL: summary.json tls = {tls}")
PY
grep -q '"tls": null' "$OUT/summary.json" || fail "a plaintext run's summary says tls"

# ----------------------------------------------------- --geo with --tls ---
# A WeightGrad run over mTLS: the LPS of data center d admits its worker w
# only with the certificate of worker d * W + w, the worker's index in the
# run (server/lps_service.h), and the global server each LPS only as itself.
OUT_GEO_TLS="$TMP/geo-tls-run"
"$TERN" launch --tls --geo weightgrad --datacenters 2 --workers_per_dc 1 \
  --dataset synthetic --model lenet --steps 6 --eval_every 0 \
  --out_dir "$OUT_GEO_TLS" >"$TMP/geo-tls.txt" 2>"$TMP/geo-tls.err" ||
  { show "$TMP/geo-tls.err" 80; fail "tern launch --tls --geo weightgrad failed"; }
grep -q 'LPS checksums agree' "$TMP/geo-tls.txt" ||
  { cat "$TMP/geo-tls.txt"; fail "--tls --geo: the LPSs do not agree"; }
if grep -q 'refused' "$OUT_GEO_TLS"/lps-*.log; then
  grep 'refused' "$OUT_GEO_TLS"/lps-*.log >&2
  fail "--tls --geo: an LPS refused one of the run's own workers"
fi
echo "--tls --geo weightgrad: 2 data centers x 1 worker over mTLS, LPSs agree"

# ------------------------------------------------------ configuration ---
expect_config_error() {
  local what=$1 needle=$2
  shift 2
  local rc=0
  "$@" >"$TMP/cfg.out" 2>"$TMP/cfg.err" || rc=$?
  [[ $rc -eq 1 ]] || { show "$TMP/cfg.err"; fail "$what: exit $rc, expected 1"; }
  grep -qF -- "$needle" "$TMP/cfg.err" ||
    { show "$TMP/cfg.err"; fail "$what: the message does not name $needle"; }
  [[ $(wc -l <"$TMP/cfg.err") -eq 1 ]] ||
    { show "$TMP/cfg.err"; fail "$what: more than one line"; }
}
expect_config_error "unknown flag" "--no_such_flag" \
  "$TERN" launch --no_such_flag=3 --out_dir "$TMP/never"
expect_config_error "bad value" "--batch_size" \
  "$TERN" launch --batch_size=0 --out_dir "$TMP/never"
expect_config_error "flag launch sets" "--ps" \
  "$TERN" launch --ps=127.0.0.1:1 --out_dir "$TMP/never"
expect_config_error "missing cluster spec" "$TMP/missing.json" \
  "$TERN" worker --cluster_spec "$TMP/missing.json"
echo '{"shards": ["127.0.0.1:1"], "num_workers": 0}' >"$TMP/bad.json"
expect_config_error "bad cluster spec" "$TMP/bad.json" \
  "$TERN" ps --cluster_spec "$TMP/bad.json"
[[ ! -e "$TMP/never" ]] || fail "a rejected launch created its output directory"
"$TERN" --version >"$TMP/version.txt" || fail "--version exited $?"
grep -q '^tern ' "$TMP/version.txt" || fail "--version printed no version"
for command in ps worker launch; do
  "$TERN" "$command" --help >"$TMP/help.txt" || fail "$command --help exited $?"
  grep -q -- "TERN_" "$TMP/help.txt" || fail "$command --help lists no env vars"
done

# ------------------------------------------------------------ stopping ---
# Starts a long run, waits until both workers are training, sends `signal`
# to launch and checks that launch ends with 128 + signal and leaves no
# child behind (children carry the output directory in their flags).
stop_run() {
  local signal=$1 number=$2
  local out="$TMP/stop-$signal"
  "$TERN" launch --shards 2 --workers 2 --dataset synthetic --model lenet \
    --steps 100000 --eval_every 0 --check_every 0 --batch_size 8 \
    --stop_timeout_s 10 --out_dir "$out" >"$out.stdout" 2>"$out.stderr" &
  local pid=$!
  local deadline=$((SECONDS + 120))
  until [[ -s "$out/worker-0.jsonl" && -s "$out/worker-1.jsonl" ]]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      show "$out.stderr"
      fail "$signal: launch ended before training began"
    fi
    [[ $SECONDS -lt $deadline ]] ||
      { kill -KILL "$pid"; show "$out.stderr"; fail "$signal: no training"; }
    sleep 0.2
  done
  pgrep -f -- "$out" >/dev/null || fail "$signal: no children found to begin with"
  kill "-$signal" "$pid"
  local rc=0
  wait "$pid" || rc=$?
  [[ $rc -eq $((128 + number)) ]] ||
    { show "$out.stderr"; fail "$signal: launch exited $rc, expected $((128 + number))"; }
  if [[ $signal != KILL ]]; then
    # launch reaps its children before it exits: none may be left now.
    if pgrep -af -- "$out" >&2; then fail "$signal: children outlived launch"; fi
    grep -q '"status": "interrupted"' "$out/summary.json" ||
      fail "$signal: summary.json does not say interrupted"
  else
    # PR_SET_PDEATHSIG kills the children once launch is gone.
    deadline=$((SECONDS + 10))
    while pgrep -f -- "$out" >/dev/null; do
      [[ $SECONDS -lt $deadline ]] ||
        { pgrep -af -- "$out" >&2; fail "KILL: children outlived launch"; }
      sleep 0.1
    done
  fi
  echo "$signal: launch exited $rc, no children left"
}
stop_run INT 2
stop_run TERM 15
stop_run KILL 9

echo PASS
