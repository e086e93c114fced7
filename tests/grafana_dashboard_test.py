#!/usr/bin/python3
"""deploy/grafana/tern-dashboard.json loads and asks only for what tern serves.

Usage: grafana_dashboard_test.py DASHBOARD METRICS_SOURCE...

- the file is valid JSON with unique panel ids, and every graph panel has
  at least one query;
- every metric a query names is one the sources register (a histogram's
  _bucket, _sum and _count series count as its own), and every label it
  groups or labels by is one they set (or a histogram's `le`);
- with Debian's promtool, every query parses as PromQL: they are checked
  as recording rules of a scratch rules file (`promtool check rules`).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def registered(sources):
    """The metric names and label keys the sources register."""
    names, labels = set(), {"le"}
    for path in sources:
        text = open(path).read()
        names.update(re.findall(r'"(tern_[a-z0-9_]+)"', text))
        labels.update(re.findall(r'\{\{?"([a-z_]+)",', text))
    return names, labels


def queries(dashboard):
    ids = [panel["id"] for panel in dashboard["panels"]]
    if len(ids) != len(set(ids)):
        sys.exit(f"FAIL: panel ids repeat: {ids}")
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        targets = panel.get("targets", [])
        if not targets:
            sys.exit(f"FAIL: panel '{panel['title']}' has no query")
        for target in targets:
            yield panel["title"], target["expr"], target.get("legendFormat", "")


def check_names(title, expr, legend, names, labels):
    for metric in re.findall(r"\btern_[a-z0-9_]+", expr):
        base = metric
        for suffix in HISTOGRAM_SERIES:
            if metric.endswith(suffix) and metric[: -len(suffix)] in names:
                base = metric[: -len(suffix)]
        if base not in names:
            sys.exit(f"FAIL: '{title}' queries {metric}, which tern does not serve")
    used = set(re.findall(r"\{\{(\w+)\}\}", legend))
    for group in re.findall(r"\bby \(([^)]*)\)", expr):
        used.update(label.strip() for label in group.split(","))
    unknown = used - labels
    if unknown:
        sys.exit(f"FAIL: '{title}' uses labels {sorted(unknown)} that tern does not set")


def check_promql(exprs):
    promtool = shutil.which("promtool")
    if promtool is None:
        print("SKIPPED the PromQL check: promtool is not installed")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as rules:
        rules.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, expr in enumerate(exprs):
            rules.write(f"      - record: dashboard_query_{i}\n")
            rules.write(f"        expr: {json.dumps(expr)}\n")
    try:
        subprocess.run([promtool, "check", "rules", rules.name], check=True)
    finally:
        os.unlink(rules.name)


def main():
    dashboard = json.load(open(sys.argv[1]))
    names, labels = registered(sys.argv[2:])
    if not names:
        sys.exit("FAIL: the sources register no tern_ metric")
    exprs = []
    for title, expr, legend in queries(dashboard):
        check_names(title, expr, legend, names, labels)
        exprs.append(expr)
    check_promql(exprs)
    print(f"PASS: {len(exprs)} queries over {len(names)} metrics")


if __name__ == "__main__":
    main()
