"""Plan-table compiler variants under the 32-case leaf rule, and the rule's lower bound on regret
(bench/NOTES.md, "Plan selection: compiler variants under the 32-case leaf rule").

Usage:
  python3 bench/selection_variants.py variants RECORDS [--min-leaf N ...]
      Evaluation-split regret (geomean, P95, P99, max) of the compiler (bench/selection_study.py, a copy of
      src/core/table_compiler.cpp) with one change at a time: split criterion, lookahead, cross-validation folds
      and depth tie-break, feature bucket edges.
  python3 bench/selection_variants.py bound RECORDS [--min-leaf N]
      A lower bound on the evaluation regret of ANY table obeying the leaf minimum, whatever its split criterion,
      thresholds (any value, any schema edges) or depth: a key with fewer than 3 x N profiling cases can hold at
      most two leaves, so each of its evaluation cases gets at best the better of the rankings of all legal
      leaves (the whole key, or either side of any split of its profiling cases at any value of one feature);
      keys with more profiling cases are counted as regret 1 (no bound). Two figures: the loose one lets every
      case pick its leaf; the tight one takes, per key, the one legal tree (a leaf, or a split on one feature at
      any value) with the lowest evaluation regret, chosen by looking at the evaluation split.

RECORDS: profile records (.jsonl or .jsonl.gz). Needs numpy.
"""
import argparse
import collections
import math

import numpy as np

import selection_study as study

CRITERIA = {  # split score from the per-case log regrets v of one side (the compiler: "sum")
    "sum": lambda v: v.sum(),
    "squares": lambda v: (v ** 2).sum(),
    "sum + 4 x excess over 1.05": lambda v: v.sum() + 4 * np.maximum(v - math.log(1.05), 0).sum(),
    "max, then sum": lambda v: 1000 * v.max() + v.sum(),
}


class VariantKey(study.Key):
    """study.Key with another split score (criterion) and optionally a lookahead: each side of a candidate split
    is scored by the best tree of depth lookahead - 1 below it (exhaustive), not by its single leaf."""

    def __init__(self, cases, feats, edges, criterion="sum", lookahead=1):
        super().__init__(cases, feats, edges)
        self.criterion, self.lookahead, self.memo = CRITERIA[criterion], lookahead, {}

    def cost(self, idx, base):
        r = self.rank(idx, base)
        return self.criterion(np.array([math.log(self.selected(i, r) / self.best[i]) for i in idx]))

    def best_tree_cost(self, idx, base, depth, min_leaf):
        key = (tuple(idx), depth, min_leaf)
        if key not in self.memo:
            c = self.cost(idx, base)
            if depth > 0 and len(idx) >= 2 * min_leaf:
                for _, _, left, right in self.splits(idx, min_leaf):
                    c = min(c, self.best_tree_cost(left, base, depth - 1, min_leaf) +
                            self.best_tree_cost(right, base, depth - 1, min_leaf))
            self.memo[key] = c
        return self.memo[key]

    def split_cost(self, side, base, depth, min_leaf):
        return self.best_tree_cost(side, base, min(depth, self.lookahead - 1), min_leaf)


def finer_edges():
    """The schema's edges with about twice as many per feature (midpoints and a few outside)."""
    extra = {
        "batch_heads": [1, 2, 4],
        "seq_len": [6144, 12288, 24576, 49152],
        "density": [0.01, 0.03, 0.05, 0.07, 0.09, 0.11, 0.135, 0.175, 0.25, 0.4, 0.65],
        "run_coverage": [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 0.99],
        "mean_run_length": [1.1, 1.75, 2.5, 3.5, 5, 7, 12, 24, 32, 64],
        "mean_row_active": [3, 6, 12, 24, 48, 96, 192, 384, 512],
        "row_imbalance": [1.001, 1.05, 1.25, 3, 6, 12, 24],
    }
    return {f: sorted(set(e) | set(extra[f])) for f, e in study.SCHEMA.items()}


