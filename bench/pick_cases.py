#!/usr/bin/env python3
"""Picks corpus cases to profile at both ends of the split choice: reads the JSON lines of `tessera profile
--list-features` and writes case ids for `tessera profile --case-ids` (one a line, stdout).

The value per case is the longest row's share of the work in SMs: longest_row_share * 132, where longest_row_share =
features["row_imbalance"] / features["grid_rows"] (the longest mask row's active blocks / all active blocks; 0 when
grid_rows is 0) and 132 is the H200's SM count. Below --low (1.0) the longest row is less than one SM's even share of
the work (split-KV buys nothing); above --high (2.3) it outlasts the rest of the grid (split-KV pays). Per key and
split, at most --per-key cases of each end are taken, the most extreme first; the two ends alternate in the output
(lowest, highest, second lowest, ...), so a time limit cuts both ends alike. Keys are sorted, the profiling split
before the evaluation split. Counts per key, split and end go to stderr.

Usage: bench/pick_cases.py [FEATURES.jsonl ...] [--low 1.0] [--high 2.3] [--per-key 12]
                           [--exclude RECORDS.jsonl[.gz] ...] [--only-single] > ids.txt
  FEATURES: `tessera profile --list-features` output (default or '-': stdin); --exclude skips the cases of these
  profile-record files (their "case" field: cases already profiled); --only-single skips whole requests (ids ending
  in "/whole").

Pipeline (docs/selection.md, "Profiling"):
  tessera profile --list-features --cases-per-split 100000 --families Q128K64 > f.jsonl
  python3 bench/pick_cases.py f.jsonl --exclude <merged records> > ids.txt
  CASE_IDS=ids.txt bench/run_table_inputs_gpu.sh     # on the GPU machine
"""
import argparse
import gzip
import itertools
import json
import sys

SMS = 132  # the H200's streaming multiprocessors
SPLITS = ("profile", "eval")


def json_lines(path):
    """(line number, object) of each non-blank line of a .jsonl, .jsonl.gz or '-' (stdin); exits naming the line."""
    try:
        fh = sys.stdin if path == "-" else (gzip.open if path.endswith(".gz") else open)(path, "rt")
    except OSError as ex:
        sys.exit(f"pick_cases: {path}: cannot be read ({ex.strerror or ex})")
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict) or not isinstance(obj.get("case"), str):
                    raise ValueError("no string field 'case'")
            except ValueError as ex:
                sys.exit(f"pick_cases: {path} line {n}: not a JSON object with a 'case' ({ex})")
            yield n, obj


def longest_row_share_sms(features):
    """row_imbalance / grid_rows * SMS (0 when grid_rows is 0)."""
    rows = features["grid_rows"]
    return features["row_imbalance"] / rows * SMS if rows else 0.0


def read_features(paths, skip):
    """{(key, split): [(value, case id)]} of the --list-features lines, each case once, without the `skip` ids."""
    groups, seen = {}, set()
    for path in paths:
        for n, obj in json_lines(path):
            case = obj["case"]
            if case in seen or skip(case):
                continue
            seen.add(case)
            try:
                value = longest_row_share_sms(obj["features"])
                group = (obj["key"], obj["split"])
            except (KeyError, TypeError, ZeroDivisionError) as ex:
                sys.exit(f"pick_cases: {path} line {n}: not a --list-features line ({type(ex).__name__}: {ex})")
            groups.setdefault(group, []).append((value, case))
    return groups


def pick(cases, low, high, per_key):
    """(ids, low count, high count): the cases below `low` (lowest first) and above `high` (highest first), at most
    `per_key` of each, alternating."""
    lows = sorted(c for c in cases if c[0] < low)[:per_key]
    highs = sorted((c for c in cases if c[0] > high), key=lambda c: (-c[0], c[1]))[:per_key]
    ids = [c[1] for c in itertools.chain(*itertools.zip_longest(lows, highs)) if c is not None]
    return ids, len(lows), len(highs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("features", nargs="*", default=["-"], help="tessera profile --list-features output ('-': stdin)")
    ap.add_argument("--low", type=float, default=1.0, help="take cases with longest_row_share * 132 below this")
    ap.add_argument("--high", type=float, default=2.3, help="take cases with longest_row_share * 132 above this")
    ap.add_argument("--per-key", type=int, default=12, help="at most this many cases per end, key and split")
    ap.add_argument("--exclude", nargs="+", action="extend", default=[], metavar="RECORDS",
                    help="profile records (.jsonl or .jsonl.gz) whose cases are skipped")
    ap.add_argument("--only-single", action="store_true", help="skip whole requests (ids ending in '/whole')")
    a = ap.parse_args(argv)
    if a.per_key < 0:
        ap.error("--per-key must be >= 0")
    if a.low > a.high:
        ap.error(f"--low {a.low} is above --high {a.high} (a case would be at both ends)")
    done = {obj["case"] for path in a.exclude for _, obj in json_lines(path)}
    skip = lambda case: case in done or (a.only_single and case.endswith("/whole"))  # noqa: E731
    groups = read_features(a.features, skip)
    order = sorted(groups, key=lambda g: (g[0], SPLITS.index(g[1]) if g[1] in SPLITS else len(SPLITS), g[1]))
    for key, split in order:
        ids, n_low, n_high = pick(groups[(key, split)], a.low, a.high, a.per_key)
        for case in ids:
            print(case)
        print(f"{key} {split}: {n_low} below {a.low}, {n_high} above {a.high} (of {len(groups[(key, split)])})",
              file=sys.stderr)


if __name__ == "__main__":
    main()
