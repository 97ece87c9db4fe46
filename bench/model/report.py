#!/usr/bin/env python3
"""Markdown table and chart of a model-loop JSON (bench/model/run.py; no torch, matplotlib for the chart only), for
either model: Wan2.1 with VSA top-k masks (config.density set) or HunyuanVideo with the STA table's masks
(config.tile, config.masks; density null). The text describes the run from the JSON's own config fields; a field that
is missing or null is left out (or shown as "-"), never formatted as a number.

  python3 bench/model/report.py bench/results/model/latest.json                  # -> RESULTS.md + step_time.png beside it
  python3 bench/model/report.py X.json --note "..."                              # a paragraph under the heading
  python3 bench/model/report.py bench/results/model/latest.json --into bench/RESULTS.md
  python3 bench/model/report.py bench/results/model/hunyuan-768p/latest.json --into bench/RESULTS.md
      (each config has its own section, between <!-- model:NAME begin --> and <!-- model:NAME end -->, NAME from the
       JSON's config.name: a config's section is replaced in place, or inserted after the last model section (at the
       end of the file when there is none), so the other configs' sections stay; a section of the old single pair
       <!-- model-loop --> ... <!-- /model-loop --> becomes the section of the config named in its heading;
       bench/peers/report.py rewrites bench/RESULTS.md whole, so run this after it, once per config)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

LEGACY_BEGIN, LEGACY_END = "<!-- model-loop -->", "<!-- /model-loop -->"  # one section for every config (before the
# per-config markers): migrated by splice()
ANY_END = re.compile(r"<!-- model:[A-Za-z0-9._-]+ end -->")
HEADING = re.compile(r"^## Model-level loop: (\S+)", re.M)
ORDER = ("dense", "flex", "flashinfer", "tessera")


def _f(x: Optional[float], nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _n(x: Any, spec: str = ",") -> str:
    """A number formatted with `spec`, or "-" for a missing / null / non-numeric field."""
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else "-"


def _dims(x: Any) -> str:
    return " x ".join(map(str, x)) if isinstance(x, (list, tuple)) and x else "-"


def _rows(doc: Dict[str, Any]) -> List[str]:
    names = [n for n in ORDER if n in doc.get("backends", {})] + [n for n in doc.get("backends", {}) if n not in ORDER]
    return names


def is_sta(c: Dict[str, Any]) -> bool:
    """HunyuanVideo with STA masks (run.py writes tile / tile_grid / masks for it), else Wan2.1 with VSA top-k."""
    return c.get("model") == "HunyuanVideoTransformer3DModel" or "tile" in c or "dual_layers" in c


def model_name(c: Dict[str, Any]) -> str:
    return c.get("model") or ("HunyuanVideoTransformer3DModel" if is_sta(c) else "WanTransformer3DModel")


def mask_label(c: Dict[str, Any]) -> str:
    """Short name of the mask rule (chart title)."""
    if isinstance(c.get("density"), (int, float)):
        return f"VSA top-{c['density']:.0%}"
    if is_sta(c):
        return f"STA, {_n(c.get('block'))}-token tiles"
    return f"{_n(c.get('block'))}-token blocks"


def describe(doc: Dict[str, Any]) -> str:
    """One paragraph on the machine, the model, the masks and the schedule, from the JSON's env and config."""
    c, e = doc.get("config", {}), doc.get("env", {})
    head = (f"{e.get('gpu') or 'CPU (no GPU in env)'}, revision {doc.get('revision')}, {doc.get('date')}; "
            f"torch {e.get('torch')}, diffusers {e.get('diffusers')}.")
    layers = f"{_n(c.get('layers'))} of {_n(c.get('layers_of_model'))} layers"
    if c.get("dual_layers") is not None or c.get("single_layers") is not None:
        layers += f" ({_n(c.get('dual_layers'))} dual-stream + {_n(c.get('single_layers'))} single-stream)"
    model = f"diffusers' {model_name(c)}, {layers}, {_n(c.get('heads'))} heads x {_n(c.get('head_dim'))}"
    p = c.get("parameters")
    if isinstance(p, (int, float)):
        model += f", {p / 1e9:.2f} B parameters" if p >= 1e8 else f", {p / 1e6:.2f} M parameters"
    if is_sta(c):
        tokens = (f"{_n(c.get('video_tokens'))} video tokens (latent {_dims(c.get('latent'))}, grid "
                  f"{_dims(c.get('grid'))}, tiles {_dims(c.get('tile'))} on a {_dims(c.get('tile_grid'))} tile grid)"
                  f" + {_n(c.get('text_tokens'))} text tokens = {_n(c.get('tokens'))} joint tokens, "
                  f"{_n(c.get('block'))}-token blocks")
        masks = f"masks: {c.get('masks') or 'STA'}"
    else:
        tokens = (f"{_n(c.get('tokens'))} video tokens (latent {_dims(c.get('latent'))}, grid "
                  f"{_dims(c.get('grid'))}), {_n(c.get('text_tokens'))} text tokens (cross-attention)")
        d = c.get("density")
        masks = (f"masks: VSA top-k on the live q/k, {_n(d, '.0%')} of the {_n(c.get('block'))}-token blocks per "
                 "row, a new mask every call (layer, head, step)") if d is not None else \
            (f"masks: {c['masks']}" if c.get("masks") else f"{_n(c.get('block'))}-token blocks")
    tail = "; ".join([masks] + [f"{label}: {c[k]}" for k, label in (
        ("token_order", "token order"), ("weights", "weights"), ("schedule", "schedule"), ("guidance", "guidance"))
        if c.get(k)])
    return f"{head} {model}; {tokens}; {tail}."


