"""Offline study of plan-table regret (bench/NOTES.md, "Plan selection: regret within a source").

Usage:
  python3 bench/selection_study.py noise RECORDS
      Near-duplicate cases (same key and request, every feature within 0.5%): how far their plan-latency ratios
      differ, and the regret of choosing one case's fastest plan for its twin (the measurement-noise floor).
  python3 bench/selection_study.py features RECORDS CASE_STATS [--min-leaf N ...] [--drop F ...] [--base F,...]
                                           [--only F ...] [--quantiles N] [--per-key]
      Profiling-split cross-validated log-regret (the compiler's depth criterion, per profiling case over all keys)
      and evaluation-split regret of tables compiled with the schema's features plus one candidate feature derived
      from mu(M)'s counters (CASE_STATS from `tessera profile-refeature --case-stats`), for each leaf minimum.
  python3 bench/selection_study.py derived RECORDS [--min-leaf N ...] [--per-key]
      The same for the current schema (format version 4, SCHEMA_V4: twelve features, as `tessera compile-table`
      today) plus each candidate computed from the records' own features (DERIVED), no case stats needed. RECORDS:
      the merged records of the embedded table (bench/merge_profile_records.py over src/core/plan_tables/sm90a.inputs).

RECORDS: profile records (.jsonl or .jsonl.gz). `features` compiles with the seven features of format version 2
(SCHEMA; records of format version 1's six-feature schema: `tessera profile-refeature` first), `derived` with the
twelve of format version 4 (SCHEMA_V4, the current schema of src/core/features.cpp); `noise` compares every feature
the records carry. The compiler here is a Python copy of src/core/table_compiler.cpp (greedy tree, folds by request,
leaf rankings by geometric mean, ties by plan id) used only for this exploration: it reproduces
`tessera compile-table` exactly (six features: geomean 1.0172, P95 1.1177, P99 1.2947 on
bench/results/h200_session3/profile.jsonl.gz; 1.0109 / 1.0599 / 1.1784 on all three rounds, 127,998 records;
seven: see bench/NOTES.md, "Feature study on all three rounds"; twelve: `derived --min-leaf 4` on the embedded
table's merged records, 1.0147 / 1.1079 / 1.2694). Needs numpy.

RECORDS and CASE_STATS: JSON lines, blank lines skipped, a leading UTF-8 BOM accepted (as `tessera compile-table`); a
file that cannot be read, holds no valid record or a line that is not one: `selection_study.py: FILE[:LINE]: what` on
stderr, exit status 2. --min-leaf takes every value after it: give it after the positional arguments.
"""
import argparse
import bisect
import collections
import math
import sys

import numpy as np

from json_lines import json_lines

SCHEMA = {  # src/core/features.cpp, FeatureSchema::default_schema()
    "batch_heads": [8, 16, 24, 32, 48, 64, 128, 256],
    "seq_len": [4096, 8192, 16384, 32768, 65536, 98304, 131072],
    "density": [0.02, 0.04, 0.06, 0.08, 0.10, 0.12, 0.15, 0.2, 0.3, 0.5, 0.8],
    "run_coverage": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "mean_run_length": [1.25, 1.5, 2, 3, 4, 6, 8, 16],
    "mean_row_active": [2, 4, 8, 16, 32, 64, 128, 256],
    "row_imbalance": [1.01, 1.1, 1.5, 2, 4, 8, 16],  # format version 2 (bench/NOTES.md, "Feature study ...")
}
# src/core/features.cpp's default schema at format version 4 (the embedded table's): SCHEMA plus the request-size
# features (version 3) and the Coarsened-Q costs (version 4).
SCHEMA_V4 = dict(SCHEMA, grid_rows=[264, 528, 1056, 2112, 4224, 8448, 16896, 33792, 67584],
                 active_blocks=[1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7],
                 **{f"coarsen_cost{g}": [1.02, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.5, 1.6, 1.8]
                    for g in (2, 4, 8)})
