"""bench/selection_study.py's command line: each mode runs on made-up records (a smoke test, not the study's
numbers); --min-leaf below 1, CASE_STATS (a stray positional) for noise or derived, features-only options for
another mode and unknown options are argparse errors (exit 2) before any record is read; -h names the feature counts
of both schemas (seven for features, twelve for derived). Record files: blank lines and a leading BOM accepted; one
that cannot be read, is empty, cut or holds a bad line: one line naming the file (and line), exit 2, no traceback;
noise without near-duplicate pairs says so (exit 0, also on a real record file). Needs numpy (skipped without it);
no binary."""
import gzip
import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("numpy")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "selection_study.py")
REAL = os.path.join(REPO, "bench", "results", "h200_session24", "profile_whole_s1_b8ef57d.jsonl.gz")  # read only
V4 = ["batch_heads", "seq_len", "density", "run_coverage", "mean_run_length", "mean_row_active", "row_imbalance",
      "grid_rows", "active_blocks", "coarsen_cost2", "coarsen_cost4", "coarsen_cost8"]


def records(path, twins=True):
    """Two plans on 24 cases of one key, twins of the same features and request (6 requests, 4 profiling + 2
    evaluation): p is faster on dense cases. twins=False: every case's features differ (no near-duplicate pair)."""
    with open(path, "w") as f:
        for i in range(24):
            pair, dense = i // 2, i // 2 % 2 == 0
            features = {name: 1.0 + (pair if twins else i) for name in V4}
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
                       (("features", missing, "--min-leaf", "4", "cs.jsonl"), "argument --min-leaf: not an integer: "
                        "'cs.jsonl' (it takes every value after it: give RECORDS and CASE_STATS before --min-leaf)"),
                       (("features", missing), "features needs CASE_STATS"),
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


def test_record_files(tmp_path):
    text = open(records(tmp_path / "r.jsonl")).read()
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\n \n", 1).encode() + b"\n\t\n")
    p = study("noise", tmp_path / "bom.jsonl")  # a BOM, a whitespace-only line and a trailing blank one
    assert p.returncode == 0 and "near-duplicate pairs: 12;" in p.stdout, p.stderr
    data = gzip.compress(text.encode())
    (tmp_path / "cut.jsonl.gz").write_bytes(data[:len(data) // 2])
    (tmp_path / "empty.jsonl").write_text("\n")
    (tmp_path / "invalid.jsonl").write_text(text.replace('"valid": true', '"valid": false'))
    (tmp_path / "nojson.jsonl").write_text(text + "{not json\n")
    (tmp_path / "nokey.jsonl").write_text('{"case": "F/s/0"}\n')
    (tmp_path / "evalonly.jsonl").write_text(text.replace('"split": "profile"', '"split": "eval"'))
    (tmp_path / "dir.jsonl").mkdir()
    for name, mode, want in [("missing.jsonl", "noise", ": cannot be read (No such file or directory)"),
                             ("dir.jsonl", "derived", ": cannot be read (Is a directory)"),
                             ("empty.jsonl", "derived", ": holds no profile record"),
                             ("invalid.jsonl", "noise", ": holds no valid profile record (valid, latency_us > 0) in "
                              "48 records"),
                             ("cut.jsonl.gz", "derived", ": cannot be read (Compressed file ended"),  # :<line>
                             ("nojson.jsonl", "noise", ":49: not JSON (JSONDecodeError: "),
                             ("nokey.jsonl", "noise", ":1: not a profile record (KeyError: 'key')"),
                             ("evalonly.jsonl", "derived", ': no profiling-split case (split "profile") of key '
                              "sm90a.bf16.d128.q64.kv64")]:
        p = study(mode, tmp_path / name)
        line = p.stderr.rstrip("\n")
        if name == "cut.jsonl.gz":  # the line where the data ends depends on the compressor
            line = re.sub(r":\d+: cannot", ": cannot", line, count=1)
        assert p.returncode == 2 and p.stdout == "" and "\n" not in line, (name, p.stderr)
        assert line.startswith(f"selection_study.py: {tmp_path / name}{want}"), (name, p.stderr)
    r = records(tmp_path / "r.jsonl")
    p = study("features", r, tmp_path / "missing_stats.jsonl", "--min-leaf", "2")
    assert p.returncode == 2 and p.stderr == f"selection_study.py: {tmp_path}/missing_stats.jsonl: cannot be read (No " \
        "such file or directory)\n", p.stderr
    (tmp_path / "stats.jsonl").write_text('{"case": "F/s/0"}\n')
    p = study("features", r, tmp_path / "stats.jsonl", "--min-leaf", "2")
    assert p.returncode == 2 and p.stderr == f"selection_study.py: {tmp_path}/stats.jsonl:1: not a case-stats line " \
        "(KeyError: 'shape')\n", p.stderr


def test_noise_without_near_duplicates(tmp_path):
    for path in (records(tmp_path / "r.jsonl", twins=False), REAL):
        if not os.path.exists(path):
            continue
        p = study("noise", path)
        assert p.returncode == 0 and p.stdout.startswith("near-duplicate pairs: 0 (no two cases") and \
            "Traceback" not in p.stderr, p.stdout + p.stderr
