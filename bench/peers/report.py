#!/usr/bin/env python3
"""bench/RESULTS.md and the charts from a scoreboard JSON file (no torch; matplotlib for the charts only).

    python3 bench/peers/report.py bench/results/peers/latest.json            # -> bench/RESULTS.md + PNGs
    python3 bench/peers/report.py A.json B.json --out-json latest.json       # merge runs (later wins), then report

The charts (tflops.png: effective TF/s per workload and system; speedup.png: Tessera's speedup over each peer,
kernel and complete request) go next to the JSON unless --charts says otherwise. Without matplotlib the Markdown is
still written, with a line saying the charts were not drawn.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

if __package__ in (None, ""):  # run as a script: make `peers` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from peers import schema  # noqa: E402
    from peers.metrics import geomean  # noqa: E402
    from peers.workloads import FAMILY_NAMES, REPO  # noqa: E402
else:
    from . import schema
    from .metrics import geomean
    from .workloads import FAMILY_NAMES, REPO

SYSTEM_LABELS = {"tessera": "Tessera", "tessera-best": "Tessera (best of sweep)", "flashinfer": "FlashInfer",
                 "flex": "FlexAttention", "cudnn": "cuDNN (SDPA)"}
COLORS = {"tessera": "#1f77b4", "tessera-best": "#aec7e8", "flashinfer": "#d62728", "flex": "#2ca02c",
          "cudnn": "#7f7f7f"}
DEFAULT_MD = os.path.join(REPO, "bench", "RESULTS.md")


def _f(x: Optional[float], nd: int = 2) -> str:
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def _e(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1e}"


def speedup(doc: Dict[str, Any], workload: str, peer: str, key: str) -> Optional[float]:
    """peer time / Tessera time (> 1: Tessera is faster) for key kernel_ms or request_ms; None if either is missing."""
    rb = schema.rows_by(doc)
    t = schema.ok(rb.get((workload, "tessera")), key)
    o = schema.ok(rb.get((workload, peer)), key)
    return None if t is None or o is None else o / t


def family_geomeans(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Nine-family geometric means of Tessera's speedup over each peer (and over its own best-of-sweep plan)."""
    names = [n for n in schema.workload_names(doc) if n in FAMILY_NAMES]
    out = []
    for peer in ("flashinfer", "flex", "tessera-best"):
        ks = [speedup(doc, n, peer, "kernel_ms") for n in names]
        rs = [speedup(doc, n, peer, "request_ms") for n in names]
        out.append({"peer": peer, "kernel": geomean(ks), "request": geomean(rs),
                    "n_kernel": sum(x is not None for x in ks), "n_request": sum(x is not None for x in rs),
                    "n": len(FAMILY_NAMES)})
    return out


