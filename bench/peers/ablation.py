#!/usr/bin/env python3
"""A0 / A1 / A2 ablation of plan selection (issue 19 item 5; the paper's Table 7), on the GPU machine.

    python3 bench/peers/ablation.py --out DIR [--families Q64K64,...] [--requests 3] [--seconds 300]
                                    [--tessera-module-dir build/gpu/python]

Three ways to pick the plan of a request, each through the public Python API (tessera.block_sparse_attention):
- A0: the Direct plan (T = B): the first plan of the request's eligible list whose mappings are both Direct
  (`q<B_Q>d.kv<B_KV>d`), as core/selector's direct_plan() picks it; forced with plan_id. A geometry whose tile the
  catalog lacks (32 x 16) has no Direct plan: A0 is then the least-transformed plan, as core/selector's
  default_plan() ranks them (mapping ranks d 0, r 1, c 2, p 3 summed, then the larger tile, then list order), and
  the row's note names it.
- A1: exhaustive online search: every eligible plan forced once on the request (mask_version 0: mask state, launch
  preparation and kernels) and timed with CUDA events, then the fastest run; its cold latency is the whole search
  plus that call.
- A2: Tessera: the embedded table's selection (plan_id None).
Workloads: the nine scoreboard families (N = 32,768, 16 heads, D = 128, bf16, band + random) with --requests unique
masks each (mask seeds 5000 + 10 * family + r: not the scoreboard's, not the table's generic masks). Per request:
- cold: host ms of one synchronised call with a new mask (mask_version 0) for A0 and A2; for A1 the search + call;
- warm: host ms of an exact repeat (mask_version: the runtime reuses mask state and launch metadata), the plan A1
  found reused without a new search;
- amortised4: (cold + 3 warm) / 4, a mask reused for four passes;
- kernel: CUDA-event ms of exact repeats (median), so speedup over A0 = A0 kernel / system kernel.
Output: DIR/ablation.json (rows per request and system, with the summary) and DIR/ablation.md (the per-family table
of medians over requests and the geometric means). Every output is checked against an fp32 reference on sampled rows.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peers.paths import out_dir_error  # noqa: E402
from peers.workloads import FAMILIES, FAMILY_NAMES, Workload, band_random, mask_stats, n_blocks  # noqa: E402

SYSTEMS = ("A0", "A1", "A2")
METRICS = ("cold_ms", "warm_ms", "amortised4_ms", "kernel_ms")
N_TOKENS, HEADS, HEAD_DIM = 32768, 16, 128


def mask_seed(family_index: int, request: int) -> int:
    return 5000 + 10 * family_index + request


def direct_plan(plans: Sequence[str], block_q: int, block_kv: int) -> Optional[str]:
    """The first plan id whose query and kv mappings are both Direct (T = B), in the eligible list's order."""
    pat = re.compile(rf"\.q{block_q}d\.kv{block_kv}d\.")
    return next((p for p in plans if pat.search(p)), None)


_MAPPING_RANK = {"d": 0, "r": 1, "c": 2, "p": 3}  # core/selector.cpp mapping_rank


def _mapping(plan: str, side: str, block: int) -> Optional[Tuple[int, int]]:
    """(rank, tile tokens) of one side's mapping in a plan id (`q32r2`: Refined, tile 16), None if it names another
    block size or does not parse."""
    m = re.search(rf"\.{side}{block}([drcp])(\d*)\.", plan)
    if not m or (m.group(1) != "d") == (m.group(2) == ""):
        return None
    kind, factor = m.group(1), int(m.group(2) or 1)
    tile = block // factor if kind == "r" else block * factor
    return _MAPPING_RANK[kind], tile