def quantile_edges(cases, n=32):
    """n - 1 edges per feature at the quantiles of the profiling cases of every key."""
    prof = [c for c in cases.values() if c["split"] == "profile"]
    return {f: sorted(set(np.quantile([c["features"][f] for c in prof], np.linspace(0, 1, n + 1)[1:-1]).round(6)))
            for f in study.SCHEMA}


def variants(cases, min_leaves):
    schema = dict(study.SCHEMA)
    table = [("compiler as is", schema, {})]
    table += [(f"split score: {name}", schema, dict(key_class=VariantKey, criterion=name))
              for name in CRITERIA if name != "sum"]
    table += [(f"lookahead {n} (exhaustive subtrees)", schema, dict(key_class=VariantKey, lookahead=n)) for n in (2, 3)]
    table += [("CV: deepest of equal depths", schema, dict(deepest_tie=True)),
              ("CV: 10 folds", schema, dict(folds=10)),
              ("CV: one fold per request", schema, dict(folds=0)),
              ("CV: folds by source", schema, dict(group_by_source=True)),
              ("edges: ~2x finer", finer_edges(), {}),
              ("edges: 32 quantiles", quantile_edges(cases), {})]
    feats = list(study.SCHEMA)
    for min_leaf in min_leaves:
        for name, edges, options in table:
            regrets = study.regrets(cases, feats, edges, min_leaf, **options)
            print(f"min leaf {min_leaf:3d} {name:38s}", study.summary(regrets), flush=True)


def bound(cases, min_leaf):
    feats = list(study.SCHEMA)
    by_key = collections.defaultdict(list)
    for c in cases.values():
        by_key[c["key"]].append(c)
    out, tight = [], []
    for key, cs in sorted(by_key.items()):
        prof = [c for c in cs if c["split"] == "profile"]
        ev = [c for c in cs if c["split"] == "eval"]
        if len(prof) >= 3 * min_leaf:
            print(f"{key}: {len(prof)} profiling cases, more than two leaves possible: {len(ev)} cases counted as 1")
            out += [1.0] * len(ev)
            tight += [1.0] * len(ev)
            continue
        k = study.Key(prof, feats, study.SCHEMA)
        base = study.base_plan(k, prof)

        def regret(c, ranking):
            sel = next((c["lat"][k.plans[j]] for j in ranking if k.plans[j] in c["lat"]), max(c["lat"].values()))
            return sel / min(c["lat"].values())

        whole = k.rank(list(range(len(prof))), base)
        trees = [[regret(c, whole) for c in ev]]  # per legal tree: its evaluation regrets
        rankings = [whole]
        for f in feats:  # thresholds between consecutive values of profiling and evaluation cases: every routing
            points = sorted({c["features"][f] for c in prof + ev})
            for lo, hi in zip(points, points[1:]):
                t = (lo + hi) / 2
                left = [i for i, c in enumerate(prof) if c["features"][f] <= t]
                right = [i for i, c in enumerate(prof) if c["features"][f] > t]
                if min(len(left), len(right)) < min_leaf:
                    continue
                a, b = k.rank(left, base), k.rank(right, base)
                rankings += [a, b]
                trees.append([regret(c, a if c["features"][f] <= t else b) for c in ev])
        loose = [min(regret(c, r) for r in rankings) for c in ev]
        best = min(trees, key=lambda v: sum(map(math.log, v)))
        print(f"{key}: {len(prof)} profiling cases, {len(trees)} legal trees; every case its best leaf:",
              study.summary(loose), "| best tree:", study.summary(best))
        out += loose
        tight += best
    print(f"min leaf {min_leaf}, all keys: every case its best leaf:", study.summary(out))
    print(f"min leaf {min_leaf}, all keys: best tree per key:", study.summary(tight))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["variants", "bound"])
    ap.add_argument("records")
    ap.add_argument("--min-leaf", type=int, nargs="+", default=[32])
    a = ap.parse_args()
    cases = study.load(a.records)
    if a.what == "variants":
        variants(cases, a.min_leaf)
    else:
        for min_leaf in a.min_leaf:
            bound(cases, min_leaf)


if __name__ == "__main__":
    main()
