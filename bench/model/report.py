#!/usr/bin/env python3
"""Markdown table and chart of a model-loop JSON (bench/model/run.py; no torch, matplotlib for the chart only).

  python3 bench/model/report.py bench/results/model/latest.json                  # -> RESULTS.md + step_time.png beside it
  python3 bench/model/report.py bench/results/model/latest.json --into bench/RESULTS.md
      (replaces, or appends, the section between the markers <!-- model-loop --> and <!-- /model-loop -->;
       bench/peers/report.py rewrites bench/RESULTS.md whole, so run this after it)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

BEGIN, END = "<!-- model-loop -->", "<!-- /model-loop -->"
ORDER = ("dense", "flex", "flashinfer", "tessera")


def _f(x: Optional[float], nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _rows(doc: Dict[str, Any]) -> List[str]:
    names = [n for n in ORDER if n in doc["backends"]] + [n for n in doc["backends"] if n not in ORDER]
    return names


def draw_chart(doc: Dict[str, Any], path: str) -> Optional[str]:
    """Stacked bars per backend: attention (convert + kernel), sparsifier (mask + layout) and the rest of a step."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = [n for n in _rows(doc) if doc["backends"][n].get("summary")]
    if not names:
        return None
    s = [doc["backends"][n]["summary"] for n in names]
    att = [x["attention_ms"] / 1e3 for x in s]
    spa = [x["sparsifier_ms"] / 1e3 for x in s]
    rest = [x["rest_ms"] / 1e3 for x in s]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.barh(names, att, label="attention", color="#c44e52")
    ax.barh(names, spa, left=att, label="sparsifier (mask + layout)", color="#dd8452")
    ax.barh(names, rest, left=[a + b for a, b in zip(att, spa)], label="rest of the step", color="#8c8c8c")
    for i, x in enumerate(s):
        ax.text(x["step_ms"] / 1e3, i, f" {x['step_ms'] / 1e3:.2f} s", va="center", fontsize=8)
    c = doc["config"]
    ax.set_xlabel("seconds per denoising step")
    ax.set_title(f"{c['name']}, {c['layers']}/{c['layers_of_model']} layers, {c['tokens']:,} tokens, "
                 f"VSA top-{c['density']:.0%}", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xlim(0, max(x["step_ms"] for x in s) / 1e3 * 1.18)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown(doc: Dict[str, Any], chart: Optional[str] = None, source: str = "") -> str:
    c, e = doc["config"], doc.get("env", {})
    out = [f"## Model-level loop: {c['name']} (issue 20)", ""]
    out.append(f"{e.get('gpu', '?')}, revision {doc.get('revision')}, {doc.get('date')}; torch {e.get('torch')}, "
               f"diffusers {e.get('diffusers')}. diffusers' WanTransformer3DModel with random weights (bf16), "
               f"{c['layers']} of {c['layers_of_model']} layers, {c['heads']} heads x {c['head_dim']}, "
               f"{c['tokens']:,} video tokens (grid {' x '.join(map(str, c['grid']))}), {c['text_tokens']} text "
               f"tokens; VSA top-k masks on the live q/k, {c['density']:.0%} of the {c['block']}-token blocks per "
               f"row, a new mask every call (layer, head, step), cube token order; {c['guidance']}.")
    if source:
        out.append(f"Source: `{source}`; command: `{doc.get('command')}`.")
    out += ["", "Per measured step (mean), milliseconds:", "",
            "| backend | step | attention | of which kernel | sparsifier (mask + layout) | rest | attention share | "
            "50 steps (s) | step-0 check (rel L2, max) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for n in _rows(doc):
        b = doc["backends"][n]
        s = b.get("summary")
        chk = [x["rel_l2"] for x in b.get("checks", []) if x.get("rel_l2") is not None]
        ck = f"{max(chk):.1e}" if chk else "-"
        if not s:
            out.append(f"| {n} | {b.get('error') or b.get('stopped') or 'no measured step'} | | | | | | | {ck} |")
            continue
        ext = next((v for k, v in s.items() if k.startswith("extrapolated_")), None)
        steps = f" ({s['steps_measured']} steps)" if s["steps_measured"] < 3 else ""
        out.append(f"| {n}{steps} | {_f(s['step_ms'])} | {_f(s['attention_ms'])} | {_f(s['kernel_ms'])} | "
                   f"{_f(s['sparsifier_ms'])} | {_f(s['rest_ms'])} | {_f(s['attention_share'], 2)} | {_f(ext)} | "
                   f"{ck} |")
    sp = doc.get("speedups", {})
    if "tessera" in doc["backends"] and any(k.startswith("tessera_vs_") for k in sp):
        out += ["", "Tessera's speedup (the other backend's time / Tessera's):", "",
                "| over | attention | attention + sparsifier | whole step |", "|---|---|---|---|"]
        for n in _rows(doc):
            r = sp.get(f"tessera_vs_{n}")
            if r:
                out.append(f"| {n} | {_f(r.get('attention'), 2)}x | {_f(r.get('attention_plus_sparsifier'), 2)}x | "
                           f"{_f(r.get('step'), 2)}x |")
    ag = doc.get("agreement", {}).get("step0_prediction_rel_l2") or {}
    if ag:
        out += ["", "Agreement of the step-0 predictions on the same masks (relative L2): " +
                ", ".join(f"{k.replace('_vs_', ' vs ')} {_f(v, 4) if v is not None else 'non-finite'}"
                          for k, v in ag.items()) + f" (tolerance {doc['agreement'].get('tolerance')})."]
    ms = doc["backends"].get("tessera", {}).get("mask_stats") or []
    if ms:
        m0 = ms[0]
        out += ["", f"Masks (Tessera's run, step {m0['step']}, layer {m0['layer']}): {m0['k_per_row']} kv blocks per "
                f"row, {m0['runs_per_row']:.1f} runs per row, diagonal kept in {m0['diagonal_inclusion']:.0%} of rows"
                + "".join(f"; overlap with the previous step {x['overlap_with_previous_step']:.0%} (layer "
                          f"{x['layer']})" for x in ms if "overlap_with_previous_step" in x)[:400] + "."]
    if chart:
        out += ["", f"![step time split]({chart})"]
    return "\n".join(out) + "\n"


def splice(md_path: str, section: str) -> None:
    """Replaces the marked section of md_path (or appends it)."""
    text = open(md_path).read() if os.path.exists(md_path) else ""
    block = f"{BEGIN}\n{section}{END}\n"
    if BEGIN in text and END in text:
        a, b = text.index(BEGIN), text.index(END) + len(END)
        text = text[:a] + block.rstrip("\n") + text[b:]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block
    with open(md_path, "w") as f:
        f.write(text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--md", default=None, help="Markdown output (default: RESULTS.md beside the JSON)")
    ap.add_argument("--chart", default=None, help="chart PNG (default: step_time.png beside the JSON)")
    ap.add_argument("--into", default=None, help="also splice the section into this Markdown file")
    a = ap.parse_args(argv)
    with open(a.json) as f:
        doc = json.load(f)
    here = os.path.dirname(os.path.abspath(a.json))
    md = a.md or os.path.join(here, "RESULTS.md")
    chart = draw_chart(doc, a.chart or os.path.join(here, "step_time.png"))
    rel = os.path.relpath(chart, os.path.dirname(os.path.abspath(md))) if chart else None
    with open(md, "w") as f:
        f.write(markdown(doc, rel, os.path.relpath(os.path.abspath(a.json))))
    if a.into:
        rel2 = os.path.relpath(chart, os.path.dirname(os.path.abspath(a.into))) if chart else None
        splice(a.into, markdown(doc, rel2, os.path.relpath(os.path.abspath(a.json), os.path.dirname(
            os.path.abspath(a.into)))))
    print(f"wrote {md}" + (f", {chart}" if chart else " (no matplotlib: no chart)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