def baseline_plan(plans: Sequence[str], block_q: int, block_kv: int) -> Tuple[Optional[str], str]:
    """A0's plan and a note: the Direct plan where one is eligible (note ""), else the least-transformed plan as
    core/selector's default_plan() ranks them (sum of the two mapping ranks, then the larger tile area, then the
    eligible list's order). (None, reason) when no plan parses."""
    d = direct_plan(plans, block_q, block_kv)
    if d is not None:
        return d, ""
    best, key = None, None
    for p in plans:
        q, kv = _mapping(p, "q", block_q), _mapping(p, "kv", block_kv)
        if q is None or kv is None:
            continue
        k = (q[0] + kv[0], -(q[1] * kv[1]))
        if key is None or k < key:
            best, key = p, k
    if best is None:
        return None, "no eligible plan parses"
    mappings = ".".join(best.split(".")[4:6])  # q<B_Q><map>.kv<B_KV><map>
    return best, (f"no Direct plan (the catalog has no {block_q} x {block_kv} tile): A0 = the least-transformed "
                  f"plan, {mappings}")


def amortised(cold: float, warm: float, passes: int = 4) -> float:
    """Mean latency of `passes` calls on one mask: the first cold, the others exact repeats."""
    return (cold + (passes - 1) * warm) / passes


def geomean(xs: Sequence[float]) -> Optional[float]:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(rows: List[dict]) -> Dict[str, dict]:
    """Per family and system: the median of each metric over its requests, and the speedup of each metric over A0
    (A0 / system, > 1: faster than Direct); plus "all": geometric means of the per-family speedups."""
    out: Dict[str, dict] = {}
    fams = list(dict.fromkeys(r["family"] for r in rows))
    for fam in fams:
        per: Dict[str, dict] = {}
        for s in SYSTEMS:
            rs = [r for r in rows if r["family"] == fam and r["system"] == s and not r.get("error")]
            per[s] = {m: (statistics.median([r[m] for r in rs]) if rs else None) for m in METRICS}
            per[s]["requests"] = len(rs)
        for s in SYSTEMS:
            per[s]["speedup_vs_A0"] = {m: (per["A0"][m] / per[s][m] if per["A0"][m] and per[s][m] else None)
                                       for m in METRICS}
        out[fam] = per
    out["all"] = {s: {"speedup_vs_A0": {m: geomean([out[f][s]["speedup_vs_A0"][m] for f in fams]) for m in METRICS}}
                  for s in SYSTEMS}
    return out