# Candidates computed from a record's features alone: name -> (value from the features f, bucket edges).
DERIVED = {
    # The longest mask row's share of the request's active blocks (max_row_active / active_blocks); edges in units of
    # one H200 SM's even share (1/132): above ~1 the longest row outlasts an even spread of the work, which is what
    # split-KV is for (session 23: it orders the split choice of the single-head Q128K64 cases, split1 / 2 / 4).
    "longest_row_share": (lambda f: f["row_imbalance"] / f["grid_rows"] if f["grid_rows"] else 0.0,
                          [x / 132 for x in (0.125, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 4, 6, 8)]),
}
LOG2 = [2.0 ** i for i in range(-4, 26)]
CANDIDATES = {  # name: (value from the mask shape s, counters k, mask rows and the request's batch*heads, bucket edges)
    "row_imbalance": (lambda s, k, rows, bh: k["max_row_active"] * rows / k["active_blocks"] if k["active_blocks"] else 0,
                      [1.01, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16]),
    "max_row_fraction": (lambda s, k, rows, bh: k["max_row_active"] / s["n_kvb"],
                         [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.99]),
    "max_row_active": (lambda s, k, rows, bh: k["max_row_active"], LOG2),
    "empty_row_fraction": (lambda s, k, rows, bh: k["empty_rows"] / rows, [0.001, 0.01, 0.05, 0.1, 0.2, 0.5]),
    "runs_per_row": (lambda s, k, rows, bh: k["runs"] / rows, [1, 2, 4, 8, 16, 32, 64, 128]),
    "active_per_nonempty_row": (lambda s, k, rows, bh: k["active_blocks"] / max(rows - k["empty_rows"], 1), LOG2),
    # runs of length >= 2: runs - singles, singles = active - blocks_in_long_runs
    "long_run_length": (lambda s, k, rows, bh: k["blocks_in_long_runs"] / max(
        k["runs"] - (k["active_blocks"] - k["blocks_in_long_runs"]), 1), [1.5, 2, 3, 4, 6, 8, 12, 16, 32, 64]),
    "long_runs_per_row": (lambda s, k, rows, bh: (k["runs"] - k["active_blocks"] + k["blocks_in_long_runs"]) / rows,
                          [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]),
    "singles_per_row": (lambda s, k, rows, bh: (k["active_blocks"] - k["blocks_in_long_runs"]) / rows,
                        [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]),
    "n_kvb": (lambda s, k, rows, bh: s["n_kvb"], LOG2),
    "tile_rows": (lambda s, k, rows, bh: bh * s["n_qb"], LOG2),  # query tiles of the request (CTAs of split1)
    "work_blocks": (lambda s, k, rows, bh: bh * s["n_qb"] * k["active_blocks"] / rows, LOG2),  # active tiles
    "mask_heads_broadcast": (lambda s, k, rows, bh: s["batch"] * s["heads"] / bh, [0.5, 0.99]),
}


PROG = "selection_study.py"


def fail(where, what):
    """Exits with status 2 and one line on stderr: `selection_study.py: <where>: <what>`."""
    print(f"{PROG}: {where}: {what}", file=sys.stderr)
    sys.exit(2)


def records_lines(path):
    """(line number, value) of each non-blank line of a .jsonl / .jsonl.gz file, a leading UTF-8 BOM accepted (as
    `tessera compile-table`); a file that cannot be read or a line that is no JSON exits naming the file (and line)."""
    return json_lines(path, fail, encoding="utf-8-sig")


def load(path):
    cases, n_records = {}, 0
    for n, r in records_lines(path):
        try:
            c = cases.setdefault(r["case"], dict(id=r["case"], key=r["key"], split=r["split"], lat={}, default=None,
                                                 request=r.get("request") or r["source"], features=r["features"]))
            if r["valid"] and r["latency_us"] > 0:
                c["lat"][r["plan"]] = r["latency_us"]
            if r.get("role", "").startswith("default"):
                c["default"] = r["plan"]
        except (KeyError, TypeError, AttributeError) as ex:
            fail(f"{path}:{n}", f"not a profile record ({type(ex).__name__}: {ex})")
        n_records += 1
    cases = {k: c for k, c in cases.items() if c["lat"]}
    if not cases:
        fail(path, f"holds no valid profile record (valid, latency_us > 0) in {n_records} records" if n_records else
             "holds no profile record")
    return cases


