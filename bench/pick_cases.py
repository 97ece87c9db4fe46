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
                           [--exclude RECORDS.jsonl[.gz] [--exclude ...]] [--only-single] > ids.txt
  FEATURES: `tessera profile --list-features` output (.jsonl or .jsonl.gz; default: stdin, as '-'); --exclude (one
  file per use) skips the cases of this profile-record file (its "case" field: cases already profiled);
  --only-single skips whole requests (ids ending in "/whole").
  Exit status: 0 ids written; 1 no id written (empty input, every case excluded or skipped, or none beyond --low /
  --high: stderr says which); 2 a bad argument or input (one line naming the file and line). A stdout closed early
  (`| head`) ends it quietly, status 141 as for SIGPIPE.

Pipeline (docs/selection.md, "Profiling"):
  tessera profile --list-features --cases-per-split 100000 --families Q128K64 > f.jsonl
  python3 bench/pick_cases.py f.jsonl --exclude <merged records> > ids.txt
  CASE_IDS=ids.txt bench/run_table_inputs_gpu.sh     # on the GPU machine
"""
import argparse
import gzip
import itertools
import json
import math
import os
import signal
import sys
import zlib

PROG = "pick_cases.py"
SMS = 132  # the H200's streaming multiprocessors
SPLITS = ("profile", "eval")


def fail(where, what):
    """Exits with status 2 and one line on stderr: `pick_cases.py: <where>: <what>`."""
    print(f"{PROG}: {where}: {what}", file=sys.stderr)
    sys.exit(2)


def json_lines(path):
    """(line number, object) of each non-blank line of a .jsonl, .jsonl.gz or '-' (stdin); exits naming the line
    (read as bytes and decoded line by line, so that a line that is not UTF-8 is named exactly)."""
    name = "<stdin>" if path == "-" else path
    try:
        fh = sys.stdin.buffer if path == "-" else (gzip.open if path.endswith(".gz") else open)(path, "rb")
    except OSError as ex:
        fail(name, f"cannot be read ({ex.strerror or ex})")
    n = 0
    with fh:
        lines = iter(fh)
        while True:
            try:
                raw = next(lines, None)
            except (OSError, EOFError, zlib.error) as ex:  # a directory, a bad or truncated .gz, a read error
                fail(f"{name}:{n + 1}", f"cannot be read ({getattr(ex, 'strerror', None) or ex})")
            if raw is None:
                return
            n += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as ex:
                fail(f"{name}:{n}", f"not UTF-8 text ({ex.reason} at byte {ex.start + 1} of the line)")
            if n == 1 and line.startswith("\ufeff"):  # a byte-order mark, as tessera's readers accept
                line = line[1:]
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict) or not isinstance(obj.get("case"), str):
                    raise ValueError("no string field 'case'")
            except (ValueError, RecursionError) as ex:
                fail(f"{name}:{n}", f"not a JSON object with a 'case' ({ex})")
            yield n, obj


def longest_row_share_sms(features):
    """row_imbalance / grid_rows * SMS (0 when grid_rows is 0)."""
    rows = features["grid_rows"]
    return features["row_imbalance"] / rows * SMS if rows else 0.0


def checked(obj):
    """(key, split, features) of a --list-features object; ValueError naming the first field of the wrong type, or
    saying that the object is a profile record (records go to --exclude)."""
    if "plan" in obj and "latency_us" in obj:
        raise ValueError("a profile record (fields 'plan', 'latency_us'), not a --list-features line: give record "
                         "files with --exclude")
    for field in ("key", "split"):
        if not isinstance(obj.get(field), str):
            raise ValueError(f"field '{field}' is not a string: {json.dumps(obj.get(field))}")
    features = obj.get("features")
    if not isinstance(features, dict):
        raise ValueError(f"field 'features' is not an object: {json.dumps(features)}")
    for name in ("row_imbalance", "grid_rows"):
        v = features.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"feature '{name}' is not a finite number: {json.dumps(v)}")
    return obj["key"], obj["split"], features


def read_features(paths, done, only_single):
    """({(key, split): [(value, case id)]}, counts): the --list-features lines, each case once, without the `done`
    ids (and whole requests with `only_single`); counts of the distinct cases read, excluded and skipped as whole."""
    groups, seen, counts = {}, set(), {"read": 0, "excluded": 0, "whole": 0}
    for path in paths:
        for n, obj in json_lines(path):
            case = obj["case"]
            if case in seen:
                continue
            seen.add(case)
            counts["read"] += 1
            if case in done:
                counts["excluded"] += 1
                continue
            if only_single and case.endswith("/whole"):
                counts["whole"] += 1
                continue
            try:
                key, split, features = checked(obj)
                value = longest_row_share_sms(features)
            except (ValueError, ZeroDivisionError) as ex:
                fail(f"{'<stdin>' if path == '-' else path}:{n}", f"not a --list-features line ({ex})")
            groups.setdefault((key, split), []).append((value, case))
    return groups, counts


def pick(cases, low, high, per_key):
    """(ids, low count, high count): the cases below `low` (lowest first) and above `high` (highest first), at most
    `per_key` of each, alternating."""
    lows = sorted(c for c in cases if c[0] < low)[:per_key]
    highs = sorted((c for c in cases if c[0] > high), key=lambda c: (-c[0], c[1]))[:per_key]
    ids = [c[1] for c in itertools.chain(*itertools.zip_longest(lows, highs)) if c is not None]
    return ids, len(lows), len(highs)


def finite_float(text):
    """argparse type: a finite number (nan and inf are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 epilog=__doc__[__doc__.index("  Exit status:"):__doc__.index("\n\nPipeline")],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("features", nargs="*", default=["-"], metavar="FEATURES",
                    help="tessera profile --list-features output, .jsonl or .jsonl.gz (default: stdin, as '-')")
    ap.add_argument("--low", type=finite_float, default=1.0, help="take cases with longest_row_share * 132 below this")
    ap.add_argument("--high", type=finite_float, default=2.3,
                    help="take cases with longest_row_share * 132 above this")
    ap.add_argument("--per-key", type=int, default=12, help="at most this many cases per end, key and split")
    ap.add_argument("--exclude", action="append", default=[], metavar="RECORDS",
                    help="profile records (.jsonl or .jsonl.gz) whose cases are skipped; one file per --exclude "
                    "(repeat it for more)")
    ap.add_argument("--only-single", action="store_true", help="skip whole requests (ids ending in '/whole')")
    a = ap.parse_args(argv)
    if a.per_key < 0:
        ap.error("--per-key must be >= 0")
    if a.low > a.high:
        ap.error(f"--low {a.low} is above --high {a.high} (a case would be at both ends)")
    done = {obj["case"] for path in a.exclude for _, obj in json_lines(path)}
    groups, counts = read_features(a.features, done, a.only_single)
    order = sorted(groups, key=lambda g: (g[0], SPLITS.index(g[1]) if g[1] in SPLITS else len(SPLITS), g[1]))
    written = 0
    for key, split in order:
        ids, n_low, n_high = pick(groups[(key, split)], a.low, a.high, a.per_key)
        for case in ids:
            print(case)
        written += len(ids)
        print(f"{key} {split}: {n_low} below {a.low}, {n_high} above {a.high} (of {len(groups[(key, split)])})",
              file=sys.stderr)
    sys.stdout.flush()  # a closed pipe raises here, not at exit
    if written:
        return 0
    if not counts["read"]:
        why = f"no case picked: the input ({', '.join('<stdin>' if p == '-' else p for p in a.features)}) holds no case"
    elif not groups:
        why = (f"no case left: {counts['read']} read, {counts['excluded']} excluded (--exclude), "
               f"{counts['whole']} whole requests skipped (--only-single)")
    elif a.per_key == 0:
        why = f"no case picked: --per-key 0 takes none of the {sum(map(len, groups.values()))} cases left"
    else:
        why = (f"no case picked: none of the {sum(map(len, groups.values()))} cases left is below --low {a.low} or "
               f"above --high {a.high}")
    print(f"{PROG}: {why}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # stdout closed early (`pick_cases.py f | head -1`): end quietly, as on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        sys.exit(128 + getattr(signal, "SIGPIPE", 13))