def markdown(summary: Dict[str, dict], meta: dict) -> str:
    def f(x, d=2):
        return "-" if x is None else f"{x:.{d}f}"

    lines = [f"# A0 / A1 / A2 ablation (issue 19 item 5)", "",
             f"revision `{meta.get('revision')}`, GPU {meta.get('gpu')}, {meta.get('date')}; command: "
             f"`{meta.get('command')}`", "",
             "Medians over each family's unique requests; ms. Speedup = A0 / system (> 1: faster than the Direct "
             "plan). A0 is the Direct plan, or where the catalog has no tile of the block shape (32 x 16) the "
             "least-transformed plan (the JSON rows' note names it). A1 pays its whole plan search on every cold "
             "request.", "",
             "| family | req | A0 cold | A1 cold | A2 cold | A0 warm | A2 warm | A0 4-pass | A1 4-pass | A2 4-pass | "
             "A0 kernel | A2 kernel | A2 kernel vs A0 | A2 cold vs A0 | A2 cold vs A1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for fam, per in summary.items():
        if fam == "all":
            continue
        a0, a1, a2 = per["A0"], per["A1"], per["A2"]
        vs_a1 = a1["cold_ms"] / a2["cold_ms"] if a1["cold_ms"] and a2["cold_ms"] else None
        lines.append(f"| {fam} | {a2['requests']} | {f(a0['cold_ms'])} | {f(a1['cold_ms'], 1)} | {f(a2['cold_ms'])} | "
                     f"{f(a0['warm_ms'])} | {f(a2['warm_ms'])} | {f(a0['amortised4_ms'])} | "
                     f"{f(a1['amortised4_ms'], 1)} | {f(a2['amortised4_ms'])} | {f(a0['kernel_ms'], 3)} | "
                     f"{f(a2['kernel_ms'], 3)} | {f(a2['speedup_vs_A0']['kernel_ms'])}x | "
                     f"{f(a2['speedup_vs_A0']['cold_ms'])}x | {f(vs_a1)}x |")
    g = summary["all"]
    lines += ["", "Geometric means over families of the speedup over A0:", "",
              "| system | cold | warm | 4-pass | kernel |", "|---|---|---|---|---|"]
    for s in SYSTEMS:
        sp = g[s]["speedup_vs_A0"]
        lines.append(f"| {s} | {f(sp['cold_ms'])}x | {f(sp['warm_ms'])}x | {f(sp['amortised4_ms'])}x | "
                     f"{f(sp['kernel_ms'])}x |")
    return "\n".join(lines) + "\n"


def workloads(families: Sequence[str], requests: int) -> List[Workload]:
    out = []
    for name in families:
        i = FAMILY_NAMES.index(name)
        _, bq, bk, dens = FAMILIES[i]
        for r in range(requests):
            seed = mask_seed(i, r)

            def make(bq=bq, bk=bk, dens=dens, seed=seed):
                return band_random(HEADS, n_blocks(N_TOKENS, bq), n_blocks(N_TOKENS, bk), dens,
                                   np.random.default_rng(seed))

            out.append(Workload(f"{name}#{r}", "ablation", N_TOKENS, HEADS, HEAD_DIM, bq, bk, seed, 0,
                                f"band + random, target density {dens:.2f}", dens, make, family=name))
    return out


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory (ablation.json, ablation.md)")
    ap.add_argument("--families", default=",".join(FAMILY_NAMES), help="comma list (default: the nine families)")
    ap.add_argument("--requests", type=int, default=3, help="unique masks per family (default 3)")
    ap.add_argument("--seconds", type=float, default=400.0, help="time budget; later requests are skipped (400)")
    ap.add_argument("--tessera-module-dir", default=None, help="directory of tessera/_C*.so (default build/gpu/python)")
    a = ap.parse_args(argv)
    a.families = [f.strip() for f in a.families.split(",") if f.strip()]
    bad = [f for f in a.families if f not in FAMILY_NAMES]
    if bad or not a.families:
        ap.error(f"--families: unknown {bad} (known: {', '.join(FAMILY_NAMES)})")
    if a.requests < 1:
        ap.error("--requests: must be >= 1")
    if not (a.seconds > 0 and math.isfinite(a.seconds)):
        ap.error("--seconds: must be a finite number > 0")
    if a.tessera_module_dir is not None and not os.path.isdir(a.tessera_module_dir):
        ap.error(f"--tessera-module-dir: {a.tessera_module_dir!r} is not a directory")
    err = out_dir_error(a.out)
    if err:
        ap.error(err)
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    import torch  # noqa: E402  (the GPU part; the helpers above need numpy only)

    from peers import gpu, systems  # noqa: E402
    from peers.run import find_module_dir  # noqa: E402

    if not torch.cuda.is_available():
        print("ablation: needs a CUDA GPU (the plan sweep is the GPU runtime's)", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    timer = gpu.Timer(dev)
    ts = systems.Tessera(find_module_dir(a.tessera_module_dir), dev, timer)
    t_end = time.monotonic() + a.seconds
    hnd = gpu.make_qkv(N_TOKENS, HEADS, HEAD_DIM, 0, dev)
    rows: List[dict] = []
    meta = {"revision": open(".revision").read().strip() if os.path.exists(".revision") else ts.git_revision,
            "gpu": torch.cuda.get_device_properties(dev).name, "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(["bench/peers/ablation.py"] + list(argv if argv is not None else sys.argv[1:])),
            "tessera_module": ts.module_file}

    def write(rows_: List[dict], meta_: dict) -> None:  # after every request: a stopped run keeps what it measured
        summary = summarize(rows_)
        with open(os.path.join(a.out, "ablation.json"), "w") as f:
            json.dump({**meta_, "rows": rows_, "summary": summary}, f, indent=1)
        with open(os.path.join(a.out, "ablation.md"), "w") as f:
            f.write(markdown(summary, meta_))

    for w in workloads(a.families, a.requests):
        if time.monotonic() > t_end:
            print(f"ablation: {w.name}: not run (time budget)", flush=True)
            continue
        mask_np = w.mask()
        mask = torch.from_numpy(mask_np).to(dev)
        case = systems.Case(w, mask, mask_stats(mask_np, w.n, w.block_q, w.block_kv), hnd,
                            gpu.Reference(*hnd, mask, w.block_q, w.block_kv, heads=(0, w.heads - 1)))
        plans = ts.eligible_plans(case)
        direct, a0_note = baseline_plan(plans, w.block_q, w.block_kv)
        base = {"family": w.family, "request": w.name, "mask_seed": w.mask_seed, "eligible_plans": len(plans),
                "density": case.stats["density"]}

        def measure(system: str, plan: Optional[str], cold_ms: float, note: str = "") -> dict:
            ver = next(systems._VERSIONS)
            ts._call(case, ver, plan)  # primes the exact-repeat cache
            warm = timer.host_ms(lambda: ts._call(case, ver, plan))
            kern = timer.kernel_ms(lambda: ts._call(case, ver, plan))
            o = ts._call(case, 0, plan)
            chosen = ts._dispatch().get("plan_id")
            rel = case.ref.rel_l2(o[0].permute(1, 0, 2))
            return {**base, "system": system, "plan": chosen, "cold_ms": cold_ms, "warm_ms": warm,
                    "amortised4_ms": amortised(cold_ms, warm), "kernel_ms": kern, "rel_l2": rel,
                    "note": note or None}

        ts._call(case, 0, None)  # first touch of this mask's shapes outside the timed calls
        cold_a2 = timer.host_ms(lambda: ts._call(case, 0, None), warm=0, reps=3)
        rows.append(measure("A2", None, cold_a2))
        if direct is None:
            rows.append({**base, "system": "A0", "error": a0_note})
        else:
            cold_a0 = timer.host_ms(lambda: ts._call(case, 0, direct), warm=1, reps=3)
            rows.append(measure("A0", direct, cold_a0, a0_note))
        # A1: the search as an online searcher runs it, on this new mask: every plan once, timed, then the best.
        timer.sync()
        t0 = time.perf_counter()
        best, best_ms, failed = None, float("inf"), 0
        for p in plans:
            try:
                s_ev, e_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s_ev.record()
                ts._call(case, 0, p)
                e_ev.record()
                e_ev.synchronize()
                ms = s_ev.elapsed_time(e_ev)
            except Exception:  # noqa: BLE001  (a plan that fails is skipped, as a searcher would)
                failed += 1
                continue
            if ms < best_ms:
                best, best_ms = p, ms
        ts._call(case, 0, best)
        timer.sync()
        cold_a1 = (time.perf_counter() - t0) * 1e3
        rows.append(measure("A1", best, cold_a1, f"searched {len(plans) - failed} plans ({failed} failed)"))
        write(rows, meta)
        r = {x["system"]: x for x in rows[-3:]}
        print(f"[{a.seconds - (t_end - time.monotonic()):6.1f} s] {w.name}: " + ", ".join(
            f"{s} cold {r[s]['cold_ms']:.2f} warm {r[s]['warm_ms']:.2f} kernel {r[s]['kernel_ms']:.3f} ms"
            for s in SYSTEMS if s in r and "cold_ms" in r[s]), flush=True)
    write(rows, meta)
    print(markdown(summarize(rows), meta))
    bad = [x for x in rows if x.get("rel_l2") is not None and x["rel_l2"] > 1e-2]
    if bad:
        print(f"ablation: {len(bad)} outputs fail the bf16 check: {[(x['request'], x['system']) for x in bad]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