def corpus_geomeans(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """corpus-eval, one entry per family (whole requests, one workload each): the geometric mean over the family's
    requests of each system's TF/s and of Tessera's speedup over each peer (kernel and request), with the counts."""
    fam: Dict[str, List[str]] = {}
    for w in doc.get("workloads", []):
        if w.get("group") == "corpus" and w.get("family"):
            fam.setdefault(w["family"], []).append(w["name"])
    rb = schema.rows_by(doc)
    out = []
    for f, names in fam.items():
        e: Dict[str, Any] = {"family": f, "requests": len(names),
                             "heads": sorted({w["heads"] for w in doc["workloads"] if w["name"] in names})}
        for s in schema.SYSTEMS:
            e[f"tflops_{s}"] = geomean([schema.ok(rb.get((n, s)), "tflops") for n in names])
        for peer in ("flashinfer", "flex", "tessera-best"):
            for key, label in (("kernel_ms", "kernel"), ("request_ms", "request")):
                xs = [speedup(doc, n, peer, key) for n in names]
                e[f"{label}_{peer}"] = geomean(xs)
                e[f"n_{label}_{peer}"] = sum(x is not None for x in xs)
        out.append(e)
    return out


# ------------------------------------------------------------------------------------------------ charts
def draw_charts(doc: Dict[str, Any], out_dir: str) -> List[str]:
    """Writes tflops.png and speedup.png into out_dir; returns their paths ([] without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        return []
    os.makedirs(out_dir, exist_ok=True)
    rb = schema.rows_by(doc)
    names = schema.workload_names(doc)
    names = [n for n in names if any(schema.ok(rb.get((n, s))) for s in schema.SYSTEMS)] or names
    systems = [s for s in schema.SYSTEMS if any(schema.ok(rb.get((n, s))) for n in names)]
    paths = []

    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(names) + 2), 4.8))
    width = 0.8 / max(1, len(systems))
    for j, s in enumerate(systems):
        xs, ys = [], []
        for i, n in enumerate(names):
            v = schema.ok(rb.get((n, s)), "tflops")
            if v is not None:
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(v)
        ax.bar(xs, ys, width, label=SYSTEM_LABELS.get(s, s), color=COLORS.get(s))
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("effective TF/s (4 D active pairs / kernel time)")
    ax.set_title(f"Effective TF/s, {doc.get('gpu', '?')}, {doc.get('revision', '?')}", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=min(5, max(1, len(systems))))
    fig.tight_layout()
    p = os.path.join(out_dir, "tflops.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    peers = [s for s in ("flashinfer", "flex", "cudnn", "tessera-best") if s in systems]
    fig, axes = plt.subplots(1, 2, figsize=(max(10.0, 1.6 * len(names) + 2), 4.8), sharey=True)
    width = 0.8 / max(1, len(peers))
    for ax, key, title in zip(axes, ("kernel_ms", "request_ms"), ("kernel", "complete request")):
        for j, s in enumerate(peers):
            xs, ys = [], []
            for i, n in enumerate(names):
                v = speedup(doc, n, s, key)
                if v is not None:
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(v)
            ax.bar(xs, ys, width, label=f"over {SYSTEM_LABELS.get(s, s)}", color=COLORS.get(s))
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_yscale("log")
        fmt = FuncFormatter(lambda y, _: f"{y:g}x")
        ax.yaxis.set_major_formatter(fmt)
        ax.yaxis.set_minor_formatter(fmt)
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
        ax.set_title(f"Tessera's speedup, {title} (peer ms / Tessera ms)", fontsize=10)
        ax.grid(axis="y", alpha=0.3, which="both")
    if peers:
        axes[0].legend(fontsize=8)
    fig.tight_layout()
    p = os.path.join(out_dir, "speedup.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    return paths


# ------------------------------------------------------------------------------------------------ markdown
def markdown(doc: Dict[str, Any], charts: Sequence[str] = (), md_dir: str = ".", source: str = "") -> str:
    rb = schema.rows_by(doc)
    wl = {w["name"]: w for w in doc.get("workloads", [])}
    names = schema.workload_names(doc)
    env = doc.get("env", {}) or {}
    L: List[str] = []
    L.append("# Peer scoreboard: Tessera vs FlashInfer, FlexAttention and cuDNN")
    L.append("")
    L.append(f"Generated by `bench/peers/report.py` from `{source or 'the scoreboard JSON'}`: do not edit by hand "
             "(bench/peers/README.md says how the numbers are measured and how to rerun).")
    L.append("")
    facts = [f"revision `{doc.get('revision')}`", f"GPU {doc.get('gpu')}", f"date {doc.get('date')}"]
    for k, label in (("torch", "torch"), ("triton", "triton"), ("flashinfer", "FlashInfer"), ("cuda", "CUDA"),
                     ("driver", "driver")):
        if env.get(k):
            facts.append(f"{label} {env[k]}")
    L.append(", ".join(facts) + ".")
    L.append("")
    L.append(f"Command: `{doc.get('command')}`")
    if doc.get("merged_from") and len(doc["merged_from"]) > 1:
        L.append("")
        L.append("Merged from runs: " + "; ".join(f"`{r.get('revision')}` {r.get('date')} (`{r.get('command')}`)"
                                                   for r in doc["merged_from"]) + ".")
    problems = schema.validate(doc)
    if problems:
        L.append("")
        L.append(f"**Schema problems ({len(problems)}):** " + "; ".join(problems[:8]))
    L.append("")
    L.append("## Nine-family geometric means")
    L.append("")
    L.append("Tessera's speedup = peer time / Tessera time (> 1: Tessera faster), over the families where both ran.")
    L.append("")
    L.append("| against | kernel | complete request | families (kernel / request) |")
    L.append("|---|---|---|---|")
    for g in family_geomeans(doc):
        label = ("Tessera's best-of-sweep plan (selection regret)" if g["peer"] == "tessera-best"
                 else SYSTEM_LABELS[g["peer"]])
        k = "-" if g["kernel"] is None else f"{g['kernel']:.2f}x"
        r = "-" if g["request"] is None else f"{g['request']:.2f}x"
        L.append(f"| {label} | {k} | {r} | {g['n_kernel']} / {g['n_request']} of {g['n']} |")
    L.append("")
    cg = corpus_geomeans(doc)
    if cg:
        L.append("## corpus-eval: whole requests, per family")
        L.append("")
        L.append("Geometric means over each family's whole requests (every head of one layer at one step of one "
                 "corpus source; one row per request below). Speedup = peer time / Tessera time.")
        L.append("")
        L.append("| family | requests | heads | " + " | ".join(f"{SYSTEM_LABELS[s]} TF/s" for s in schema.SYSTEMS)
                 + " | kernel vs FlashInfer | kernel vs Flex | request vs FlashInfer | request vs Flex | "
                   "selected / best plan |")
        L.append("|---|---|---|" + "---|" * (len(schema.SYSTEMS) + 5))
        for e in cg:
            def x(v):
                return "-" if v is None else f"{v:.2f}x"
            L.append(f"| {e['family']} | {e['requests']} | {', '.join(map(str, e['heads']))} | "
                     + " | ".join(_f(e[f"tflops_{s}"], 0) for s in schema.SYSTEMS)
                     + f" | {x(e['kernel_flashinfer'])} | {x(e['kernel_flex'])} | {x(e['request_flashinfer'])} | "
                       f"{x(e['request_flex'])} | {x(e['kernel_tessera-best'])} |")
        L.append("")
    if charts:
        L.append("## Charts")
        L.append("")
        for c in charts:
            rel = os.path.relpath(c, md_dir).replace(os.sep, "/")
            L.append(f"![{os.path.splitext(os.path.basename(c))[0]}]({rel})")
            L.append("")
    else:
        L.append("(Charts not drawn: matplotlib is not installed where the report was generated.)")
        L.append("")
    L.append("## Effective TF/s per workload (kernel)")
    L.append("")
    L.append("Revision: the Tessera revision the row was measured at (merged runs can differ per row).")
    L.append("")
    L.append("| workload | N | heads | B_Q x B_KV | density | " + " | ".join(SYSTEM_LABELS[s] for s in schema.SYSTEMS)
             + " | revision |")
    L.append("|---|---|---|---|---|" + "---|" * len(schema.SYSTEMS) + "---|")
    for n in names:
        w = wl.get(n, {})
        cells = []
        for s in schema.SYSTEMS:
            r = rb.get((n, s))
            v = schema.ok(r, "tflops")
            cells.append(_f(v, 1) if v is not None else ("n/a" if r and "error" in r else "-"))
        geo = f"{w.get('block_q', '?')}x{w.get('block_kv', '?')}" if w.get("block_q") else "-"
        dens = _f(w.get("density"), 3) if w.get("density") is not None else "-"
        rev = (rb.get((n, "tessera")) or {}).get("revision") or "-"
        L.append(f"| {n} | {w.get('n') or '-'} | {w.get('heads') or '-'} | {geo} | {dens} | " + " | ".join(cells)
                 + f" | {rev[:7]} |")
    L.append("")
    L.append("## Tessera's speedup per workload (peer ms / Tessera ms)")
    L.append("")
    cols = [s for s in ("flashinfer", "flex", "cudnn", "tessera-best")]
    L.append("| workload | " + " | ".join(f"{SYSTEM_LABELS[s]} kernel | {SYSTEM_LABELS[s]} request" for s in cols)
             + " |")
    L.append("|---|" + "---|---|" * len(cols))
    for n in names:
        cells = []
        for s in cols:
            for key in ("kernel_ms", "request_ms"):
                v = speedup(doc, n, s, key)
                cells.append("-" if v is None else f"{v:.2f}x")
        L.append(f"| {n} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("## All rows")
    L.append("")
    L.append("| workload | system | kernel ms | request ms | first call ms | TF/s | rel L2 vs fp32 ref | "
             "rel L2 vs Tessera | plan / form | note |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for n in names:
        for s in schema.SYSTEMS:
            r = rb.get((n, s))
            if r is None:
                L.append(f"| {n} | {s} | | | | | | | | (no row) |")
                continue
            plan = r.get("plan") or r.get("form") or ""
            note = r.get("note") or ""
            if "error" in r:
                note = f"**error:** {r['error']}" + (f" ({note})" if note else "")
            note = note.replace("|", "/").replace("\n", " ")
            plan_cell = f"`{plan}`" if plan else ""
            L.append(f"| {n} | {s} | {_f(schema.ok(r, 'kernel_ms'), 3)} | {_f(r.get('request_ms'), 3)} | "
                     f"{_f(r.get('first_call_ms'), 1)} | {_f(schema.ok(r, 'tflops'), 1)} | {_e(r.get('rel_l2'))} | "
                     f"{_e(r.get('rel_l2_vs_tessera'))} | {plan_cell} | {note} |")
    L.append("")
    proto = doc.get("protocol") or {}
    if proto:
        L.append("## Protocol")
        L.append("")
        for k, v in proto.items():
            L.append(f"- **{k}**: {v}")
        L.append("")
    if wl:
        L.append("## Workloads")
        L.append("")
        L.append("| workload | recipe | mask seed | qkv seed | active blocks | active pairs |")
        L.append("|---|---|---|---|---|---|")
        for n in names:
            w = wl.get(n)
            if not w:
                continue
            L.append(f"| {n} | {w.get('recipe', '')} | {w.get('mask_seed', '-')} | {w.get('qkv_seed', '-')} | "
                     f"{w.get('active_blocks', '-')} | {w.get('active_pairs', '-')} |")
        L.append("")
    return "\n".join(L)


MODEL_SECTION = re.compile(r"<!-- model:([A-Za-z0-9._-]+) begin -->.*?<!-- model:\1 end -->"
                           r"|<!-- model-loop -->.*?<!-- /model-loop -->", re.S)


def model_sections(md_path: str) -> List[str]:
    """The model-loop sections (bench/model/report.py --into: <!-- model:NAME begin --> ... end, or the single
    <!-- model-loop --> pair of older files, which report.py --into migrates) of an existing Markdown file, in order;
    [] when the file does not exist."""
    try:
        with open(md_path) as f:
            return [m.group(0) for m in MODEL_SECTION.finditer(f.read())]
    except FileNotFoundError:
        return []


def generate(doc: Dict[str, Any], md_path: str, charts_dir: str, source: str = "", draw: bool = True) -> str:
    """Writes the scoreboard Markdown to md_path (and the charts to charts_dir); the model-loop sections the file
    already holds are kept after the scoreboard, so that a scoreboard run does not drop them."""
    charts = draw_charts(doc, charts_dir) if draw else []
    md_dir = os.path.dirname(os.path.abspath(md_path))
    os.makedirs(md_dir, exist_ok=True)
    text = markdown(doc, [os.path.abspath(c) for c in charts], md_dir, source)
    kept = model_sections(md_path)
    with open(md_path, "w") as f:
        f.write(text + "\n" + "".join("\n" + sec + "\n" for sec in kept))
    return md_path


def _load(path: str) -> Dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="scoreboard JSON; several are merged in order (later rows win)")
    ap.add_argument("--out-json", help="where to write the merged document (needed with several inputs)")
    ap.add_argument("--md", default=DEFAULT_MD, help="Markdown output (default: bench/RESULTS.md)")
    ap.add_argument("--charts", help="directory of the PNG charts (default: next to the JSON)")
    ap.add_argument("--no-charts", action="store_true")
    a = ap.parse_args(argv)
    doc = _load(a.json[0])
    for p in a.json[1:]:
        doc = schema.merge(doc, _load(p))
    src = a.json[0]
    if len(a.json) > 1:
        if not a.out_json:
            ap.error("--out-json is required when merging several files")
    if a.out_json:
        with open(a.out_json, "w") as f:
            json.dump(doc, f, indent=1)
        src = a.out_json
    charts_dir = a.charts or os.path.dirname(os.path.abspath(src))
    try:
        source = os.path.relpath(os.path.abspath(src), REPO)
        if source.startswith(".."):
            source = src
    except ValueError:
        source = src
    md = generate(doc, a.md, charts_dir, source, draw=not a.no_charts)
    problems = schema.validate(doc)
    print(f"wrote {md}" + (f" ({len(problems)} schema problems: {problems[:3]})" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
