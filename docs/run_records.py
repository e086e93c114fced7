"""What the docs' table scripts read from a `tern launch` run directory."""

import json
import os


def training_seconds(run_dir):
    """Worker 0's time for all its steps, its evaluations (eval_s) left out.

    None when the run wrote no records.
    """
    path = os.path.join(run_dir, "worker-0.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not records:
        return None
    return records[-1]["wall_s"] - sum(r.get("eval_s", 0) for r in records)
