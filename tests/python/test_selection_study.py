"""bench/selection_study.py's command line: each mode runs on made-up records (a smoke test, not the study's
numbers); --min-leaf below 1, CASE_STATS (a stray positional) for noise or derived, features-only options for
another mode and unknown options are argparse errors (exit 2) before any record is read; -h names the feature counts
of both schemas (seven for features, twelve for derived). Needs numpy (skipped without it); no binary."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("numpy")

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench",
                      "selection_study.py")
V4 = ["batch_heads", "seq_len", "density", "run_coverage", "mean_run_length", "mean_row_active", "row_imbalance",
      "grid_rows", "active_blocks", "coarsen_cost2", "coarsen_cost4", "coarsen_cost8"]


def records(path):
    """Two plans on 24 cases of one key, twins of the same features and request (6 requests, 4 profiling + 2
    evaluation): p is faster on dense cases."""
    with open(path, "w") as f:
        for i in range(24):
            pair, dense = i // 2, i // 2 % 2 == 0
            features = {name: 1.0 + pair for name in V4}
            features["density"] = 0.5 if dense else 0.05
            split = "eval" if pair % 6 >= 4 else "profile"
            for plan, lat in (("p", 1.0 if dense else 1.3), ("q", 1.2 + 0.01 * (i % 2))):
                f.write(json.dumps({"case": f"F/s/{i}", "key": "sm90a.bf16.d128.q64.kv64", "split": split,
                                    "request": f"r{pair % 6}", "features": features, "plan": plan, "valid": True,
                                    "latency_us": lat}) + "\n")
    return str(path)


def study(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=120)


def test_valid_runs(tmp_path):
    r = records(tmp_path / "r.jsonl")
    p = study("derived", r, "--min-leaf", "2", "1", "--per-key")
    assert p.returncode == 0 and "min_leaf   2 (schema v4)" in p.stdout, p.stdout + p.stderr
    assert "min_leaf   1 + longest_row_share" in p.stdout and "q64.kv64 d" in p.stdout, p.stdout
    p = study("noise", r)
    assert p.returncode == 0 and "near-duplicate pairs: 12;" in p.stdout, p.stderr


def test_argument_errors(tmp_path):
    missing = tmp_path / "missing.jsonl"  # never read: every error comes first
    for args, want in [(("derived", missing, "--min-leaf", "0"), "argument --min-leaf: must be >= 1"),
                       (("derived", missing, "--min-leaf", "4", "-1"), "argument --min-leaf: must be >= 1"),
                       (("features", missing, "cs.jsonl", "--min-leaf", "x"), "argument --min-leaf: not an integer"),
                       (("derived", missing, "stray"), "derived takes RECORDS only, not 'stray'"),
                       (("noise", missing, "stray"), "noise takes RECORDS only, not 'stray'"),
                       (("derived", missing, "--only", "n_kvb", "--quantiles", "4"), "--only, --quantiles: for "
                        "features only, not derived"),
                       (("features", missing, "cs.jsonl", "stray"), "unrecognized arguments: stray"),
                       (("derived", missing, "--bogus"), "unrecognized arguments: --bogus")]:
        p = study(*args)
        assert p.returncode == 2 and want in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
    p = study("-h")
    assert p.returncode == 0 and "seven features of format version 2" in p.stdout and "twelve of format version 4" in \
        p.stdout and "leaf minimums" in p.stdout, p.stdout
