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


def points_difference(accuracy, reference):
    """accuracy - reference in percentage points, signed, as "+0.12".

    Rounded before formatting (and + 0.0 turns -0.0 into 0.0), so a
    difference under 0.005 points reads "+0.00", never "-0.00".
    """
    return "%+.2f" % (round(100 * (accuracy - reference), 2) + 0.0)


def mean_and_spread(accuracies):
    """Final accuracies over seeds as "90.34% ± 0.18": the mean in percent
    and half the range in points; one seed has no spread to show."""
    mean = 100 * sum(accuracies) / len(accuracies)
    if len(accuracies) == 1:
        return "%.2f%%" % mean
    return "%.2f%% ± %.2f" % (mean, 50 * (max(accuracies) - min(accuracies)))
