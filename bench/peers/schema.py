"""The scoreboard's JSON document (issue 17's shape), its validation and the merging of partial runs (no torch).

    {"schema": "tessera-peers/1", "revision": ..., "gpu": ..., "date": "YYYY-MM-DD", "command": ...,
     "env": {...}, "protocol": {...}, "workloads": [{name, n, heads, head_dim, block_q, block_kv, density,
     active_pairs, ...}],
     "rows": [{"workload": ..., "system": "tessera" | "tessera-best" | "flex" | "flashinfer" | "cudnn",
               "kernel_ms": ..., "request_ms": ..., "first_call_ms": ..., "tflops": ..., "rel_l2": ...,
               "rel_l2_vs_tessera": ..., "plan": ..., "note": ..., ["error": why it did not run], ...}]}

Every row has every key of ROW_KEYS (null where it does not apply). A row with "error" did not produce a kernel
time; a row without one has kernel_ms > 0 and tflops = 4 * D * active_pairs / kernel time.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Optional, Tuple

SCHEMA = "tessera-peers/1"
SYSTEMS = ("tessera", "tessera-best", "flex", "flashinfer", "cudnn")
PEERS = ("flashinfer", "flex", "cudnn")
ROW_KEYS = ("workload", "system", "kernel_ms", "request_ms", "first_call_ms", "tflops", "rel_l2",
            "rel_l2_vs_tessera", "plan", "note")
TOP_KEYS = ("schema", "revision", "gpu", "date", "command", "rows")
NOT_RUN = "not run"  # prefix of error rows for units the run did not reach (time budget, interrupted)


def row(workload: str, system: str, **fields: Any) -> Dict[str, Any]:
    r = {k: None for k in ROW_KEYS}
    r["workload"], r["system"] = workload, system
    r.update(fields)
    return r


def error_row(workload: str, system: str, error: str, **fields: Any) -> Dict[str, Any]:
    return row(workload, system, error=str(error), **fields)


def is_not_run(r: Dict[str, Any]) -> bool:
    return isinstance(r.get("error"), str) and r["error"].startswith(NOT_RUN)


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def validate(doc: Dict[str, Any], complete: bool = False) -> List[str]:
    """Problems of a document (empty when valid). complete=True also requires one row per (workload, system)."""
    p: List[str] = []
    if not isinstance(doc, dict):
        return ["top level is not an object"]
    for k in TOP_KEYS:
        if k not in doc:
            p.append(f"missing top-level key {k!r}")
    if doc.get("schema", SCHEMA) != SCHEMA:
        p.append(f"schema {doc.get('schema')!r} is not {SCHEMA!r}")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        return p + ["rows is not a list"]
    wl = {w.get("name"): w for w in doc.get("workloads", []) if isinstance(w, dict)}
    seen = set()
    for i, r in enumerate(rows):
        where = f"rows[{i}]"
        if not isinstance(r, dict):
            p.append(f"{where} is not an object")
            continue
        where = f"rows[{i}] ({r.get('workload')}, {r.get('system')})"
        for k in ROW_KEYS:
            if k not in r:
                p.append(f"{where}: missing key {k!r}")
        if r.get("system") not in SYSTEMS:
            p.append(f"{where}: system {r.get('system')!r} not in {SYSTEMS}")
        if not isinstance(r.get("workload"), str) or not r.get("workload"):
            p.append(f"{where}: workload must be a non-empty string")
        key = (r.get("workload"), r.get("system"))
        if key in seen:
            p.append(f"{where}: duplicate row")
        seen.add(key)
        if "error" in r:
            if not isinstance(r["error"], str) or not r["error"]:
                p.append(f"{where}: error must be a non-empty string")
            continue
        for k in ("kernel_ms", "tflops"):
            if not (_num(r.get(k)) and r[k] > 0):
                p.append(f"{where}: {k} must be a positive number in a row without error (got {r.get(k)!r})")
        for k in ("request_ms", "first_call_ms", "rel_l2", "rel_l2_vs_tessera"):
            v = r.get(k)
            if v is not None and not (_num(v) and v >= 0):
                p.append(f"{where}: {k} must be null or a number >= 0 (got {v!r})")
        w = wl.get(r.get("workload"))
        if w and _num(w.get("active_pairs")) and _num(r.get("kernel_ms")) and r["kernel_ms"] > 0 \
                and _num(r.get("tflops")):
            want = 4.0 * w["head_dim"] * w["active_pairs"] / (r["kernel_ms"] * 1e-3) / 1e12
            if abs(r["tflops"] - want) > 1e-3 * want:
                p.append(f"{where}: tflops {r['tflops']:.4g} != 4 * D * active_pairs / kernel time = {want:.4g}")
        if r.get("system", "").startswith("tessera") and not r.get("plan"):
            p.append(f"{where}: a Tessera row without error needs its plan")
    if complete:
        names = [w["name"] for w in doc.get("workloads", [])] or sorted({r.get("workload") for r in rows})
        for n in names:
            for s in SYSTEMS:
                if (n, s) not in seen:
                    p.append(f"no row for ({n}, {s})")
    return p


def merge(base: Dict[str, Any], new: Dict[str, Any]) -> Dict[str, Any]:
    """`new` over `base`: a row of `new` replaces base's row of the same (workload, system) unless it is a
    'not run' error row and base's row is not; workloads by name likewise. Top-level fields come from `new`;
    `merged_from` lists every contributing run (revision, date, command). Row order: base's, then new ones."""
    out = copy.deepcopy(base)
    runs = list(base.get("merged_from") or [_run_id(base)])
    runs.append(_run_id(new))
    for k, v in new.items():
        if k not in ("rows", "workloads", "merged_from"):
            out[k] = copy.deepcopy(v)
    idx = {(r["workload"], r["system"]): i for i, r in enumerate(out.get("rows", []))}
    rows = out.setdefault("rows", [])
    for r in new.get("rows", []):
        key = (r["workload"], r["system"])
        if key in idx:
            old = rows[idx[key]]
            if is_not_run(r) and not is_not_run(old):
                continue
            rows[idx[key]] = copy.deepcopy(r)
        else:
            idx[key] = len(rows)
            rows.append(copy.deepcopy(r))
    wi = {w["name"]: i for i, w in enumerate(out.get("workloads", []))}
    wls = out.setdefault("workloads", [])
    measured = {r["workload"] for r in new.get("rows", []) if not is_not_run(r)}
    for w in new.get("workloads", []):
        if w["name"] in wi:
            if w["name"] in measured or "active_pairs" not in wls[wi[w["name"]]]:
                wls[wi[w["name"]]] = copy.deepcopy(w)
        else:
            wi[w["name"]] = len(wls)
            wls.append(copy.deepcopy(w))
    out["merged_from"] = runs
    return out


def _run_id(doc: Dict[str, Any]) -> Dict[str, Any]:
    return {k: doc.get(k) for k in ("revision", "date", "command")}


def rows_by(doc: Dict[str, Any]) -> Dict[Tuple[str, str], Dict[str, Any]]:
    return {(r["workload"], r["system"]): r for r in doc.get("rows", [])}


def workload_names(doc: Dict[str, Any]) -> List[str]:
    names = [w["name"] for w in doc.get("workloads", [])]
    for r in doc.get("rows", []):
        if r["workload"] not in names:
            names.append(r["workload"])
    return names


def ok(r: Optional[Dict[str, Any]], key: str = "kernel_ms") -> Optional[float]:
    """r[key] when the row ran and the value is a positive number, else None."""
    if not r or "error" in r:
        return None
    v = r.get(key)
    return float(v) if _num(v) and v > 0 else None


__all__ = ["SCHEMA", "SYSTEMS", "PEERS", "ROW_KEYS", "NOT_RUN", "row", "error_row", "is_not_run", "validate",
           "merge", "rows_by", "workload_names", "ok"]
