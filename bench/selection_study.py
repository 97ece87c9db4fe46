"""Offline study of plan-table regret (bench/NOTES.md, "Plan selection: regret within a source").

Usage:
  python3 bench/selection_study.py noise RECORDS
      Near-duplicate cases (same key and request, every feature within 0.5%): how far their plan-latency ratios
      differ, and the regret of choosing one case's fastest plan for its twin (the measurement-noise floor).
  python3 bench/selection_study.py features RECORDS CASE_STATS [--min-leaf N ...]
      Evaluation-split regret of tables compiled with the six schema features plus one candidate feature derived from
      mu(M)'s counters (CASE_STATS from `tessera profile-refeature --case-stats`), for each leaf minimum.

RECORDS: profile records (.jsonl or .jsonl.gz). The compiler here is a Python copy of src/core/table_compiler.cpp
(greedy tree, folds by request, leaf rankings by geometric mean, ties by plan id) used only for this exploration:
on the six schema features it reproduces `tessera compile-table` exactly (geomean 1.0172, P95 1.1177, P99 1.2947 on
bench/results/h200_session3/profile.jsonl.gz). Needs numpy.
"""
import argparse
import bisect
import collections
import gzip
import json
import math

import numpy as np

SCHEMA = {  # src/core/features.cpp, FeatureSchema::default_schema()
    "batch_heads": [8, 16, 24, 32, 48, 64, 128, 256],
    "seq_len": [4096, 8192, 16384, 32768, 65536, 98304, 131072],
    "density": [0.02, 0.04, 0.06, 0.08, 0.10, 0.12, 0.15, 0.2, 0.3, 0.5, 0.8],
    "run_coverage": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "mean_run_length": [1.25, 1.5, 2, 3, 4, 6, 8, 16],
    "mean_row_active": [2, 4, 8, 16, 32, 64, 128, 256],
}
CANDIDATES = {  # name: (value from shape s and counters k, bucket edges)
    "row_imbalance": (lambda s, k, rows: k["max_row_active"] * rows / k["active_blocks"] if k["active_blocks"] else 0,
                      [1.01, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16]),
    "max_row_fraction": (lambda s, k, rows: k["max_row_active"] / s["n_kvb"], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.99]),
    "empty_row_fraction": (lambda s, k, rows: k["empty_rows"] / rows, [0.001, 0.01, 0.05, 0.1, 0.2, 0.5]),
    "runs_per_row": (lambda s, k, rows: k["runs"] / rows, [1, 2, 4, 8, 16, 32, 64, 128]),
    "active_blocks": (lambda s, k, rows: k["active_blocks"], [2.0 ** i for i in range(10, 26)]),
    "tile_rows": (lambda s, k, rows: rows, [2.0 ** i for i in range(6, 18)]),
}


def load(path):
    cases = {}
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            c = cases.setdefault(r["case"], dict(id=r["case"], key=r["key"], split=r["split"], lat={}, default=None,
                                                 request=r.get("request") or r["source"], features=r["features"]))
            if r["valid"] and r["latency_us"] > 0:
                c["lat"][r["plan"]] = r["latency_us"]
            if r.get("role", "").startswith("default"):
                c["default"] = r["plan"]
    return {k: c for k, c in cases.items() if c["lat"]}


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
    nodes = []
    k.grow(list(range(len(cases))), base, depth, min_leaf, nodes)
    return k, nodes


def regrets(cases, feats, edges, min_leaf, **options):
    """Evaluation-split regret (selected / fastest valid) per case, tables compiled per key by compile_key."""
    by_key = collections.defaultdict(list)
    for c in cases.values():
        by_key[c["key"]].append(c)
    out = []
    for key, cs in sorted(by_key.items()):
        k, nodes = compile_key([c for c in cs if c["split"] == "profile"], feats, edges, min_leaf, **options)
        for c in cs:
            if c["split"] != "eval":
                continue
            ranking = lookup(nodes, [bisect.bisect_right(edges[f], c["features"][f]) for f in feats])
            sel = next((c["lat"][k.plans[j]] for j in ranking if k.plans[j] in c["lat"]), max(c["lat"].values()))
            out.append(sel / min(c["lat"].values()))
    return out


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
    diffs, twin = [], []
    for cs in by_req.values():
        for i, a in enumerate(cs):
            for b in cs[i + 1:]:
                if any(abs(a["features"][f] - b["features"][f]) > 0.005 * max(abs(a["features"][f]), 1e-12)
                       for f in a["features"]):
                    continue
                ba, bb = min(a["lat"].values()), min(b["lat"].values())
                diffs += [abs(math.log(a["lat"][p] / ba) - math.log(b["lat"][p] / bb)) for p in set(a["lat"]) & set(b["lat"])]
                wa, wb = min(a["lat"], key=a["lat"].get), min(b["lat"], key=b["lat"].get)
                twin += [b["lat"][wa] / bb] if wa in b["lat"] else []
                twin += [a["lat"][wb] / ba] if wb in a["lat"] else []
    diffs.sort()
    print(f"near-duplicate pairs: {len(twin) // 2}; |log latency-ratio difference| median {diffs[len(diffs) // 2]:.4f}, "
          f"P90 {diffs[int(0.9 * len(diffs))]:.4f}")
    print("regret of the twin's fastest plan:", summary(twin))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["noise", "features"])
    ap.add_argument("records")
    ap.add_argument("case_stats", nargs="?")
    ap.add_argument("--min-leaf", type=int, nargs="+", default=[32, 16, 8])
    a = ap.parse_args()
    cases = load(a.records)
    if a.what == "noise":
        return noise(cases)
    if not a.case_stats:
        ap.error("features needs CASE_STATS (tessera profile-refeature --case-stats)")
    edges = dict(SCHEMA)
    for line in open(a.case_stats):
        s = json.loads(line)
        if s["case"] not in cases:
            continue
        sh, k = s["shape"], s["counters"]
        rows = sh["batch"] * sh["heads"] * sh["n_qb"]
        for name, (fn, e) in CANDIDATES.items():
            cases[s["case"]]["features"][name] = fn(sh, k, rows)
            edges[name] = e
    for min_leaf in a.min_leaf:
        for extra in [None] + list(CANDIDATES):
            feats = list(SCHEMA) + ([extra] if extra else [])
            print(f"min_leaf {min_leaf:3d} {'+ ' + extra if extra else '(schema)':22s}",
                  summary(regrets(cases, feats, edges, min_leaf)))


if __name__ == "__main__":
    main()