def _checks(b: Dict[str, Any]) -> str:
    """The step-0 check column: max rel L2, and how many checks were non-finite (run.py writes null for those)."""
    chk = b.get("checks") or []
    fin = [x["rel_l2"] for x in chk if isinstance(x.get("rel_l2"), (int, float))]
    bad = len(chk) - len(fin)
    if not chk:
        return "-"
    if not bad:
        return f"{max(fin):.1e}"
    return f"non-finite in {bad} of {len(chk)}" + (f"; finite max {max(fin):.1e}" if fin else "")


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
    att = [(x.get("attention_ms") or 0.0) / 1e3 for x in s]
    spa = [(x.get("sparsifier_ms") or 0.0) / 1e3 for x in s]
    rest = [(x.get("rest_ms") or 0.0) / 1e3 for x in s]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.barh(names, att, label="attention", color="#c44e52")
    ax.barh(names, spa, left=att, label="sparsifier (mask + layout)", color="#dd8452")
    ax.barh(names, rest, left=[a + b for a, b in zip(att, spa)], label="rest of the step", color="#8c8c8c")
    tot = [a + b + r for a, b, r in zip(att, spa, rest)]
    for i, (t, n) in enumerate(zip(tot, names)):
        failed = _checks(doc["backends"][n]).startswith("non-finite") or bool(doc["backends"][n].get("note"))
        ax.text(t, i, f" {t:.2f} s" + (" (failed its step-0 check)" if failed else ""), va="center", fontsize=8)
    c = doc.get("config", {})
    ax.set_xlabel("seconds per denoising step")
    ax.set_title(f"{c.get('name', '?')}, {_n(c.get('layers'))}/{_n(c.get('layers_of_model'))} layers, "
                 f"{_n(c.get('tokens'))} tokens, {mask_label(c)}", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_xlim(0, max(max(tot), 1e-9) * 1.18)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown(doc: Dict[str, Any], chart: Optional[str] = None, source: str = "", note: str = "") -> str:
    c = doc.get("config", {})
    title = "HunyuanVideo, STA masks" if is_sta(c) else "Wan2.1, VSA top-k masks"
    out = [f"## Model-level loop: {c.get('name', '?')} ({title}; issue 20)", ""]
    if note:
        out += [note, ""]
    out.append(describe(doc))
    if source:
        out.append(f"Source: `{source}`; command: `{doc.get('command')}`.")
    if doc.get("error"):
        out.append(f"Run error: {doc['error']}.")
    ext_steps = next((k[len("extrapolated_"):-len("_steps_s")] for b in doc.get("backends", {}).values()
                      for k in (b.get("summary") or {}) if k.startswith("extrapolated_")), "50")
    out += ["", "Per measured step (mean), milliseconds:", "",
            "| backend | step | attention | of which kernel | sparsifier (mask + layout) | rest | attention share | "
            f"{ext_steps} steps (s) | step-0 check (rel L2, max) |",
            "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for n in _rows(doc):
        b = doc["backends"][n]
        s = b.get("summary")
        ck = _checks(b)
        for k in ("note", "stopped", "error"):
            if b.get(k) and (s or k == "note"):
                notes.append(f"{n}: {b[k]}")
        if b.get("latent_finite") is False:
            notes.append(f"{n}: the latent after its last measured step is non-finite (its times are of NaN data)")
        if not s:
            out.append(f"| {n} | {b.get('error') or b.get('stopped') or 'no measured step'} | | | | | | | {ck} |")
            continue
        ext = next((v for k, v in s.items() if k.startswith("extrapolated_")), None)
        m = s.get("steps_measured")
        steps = f" ({m} step{'s' if m != 1 else ''})" if isinstance(m, int) and m < 3 else ""
        out.append(f"| {n}{steps} | {_f(s.get('step_ms'))} | {_f(s.get('attention_ms'))} | {_f(s.get('kernel_ms'))} | "
                   f"{_f(s.get('sparsifier_ms'))} | {_f(s.get('rest_ms'))} | {_f(s.get('attention_share'), 2)} | "
                   f"{_f(ext)} | {ck} |")
    if notes:
        out += ["", "Notes: " + "; ".join(notes) + "."]
    sp = doc.get("speedups") or {}
    if "tessera" in doc.get("backends", {}) and any(k.startswith("tessera_vs_") for k in sp):
        out += ["", "Tessera's speedup (the other backend's time / Tessera's):", "",
                "| over | attention | attention + sparsifier | whole step |", "|---|---|---|---|"]
        for n in _rows(doc):
            r = sp.get(f"tessera_vs_{n}")
            if r:
                out.append(f"| {n} | {_f(r.get('attention'), 2)}x | {_f(r.get('attention_plus_sparsifier'), 2)}x | "
                           f"{_f(r.get('step'), 2)}x |")
    agd = doc.get("agreement") or {}
    ag = agd.get("step0_prediction_rel_l2") or {}
    if ag:
        out += ["", "Agreement of the step-0 predictions on the same masks (relative L2): " +
                ", ".join(f"{k.replace('_vs_', ' vs ')} {_f(v, 4) if v is not None else 'non-finite'}"
                          for k, v in ag.items()) + f" (tolerance {agd.get('tolerance')})."]
    src = next((n for n in ("tessera", *_rows(doc)) if (doc.get("backends", {}).get(n) or {}).get("mask_stats")),
               None)
    ms = doc["backends"][src]["mask_stats"] if src else []
    if ms:
        m0 = ms[0]
        dens = f" (density {m0['density']:.1%})" if isinstance(m0.get("density"), (int, float)) else ""
        out += ["", f"Masks ({src}'s run, measured step {m0.get('step')}, layer {m0.get('layer')}): "
                f"{_n(m0.get('k_per_row'), 'g')} kv blocks per row{dens}, {_n(m0.get('runs_per_row'), '.1f')} runs "
                f"per row, diagonal kept in {_n(m0.get('diagonal_inclusion'), '.0%')} of rows"
                + "".join(f"; overlap with the previous step {_n(x['overlap_with_previous_step'], '.0%')} (layer "
                          f"{x.get('layer')}, step {x.get('step')})" for x in ms if "overlap_with_previous_step" in x)
                + "."]
    plans = ((doc.get("backends", {}).get("tessera") or {}).get("info") or {}).get("plans") or {}
    if plans:
        out += ["", "Tessera's plans: " + ", ".join(f"`{k}` ({v} calls)" for k, v in plans.items()) + "."]
    if chart:
        out += ["", f"![step time split]({chart})"]
    return "\n".join(out) + "\n"


def section_key(name: Any) -> str:
    """The marker name of a config: its name with every run of characters other than letters, digits, '.' and '_'
    as one '-' (an HTML comment may not hold '--'), or '' for a missing name."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-") if isinstance(name, str) else ""


def markers(key: str) -> Tuple[str, str]:
    return f"<!-- model:{key} begin -->", f"<!-- model:{key} end -->"


def _span(text: str, begin: str, end: str) -> Optional[Tuple[int, int]]:
    """Where the first begin ... end pair of text is (end's last character + 1), or None."""
    a = text.find(begin)
    b = text.find(end, a + len(begin)) if a >= 0 else -1
    return (a, b + len(end)) if b >= 0 else None


def _migrate(text: str, key: str) -> str:
    """The old single-pair section, if any, as the section of the config its heading names (key, the config being
    spliced, when the heading names none: the old splice replaced it with any config's); dropped when that config
    already has a section of its own (it is an older copy of it)."""
    span = _span(text, LEGACY_BEGIN, LEGACY_END)
    if span is None:
        return text
    a, b = span
    inner = text[a + len(LEGACY_BEGIN):b - len(LEGACY_END)].strip("\n")
    m = HEADING.search(inner)
    k = section_key(m.group(1)) if m else ""
    begin, end = markers(k or key)
    if _span(text, begin, end) is not None:
        rest = text[b:].lstrip("\n")
        return text[:a] + rest if rest else text[:a].rstrip("\n") + "\n"
    return text[:a] + f"{begin}\n{inner}\n{end}" + text[b:]


def splice(md_path: str, section: str, key: str) -> None:
    """Replaces config key's marked section of md_path, or inserts it after the last model section (appends it when
    there is none); an old single-pair section is migrated first (_migrate)."""
    if not key:
        raise ValueError("splice: no config name to mark the section with")
    text = open(md_path).read() if os.path.exists(md_path) else ""
    text = _migrate(text, key)
    begin, end = markers(key)
    body = section.rstrip("\n")
    block = f"{begin}\n{body}\n{end}"
    span = _span(text, begin, end)
    if span is not None:
        text = text[:span[0]] + block + text[span[1]:]
    else:
        last = [m.end() for m in ANY_END.finditer(text)]
        if last:
            text = text[:last[-1]] + "\n\n" + block + text[last[-1]:]
        else:
            text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    with open(md_path, "w") as f:
        f.write(text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--md", default=None, help="Markdown output (default: RESULTS.md beside the JSON)")
    ap.add_argument("--chart", default=None, help="chart PNG (default: step_time.png beside the JSON)")
    ap.add_argument("--into", default=None, help="also splice the section into this Markdown file")
    ap.add_argument("--note", default="", help="a paragraph under the section's heading (e.g. where it was written)")
    a = ap.parse_args(argv)
    with open(a.json) as f:
        doc = json.load(f)
    here = os.path.dirname(os.path.abspath(a.json))
    md = a.md or os.path.join(here, "RESULTS.md")
    if a.into and not section_key(doc.get("config", {}).get("name")):
        ap.error(f"--into: {a.json} has no config.name to mark its section with")
    chart = draw_chart(doc, a.chart or os.path.join(here, "step_time.png"))
    rel = os.path.relpath(chart, os.path.dirname(os.path.abspath(md))) if chart else None
    with open(md, "w") as f:
        f.write(markdown(doc, rel, os.path.relpath(os.path.abspath(a.json)), a.note))
    if a.into:
        rel2 = os.path.relpath(chart, os.path.dirname(os.path.abspath(a.into))) if chart else None
        splice(a.into, markdown(doc, rel2, os.path.relpath(os.path.abspath(a.json), os.path.dirname(
            os.path.abspath(a.into))), a.note), section_key(doc["config"]["name"]))
    print(f"wrote {md}" + (f", {chart}" if chart else " (no matplotlib: no chart)")
          + (f"; its section in {a.into}" if a.into else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