class Key:
    """The profiling cases of one key as a latency matrix (NaN = not valid) and bucketed features."""

    def __init__(self, cases, feats, edges):
        self.plans = sorted({p for c in cases for p in c["lat"]})
        col = {p: j for j, p in enumerate(self.plans)}
        self.lat = np.full((len(cases), len(self.plans)), np.nan)
        for i, c in enumerate(cases):
            for p, v in c["lat"].items():
                self.lat[i, col[p]] = v
        self.log = np.log(self.lat)
        self.best = np.nanmin(self.lat, axis=1)
        self.worst = np.nanmax(self.lat, axis=1)
        self.buckets = np.array([[bisect.bisect_right(edges[f], c["features"][f]) for f in feats] for c in cases])

    def rank(self, idx, base):
        sub = self.log[idx]
        ok = ~np.isnan(sub).any(axis=0)
        g = np.where(ok, np.nanmean(sub, axis=0), np.inf)
        out = []
        for j in np.argsort(g, kind="stable"):
            if not ok[j]:
                break
            out.append(j)
            if j == base:
                break
        return out if out and out[-1] == base else out + [base]

    def selected(self, i, ranking):
        for j in ranking:
            if not np.isnan(self.lat[i, j]):
                return self.lat[i, j]
        return self.worst[i]

    def cost(self, idx, base):
        r = self.rank(idx, base)
        return sum(math.log(self.selected(i, r) / self.best[i]) for i in idx)

    def splits(self, idx, min_leaf):
        """Every split of the cases idx at a bucket edge leaving >= min_leaf cases each side: (f, v, left, right)."""
        for f in range(self.buckets.shape[1]):
            for v in sorted(set(self.buckets[idx, f]))[:-1]:
                left = [i for i in idx if self.buckets[i, f] <= v]
                right = [i for i in idx if self.buckets[i, f] > v]
                if min(len(left), len(right)) >= min_leaf:
                    yield f, v, left, right

    def split_cost(self, side, base, depth, min_leaf):
        """Score of one side of a candidate split (depth: what the tree may still grow below it)."""
        return self.cost(side, base)

    def grow(self, idx, base, depth, min_leaf, nodes):
        me = len(nodes)
        nodes.append(None)
        best = (self.cost(idx, base) - 1e-9, -1, 0)
        if depth > 0 and len(idx) >= 2 * min_leaf:
            for f, v, left, right in self.splits(idx, min_leaf):
                c = self.split_cost(left, base, depth - 1, min_leaf) + self.split_cost(right, base, depth - 1, min_leaf)
                if c < best[0]:
                    best = (c, f, v)
        _, f, v = best
        if f < 0:
            nodes[me] = ("leaf", self.rank(idx, base))
            return me
        a = self.grow([i for i in idx if self.buckets[i, f] <= v], base, depth - 1, min_leaf, nodes)
        b = self.grow([i for i in idx if self.buckets[i, f] > v], base, depth - 1, min_leaf, nodes)
        nodes[me] = ("split", f, v, a, b)
        return me


def lookup(nodes, b):
    i = 0
    while nodes[i][0] == "split":
        _, f, v, a, c = nodes[i]
        i = a if b[f] <= v else c
    return nodes[i][1]


def base_plan(k, cases):
    """Column of the key's base plan: the cases' "default" plan, else the plan valid on the most cases, then the
    lowest geometric mean (as the compiler)."""
    base_id = next((c["default"] for c in cases if c["default"]), None)
    if base_id in k.plans:
        return k.plans.index(base_id)
    n, g = (~np.isnan(k.lat)).sum(axis=0), np.nanmean(k.log, axis=0)
    return min(range(len(k.plans)), key=lambda j: (-n[j], g[j]))


def compile_key(cases, feats, edges, min_leaf, max_depth=6, folds=5, key_class=Key, group_by_source=False,
                deepest_tie=False, **key_options):
    """The compiler's per-key step. Defaults reproduce `tessera compile-table`; the keyword options are the
    variants of bench/selection_variants.py: folds=0 (one fold per group), group_by_source (folds by source, not
    request), deepest_tie (the deepest of equally good depths), key_class/key_options (split scoring)."""
    k = key_class(cases, feats, edges, **key_options)
    base = base_plan(k, cases)
    group = [c["request"].split("#")[0] if group_by_source else c["request"] for c in cases]
    reqs = sorted(set(group))
    nf = min(folds, len(reqs)) if folds > 0 else len(reqs)
    fold = {r: i % max(nf, 1) for i, r in enumerate(reqs)}
    depth, best = 0, math.inf
    for d in range(max_depth + 1 if nf >= 2 else 0):
        total = 0
        for f in range(nf):
            train = [i for i in range(len(cases)) if fold[group[i]] != f]
            test = [i for i in range(len(cases)) if fold[group[i]] == f]
            nodes = []
            k.grow(train, base, d, max(1, math.floor(min_leaf * len(train) / len(cases))), nodes)
            total += sum(math.log(k.selected(i, lookup(nodes, k.buckets[i])) / k.best[i]) for i in test)
        if total / len(cases) < best - 1e-12 or (deepest_tie and total / len(cases) <= best + 1e-12):
            depth, best = d, min(best, total / len(cases))
    k.cv_log_regret = best if nf >= 2 else 0.0  # mean held-out log-regret per case at the chosen depth
    k.depth = depth
    nodes = []
    k.grow(list(range(len(cases))), base, depth, min_leaf, nodes)
    return k, nodes


def regrets(cases, feats, edges, min_leaf, **options):
    """Evaluation-split regret (selected / fastest valid) per case, tables compiled per key by compile_key."""
    return evaluate(cases, feats, edges, min_leaf, **options)[2]


def summary(v):
    v = sorted(v)

    def pct(q):
        pos = q * (len(v) - 1)
        lo = int(pos)
        return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (pos - lo)

    return (f"geomean {math.exp(sum(map(math.log, v)) / len(v)):.4f} P95 {pct(0.95):.4f} P99 {pct(0.99):.4f} "
            f"max {v[-1]:.4f} ({len(v)} cases)")


def noise(cases):
    by_req = collections.defaultdict(list)
    for c in cases.values():
        by_req[(c["key"], c["request"])].append(c)
    pairs, diffs, twin = 0, [], []
    for cs in by_req.values():
        for i, a in enumerate(cs):
            for b in cs[i + 1:]:
                if any(abs(a["features"][f] - b["features"][f]) > 0.005 * max(abs(a["features"][f]), 1e-12)
                       for f in a["features"]):
                    continue
                pairs += 1
                ba, bb = min(a["lat"].values()), min(b["lat"].values())
                diffs += [abs(math.log(a["lat"][p] / ba) - math.log(b["lat"][p] / bb)) for p in set(a["lat"]) & set(b["lat"])]
                wa, wb = min(a["lat"], key=a["lat"].get), min(b["lat"], key=b["lat"].get)
                twin += [b["lat"][wa] / bb] if wa in b["lat"] else []
                twin += [a["lat"][wb] / ba] if wb in a["lat"] else []
    if not pairs:
        print("near-duplicate pairs: 0 (no two cases of one key and request with every feature within 0.5%): no noise "
              "floor to estimate")
        return
    diffs.sort()
    print(f"near-duplicate pairs: {pairs}; |log latency-ratio difference| median {diffs[len(diffs) // 2]:.4f}, "
          f"P90 {diffs[int(0.9 * len(diffs))]:.4f}" if diffs else f"near-duplicate pairs: {pairs}; no plan valid on "
          "both cases of a pair")
    if twin:
        print("regret of the twin's fastest plan:", summary(twin))


def positive_int(text):
    """argparse type: an integer >= 1 (a leaf minimum)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r} (it takes every value after it: give RECORDS "
                                         "and CASE_STATS before --min-leaf)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be >= 1 (cases per leaf), got {value}")
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["noise", "features", "derived"])
    ap.add_argument("records", metavar="RECORDS")
    ap.add_argument("case_stats", metavar="CASE_STATS", nargs="?",
                    help="features: tessera profile-refeature --case-stats output")
    ap.add_argument("--min-leaf", type=positive_int, nargs="+", default=[32, 16, 8],
                    help="features, derived: the leaf minimums to compare, each >= 1 (default 32 16 8; the "
                    "embedded table: 4); after the positional arguments (it takes every value that follows)")
    ap.add_argument("--only", nargs="+", help="features: only these candidates")
    ap.add_argument("--drop", nargs="+", help="features: schema features left out in every row (--drop "
                    "row_imbalance gives the six-feature schema of format version 1)")
    ap.add_argument("--base", help="features: candidates (comma-separated) added to the schema in every row")
    ap.add_argument("--quantiles", type=int, default=0, help="features: candidate edges at N-quantiles of the "
                    "profiling cases (all keys) instead of the fixed edges")
    ap.add_argument("--per-key", action="store_true",
                    help="features, derived: also print depth, CV and eval geomean per key")
    a = ap.parse_args()
    if a.what != "features":
        if a.case_stats is not None:
            ap.error(f"{a.what} takes RECORDS only, not {a.case_stats!r} (CASE_STATS is for features)")
        given = [o for o, v in (("--only", a.only), ("--drop", a.drop), ("--base", a.base),
                                ("--quantiles", a.quantiles)) if v]
        if given:
            ap.error(f"{', '.join(given)}: for features only, not {a.what}")
    elif not a.case_stats:
        ap.error("features needs CASE_STATS (tessera profile-refeature --case-stats)")
    cases = load(a.records)
    if a.what == "noise":
        return noise(cases)
    no_profile = sorted({c["key"] for c in cases.values()} -
                        {c["key"] for c in cases.values() if c["split"] == "profile"})
    if no_profile:
        fail(a.records, f"no profiling-split case (split \"profile\") of key {no_profile[0]}" +
             (f" and {len(no_profile) - 1} more" if len(no_profile) > 1 else ""))
    if a.what == "derived":
        return derived(cases, a.min_leaf, a.per_key)
    schema = [f for f in SCHEMA if f not in (a.drop or [])]
    names = [n for n in CANDIDATES if (not a.only or n in a.only) and n not in schema]
    edges = dict(SCHEMA)
    for n, s in records_lines(a.case_stats):
        try:
            if s["case"] not in cases:
                continue
            c = cases[s["case"]]
            sh, k = s["shape"], s["counters"]
            rows = sh["batch"] * sh["heads"] * sh["n_qb"]
            for name in names:
                fn, edges[name] = CANDIDATES[name]
                c["features"][name] = fn(sh, k, rows, c["features"]["batch_heads"])
        except (KeyError, TypeError, ZeroDivisionError) as ex:
            fail(f"{a.case_stats}:{n}", f"not a case-stats line ({type(ex).__name__}: {ex})")
    if a.quantiles:  # edges at quantiles of the profiling cases' values (all keys), instead of the fixed ones
        for name in names:
            v = np.array([c["features"][name] for c in cases.values() if c["split"] == "profile"])
            edges[name] = sorted(set(np.quantile(v, np.arange(1, a.quantiles) / a.quantiles).tolist()))
    base = a.base.split(",") if a.base else []
    for min_leaf in a.min_leaf:
        for extra in [None] + names:
            feats = schema + base + ([extra] if extra else [])
            cv, per_key, reg = evaluate(cases, feats, edges, min_leaf)
            label = "+ " + "+".join(base + ([extra] if extra else [])) if base or extra else "(schema)"
            print(f"min_leaf {min_leaf:3d} {label:28s} cv {cv:.5f}", summary(reg), flush=True)
            if a.per_key:
                print("    " + "  ".join(f"{key.split('.')[-2]}.{key.split('.')[-1]} d{d} cv {c:.4f} ev {g:.4f}"
                                         for key, (d, c, g) in per_key.items()), flush=True)


def derived(cases, min_leaves, per_key_too):
    """`derived`: the format-version-4 schema alone, then with each DERIVED candidate, per leaf minimum."""
    edges = dict(SCHEMA_V4)
    for name, (fn, e) in DERIVED.items():
        edges[name] = e
        for c in cases.values():
            c["features"][name] = fn(c["features"])
    for min_leaf in min_leaves:
        for extra in [None] + list(DERIVED):
            cv, per_key, reg = evaluate(cases, list(SCHEMA_V4) + ([extra] if extra else []), edges, min_leaf)
            print(f"min_leaf {min_leaf:3d} {'+ ' + extra if extra else '(schema v4)':28s} cv {cv:.5f}", summary(reg),
                  flush=True)
            if per_key_too:
                print("    " + "  ".join(f"{key.split('.')[-2]}.{key.split('.')[-1]} d{d} cv {c:.4f} ev {g:.4f}"
                                         for key, (d, c, g) in per_key.items()), flush=True)


def evaluate(cases, feats, edges, min_leaf, **options):
    """Profiling-split cross-validation and evaluation-split regret of tables compiled per key by compile_key:
    (held-out log-regret per profiling case, all keys; {key: (depth, cv, eval geomean)}; eval regrets)."""
    by_key = collections.defaultdict(list)
    for c in cases.values():
        by_key[c["key"]].append(c)
    total, n, per_key, out = 0.0, 0, {}, []
    for key, cs in sorted(by_key.items()):
        prof = [c for c in cs if c["split"] == "profile"]
        k, nodes = compile_key(prof, feats, edges, min_leaf, **options)
        total += k.cv_log_regret * len(prof)
        n += len(prof)
        mine = []
        for c in cs:
            if c["split"] != "eval":
                continue
            ranking = lookup(nodes, [bisect.bisect_right(edges[f], c["features"][f]) for f in feats])
            sel = next((c["lat"][k.plans[j]] for j in ranking if k.plans[j] in c["lat"]), max(c["lat"].values()))
            mine.append(sel / min(c["lat"].values()))
        out += mine
        per_key[key] = (k.depth, k.cv_log_regret, math.exp(sum(map(math.log, mine)) / len(mine)) if mine else 1.0)
    return total / n, per_key, out

if __name__ == "__main__":
    main()
