#!/usr/bin/env python3
"""Model-level run (issue 20): a Wan2.1 denoising loop (diffusers WanTransformer3DModel, random weights, bf16) whose
self-attention layers take VSA-rule masks computed on the live q/k, through dense SDPA (cuDNN), FlexAttention,
FlashInfer and Tessera. bench/model/README.md describes the protocol and the JSON; scripts/gpu_model.sh runs it on
the GPU machine.

  python3 bench/model/run.py --config wan14b-720p --steps 3 --seconds 400 --out bench/results/model
  python3 bench/model/run.py --config tiny --device cpu --backends tessera,dense --out /tmp/m   # harness smoke run

Per backend: step 0 is the warm-up and the agreement step (Tessera computes the masks live and records them; Flex
and FlashInfer replay them, so the three predictions can be compared on the same masks; dense runs without masks),
then `--steps` measured steps with live masks continue from that backend's own latent. The time budget (`--seconds`)
is checked before every step: a backend whose next step would not fit stops there (its row says how many steps ran),
and a backend that cannot start gets an error row "not run: time budget".
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
for p in (REPO, os.path.join(REPO, "python")):
    if p not in sys.path:
        sys.path.insert(0, p)

SCHEMA = "tessera-model-loop/1"
BF16_TOLERANCE = 1e-2  # relative L2, DESIGN.md section 1 (per attention call against the fp32 reference)


def revision(arg: Optional[str]) -> str:
    if arg:
        return arg
    try:
        with open(os.path.join(REPO, ".revision")) as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def rel_l2(a, b) -> Optional[float]:
    a, b = a.float(), b.float()
    den = float(b.norm())
    x = float((a - b).norm()) / den if den > 0 else float((a - b).norm())
    return x if math.isfinite(x) else None


def mask_stats(idx, n_kvb: int, counts=None) -> Dict[str, float]:
    """Statistics of one layer's index lists [1, H, n_qb, K] (with `counts` [1, H, n_qb]: rows of fewer than K
    blocks, the entries past a row's count repeating a listed block): blocks per row, density, runs of consecutive kv
    blocks per row, the fraction of rows that keep their own (diagonal) block."""
    import torch

    s = torch.sort(idx[0].long(), dim=-1).values
    runs = 1 + (s[..., 1:] - s[..., :-1] > 1).sum(-1).float()
    rows = torch.arange(s.shape[1], device=s.device).view(1, -1, 1)
    diag = (s == rows).any(-1).float()
    k = float(counts.float().mean()) if counts is not None else float(s.shape[-1])
    return {"k_per_row": round(k, 3), "density": k / n_kvb, "runs_per_row": float(runs.mean()),
            "diagonal_inclusion": float(diag.mean())}


def overlap(a, b) -> float:
    """Mean fraction of a row's kv blocks that two index lists [1, H, n_qb, K] share."""
    import torch

    n = int(max(int(a.max()), int(b.max()))) + 1
    da = torch.zeros(*a.shape[:-1], n, dtype=torch.bool, device=a.device).scatter_(-1, a.long(), True)
    db = torch.zeros_like(da).scatter_(-1, b.long(), True)
    return float((da & db).sum(-1).float().mean() / a.shape[-1])


class Run:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.t0 = time.monotonic()
        self.deadline = self.t0 + a.seconds
        self.doc: Dict[str, Any] = {}
        os.makedirs(a.out, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def write(self) -> None:
        self.doc["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        name = f"{self.doc['date']}_{self.doc['revision']}.json"
        for fn in (name, "latest.json"):
            tmp = os.path.join(self.a.out, fn + ".tmp")
            with open(tmp, "w") as f:
                json.dump(self.doc, f, indent=1)
            os.replace(tmp, os.path.join(self.a.out, fn))

    def log(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f} s] {msg}", flush=True)


def env_info(device) -> Dict[str, Any]:
    import torch

    e: Dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                         "torch_cuda": torch.version.cuda}
    try:
        import diffusers

        e["diffusers"] = diffusers.__version__
    except Exception as ex:
        e["diffusers"] = f"not importable: {ex}"
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        e.update(gpu=p.name, sms=p.multi_processor_count, capability=list(torch.cuda.get_device_capability(device)),
                 memory_gib=round(p.total_memory / 2**30, 1))
        try:
            e["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                                              "--format=csv,noheader"], capture_output=True, text=True,
                                             timeout=20).stdout.strip()
        except Exception:
            pass
    return e


def summarize(steps: List[Dict[str, Any]], schedule_steps: int) -> Dict[str, Any]:
    keys = ("step_ms", "attention_ms", "kernel_ms", "convert_ms", "mask_ms", "layout_ms", "rest_ms")
    out: Dict[str, Any] = {k: sum(s[k] for s in steps) / len(steps) for k in keys}
    out["attention_share"] = out["attention_ms"] / out["step_ms"] if out["step_ms"] > 0 else None
    out["sparsifier_ms"] = out["mask_ms"] + out["layout_ms"]
    out["steps_measured"] = len(steps)
    out[f"extrapolated_{schedule_steps}_steps_s"] = out["step_ms"] * schedule_steps / 1e3
    return out


def speedups(backends: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
    """For every pair of measured backends a, b: how many times faster a is than b (b's time / a's) per step, in
    attention (convert + kernel), in attention + sparsifier (mask + layout), and in the whole step."""
    ok = {n: b["summary"] for n, b in backends.items() if b.get("summary")}
    out: Dict[str, Dict[str, float]] = {}
    for a, sa in ok.items():
        for b, sb in ok.items():
            if a == b:
                continue
            r = {}
            for label, f in (("attention", lambda s: s["attention_ms"]),
                             ("attention_plus_sparsifier", lambda s: s["attention_ms"] + s["sparsifier_ms"]),
                             ("step", lambda s: s["step_ms"])):
                if f(sa) > 0:
                    r[label] = round(f(sb) / f(sa), 3)
            out[f"{a}_vs_{b}"] = r
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="wan14b-720p", help="wan14b-720p (default), wan1.3b-720p, wan1.3b-480p, tiny; "
                    "hunyuan-768p (HunyuanVideo with the real STA masks, bench/model/hunyuan.py), tiny-hv")
    ap.add_argument("--layers", type=int, default=0, help="transformer blocks to build (0 = the config's all)")
    ap.add_argument("--backends", default="tessera,flex,flashinfer,dense")
    ap.add_argument("--steps", type=int, default=3, help="measured steps per backend after the warm-up step (>= 1)")
    ap.add_argument("--density", type=float, default=0.10, help="VSA top-k density per query block")
    ap.add_argument("--block", type=int, default=None, help="block size in tokens (default: Wan 64 = one VSA cube of "
                    "4x4x4; HunyuanVideo the STA tile, 384 = 6x8x8)")
    ap.add_argument("--schedule-steps", type=int, default=50, help="steps of the schedule (and the extrapolation)")
    ap.add_argument("--seconds", type=float, default=400.0, help="time budget of the whole run")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "model"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-layers", default="first,last", help="layers whose step-0 attention is checked against "
                                                                 "the fp32 reference (comma list; first, last)")
    ap.add_argument("--fi-jit-timeout", type=float, default=300.0)
    ap.add_argument("--tessera-module-dir", default=None)
    ap.add_argument("--revision", default=None)
    ap.add_argument("--flashinfer-jit-only", action="store_true",
                    help="only build (or load) FlashInfer's FA3 batch-prefill module, then exit")
    a = ap.parse_args(argv)

    import torch

    if a.tessera_module_dir and a.tessera_module_dir not in sys.path:
        # before anything imports the tessera package (the Wan loop's processor does): the package spans the
        # tessera directories on sys.path when it is first imported
        sys.path.insert(0, a.tessera_module_dir)
    device = torch.device(a.device)
    if a.flashinfer_jit_only:
        from bench.model.backends import make_backend

        t = time.perf_counter()
        be = make_backend("flashinfer", a.block, device, a.fi_jit_timeout)
        print(json.dumps({"flashinfer_jit": be.info().get("jit"), "s": round(time.perf_counter() - t, 1)},
                         default=str), flush=True)
        return 0

    from bench.model.backends import BACKENDS, make_backend
    from bench.model.hunyuan import HUNYUAN_CONFIGS, HunyuanLoop
    from bench.model.loop import CONFIGS, Loop, Recorder

    hv = a.config in HUNYUAN_CONFIGS
    if a.config not in CONFIGS and not hv:
        ap.error(f"--config: unknown {a.config!r} (one of {', '.join(list(CONFIGS) + list(HUNYUAN_CONFIGS))})")
    if a.steps < 1:
        ap.error("--steps: need >= 1")
    names = [b.strip() for b in a.backends.split(",") if b.strip()]
    for n in names:
        if n not in BACKENDS:
            ap.error(f"--backends: unknown {n!r} (one of {', '.join(BACKENDS)})")
    if hv:
        cfg = HUNYUAN_CONFIGS[a.config]
        if a.block is not None and a.block != cfg.block:
            ap.error(f"--block: {cfg.name} runs STA's tile of {cfg.block} tokens")
        a.block = cfg.block
    else:
        cfg = CONFIGS[a.config]
        a.block = a.block or 64
    layers = a.layers or cfg.layers
    if not 1 <= layers <= cfg.layers:
        ap.error(f"--layers: need 1..{cfg.layers} for {cfg.name}")
    check_layers = sorted({0 if s.strip() == "first" else layers - 1 if s.strip() == "last" else int(s)
                           for s in a.check_layers.split(",") if s.strip()})

    r = Run(a)
    cuda = device.type == "cuda"
    r.doc = {
        "schema": SCHEMA, "revision": revision(a.revision), "date": _dt.datetime.now().strftime("%Y-%m-%d"),
        "timestamp": _dt.datetime.now().isoformat(timespec="seconds"), "command": " ".join([sys.executable] + sys.argv),
        "env": env_info(device),
        "config": {"name": cfg.name, "model": "HunyuanVideoTransformer3DModel" if hv else "WanTransformer3DModel",
                   "latent": list(cfg.latent), "grid": list(cfg.grid), "tokens": cfg.tokens,
                   "layers": layers, "layers_of_model": cfg.layers, "heads": cfg.heads, "head_dim": cfg.head_dim,
                   "ffn": cfg.ffn, "text_tokens": cfg.text_tokens, "block": a.block, "density": a.density,
                   "token_order": "cube order (bench/model/vsa.py cube_token_order, cubes 4x4x4)",
                   "weights": "random (diffusers' initialisation), bf16; _keep_in_fp32_modules in float32",
                   "guidance": "none: one transformer forward per step (classifier-free guidance would double it)",
                   "schedule": f"flow matching, Euler, shift 5.0, {a.schedule_steps} steps; steps 0..{a.steps} run"},
        "protocol": {
            "timing": "CUDA events on the stream, per self-attention call and per step (bench/model/loop.py), "
                      "read after each step" if cuda else "host clocks (CPU smoke run: not a measurement)",
            "warmup": "step 0 per backend (compile, JIT load, runtime creation; the agreement step)",
            "measured": f"steps 1..{a.steps} with masks computed live each call; summary = mean per step",
            "check": f"step 0, layers {check_layers}: fp32 E(M) on sampled query rows of the first and last head "
                     f"(bench/peers/gpu.py Reference), tolerance {BF16_TOLERANCE:g}",
            "agreement": "step-0 model prediction of the sparse backends on the same (replayed) masks, relative L2",
        },
        "backends": {}, "agreement": {}, "speedups": {},
    }
    if hv:
        r.doc["config"].update(
            density=None, video_tokens=cfg.video_tokens, tile=list(cfg.tile), tile_grid=list(cfg.tile_grid),
            dual_layers=min(layers, cfg.dual_layers), single_layers=max(0, layers - cfg.dual_layers),
            token_order="STA tile-major order of the video tokens (bench/model/sta.py), then the text tokens",
            masks=("FastVideo's STA table (corpus/data), window per (step, layer, head); video tiles attend their "
                   "window and the text block, the text block attends everything" if cfg.window is None else
                   f"one window {list(cfg.window)} for every head (smoke config)"),
            weights="random (diffusers' initialisation), bf16 (float32 on a CPU smoke run)",
            guidance="embedded guidance 6.0 (HunyuanVideo's distilled guidance: one forward per step)",
            schedule=f"flow matching, Euler, shift 7.0, {a.schedule_steps} steps; schedule steps "
                     f"{cfg.first_step}..{cfg.first_step + a.steps} run (STA keeps steps 0-14 dense)")
        r.doc["protocol"]["measured"] = (f"steps 1..{a.steps} of the loop (schedule steps {cfg.first_step + 1}.."
                                         f"{cfg.first_step + a.steps}), each layer's STA mask of its step")
    r.log(f"{cfg.name}: {layers} of {cfg.layers} layers, {cfg.tokens} tokens, backends {names}, budget {a.seconds} s")
    try:
        loop = (HunyuanLoop if hv else Loop)(cfg, layers, device, a.block, a.density, a.schedule_steps, a.seed)
    except Exception as ex:
        r.doc["error"] = f"model build failed: {type(ex).__name__}: {ex}"
        r.write()
        traceback.print_exc()
        return 1
    r.doc["config"]["parameters"] = loop.params()
    r.doc["config"]["build_s"] = round(loop.build_s, 1)
    r.log(f"model built: {loop.params() / 1e9:.2f} B parameters in {loop.build_s:.1f} s")
    if hasattr(loop, "prepare_masks"):  # static masks (STA): built before any backend is timed, shared by all
        r.doc["config"]["mask_prepare_s"] = round(loop.prepare_masks(a.steps), 2)
        r.log(f"masks of steps 0..{a.steps} built in {r.doc['config']['mask_prepare_s']} s (untimed)")
    r.write()

    ctx = loop.ctx
    preds: Dict[str, Any] = {}
    est_step_s = None  # a pessimistic first-step estimate for backends not yet run
    for name in names:
        row: Dict[str, Any] = {"steps": [], "checks": []}
        r.doc["backends"][name] = row
        if est_step_s is not None and r.left() < est_step_s * (2 if name == "dense" else 1.2):
            row["error"] = f"not run: time budget ({r.left():.0f} s left, a step needs ~{est_step_s:.0f} s)"
            r.log(f"{name}: {row['error']}")
            r.write()
            continue
        try:  # FlashInfer's JIT (if its module is not cached) within what is left of the budget
            be = make_backend(name, a.block, device, max(5.0, min(a.fi_jit_timeout, r.left() - 60)),
                              a.tessera_module_dir)
        except Exception as ex:
            row["error"] = f"{type(ex).__name__}: {str(ex)[:400]}"
            r.log(f"{name}: unavailable: {row['error']}")
            r.write()
            continue
        ctx.backend = be
        ctx.checks = []
        ctx.check_layers = check_layers
        # Step 0: warm-up + agreement (Tessera records the masks, Flex and FlashInfer replay them).
        can_replay = be.sparse and "tessera" in preds and name != "tessera"
        ctx.record, ctx.replay = (name == "tessera"), can_replay
        ctx.masks = {}
        try:
            if cuda:
                torch.cuda.synchronize(device)
            t = time.perf_counter()
            pred, x = loop.step(loop.x0, 0, None)
            if cuda:
                torch.cuda.synchronize(device)
            row["first_step_s"] = round(time.perf_counter() - t, 2)
            row["step0_masks"] = "recorded (live)" if ctx.record else "replayed from tessera" if ctx.replay else \
                ("live" if be.sparse else "none (dense)")
            row["checks"] = list(ctx.checks)
            bad = [c for c in ctx.checks if c["rel_l2"] is None or c["rel_l2"] > BF16_TOLERANCE]
            if bad:
                row["note"] = f"FAILS the bf16 check on {len(bad)} of {len(ctx.checks)} checked calls"
            if be.sparse:
                preds[name] = pred
            if name == "tessera":
                ctx.replay_store = dict(ctx.masks)
        except Exception as ex:
            row["error"] = f"step 0: {type(ex).__name__}: {str(ex)[:400]}"
            r.log(f"{name}: {row['error']}")
            traceback.print_exc()
            r.write()
            ctx.record = ctx.replay = False
            continue
        finally:
            ctx.check_layers = ()
        ctx.record = ctx.replay = False
        r.log(f"{name}: step 0 (warm-up) {row['first_step_s']} s; checks "
              f"{[round(c['rel_l2'], 5) if c['rel_l2'] is not None else None for c in row['checks']]}")
        est_step_s = max(est_step_s or 0.0, row["first_step_s"] * 0.6)
        # Measured steps.
        keep = {}  # layer -> last step's index lists (mask change across steps), first and last layer
        stats = []
        for i in range(1, a.steps + 1):
            last = row["steps"][-1]["step_ms"] / 1e3 if row["steps"] else row["first_step_s"]
            if r.left() < last * 1.1:
                row["stopped"] = f"time budget: {i - 1} of {a.steps} measured steps ran ({r.left():.0f} s left)"
                break
            rec = Recorder(cuda)
            ctx.record = be.sparse
            ctx.masks = {}
            try:
                pred, x = loop.step(x, i, rec)
                if cuda:
                    torch.cuda.synchronize(device)
            except Exception as ex:
                row["error"] = f"step {i}: {type(ex).__name__}: {str(ex)[:400]}"
                traceback.print_exc()
                break
            finally:
                ctx.record = False
            s = rec.summary()
            s["step"] = i
            s["sigma"] = loop.sigmas[i]
            row["steps"].append({k: (round(v, 3) if isinstance(v, float) else v) for k, v in s.items()})
            if be.sparse and ctx.masks:
                for layer in (0, layers - 1):
                    st = mask_stats(ctx.masks[layer][1], -(-cfg.tokens // a.block), ctx.masks[layer][0])
                    st.update(step=i, layer=layer)
                    if layer in keep:
                        st["overlap_with_previous_step"] = round(overlap(keep[layer], ctx.masks[layer][1]), 4)
                    if layers > 1 and layer == layers - 1:
                        st["overlap_with_layer0"] = round(overlap(ctx.masks[0][1], ctx.masks[layer][1]), 4)
                    keep[layer] = ctx.masks[layer][1]
                    stats.append(st)
            ctx.masks = {}
            r.log(f"{name}: step {i}: step {s['step_ms']:.1f} ms, attention {s['attention_ms']:.1f} "
                  f"(kernel {s['kernel_ms']:.1f}), mask {s['mask_ms']:.1f}, layout {s['layout_ms']:.1f}")
        if stats:
            row["mask_stats"] = stats
        if row["steps"]:  # timings of a non-finite latent are timings of NaN data: say so
            row["latent_finite"] = bool(torch.isfinite(x).all())
        row["info"] = be.info()
        if row["steps"]:
            row["summary"] = summarize(row["steps"], a.schedule_steps)
            est_step_s = max(est_step_s, row["summary"]["step_ms"] / 1e3)
        if cuda:
            row["max_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 1)
        r.doc["speedups"] = speedups(r.doc["backends"])
        r.write()
        del be
        ctx.backend = None
        if cuda:
            torch.cuda.empty_cache()
    # Agreement of the sparse backends' step-0 predictions on the same masks.
    agree: Dict[str, Any] = {}
    ps = list(preds)
    for i, p in enumerate(ps):
        for q in ps[i + 1:]:
            agree[f"{p}_vs_{q}"] = rel_l2(preds[p], preds[q])
    r.doc["agreement"] = {"step0_prediction_rel_l2": agree, "tolerance": BF16_TOLERANCE,
                          "within_tolerance": all(v is not None and v <= BF16_TOLERANCE for v in agree.values())
                          if agree else None,
                          "note": "the transformer's step-0 output (velocity) from the same latent, timestep and "
                                  f"masks through all {layers} layers; Flex is the exact masked reference "
                                  "(FlexAttention computes E(M) with the same block lists)"}
    r.doc["speedups"] = speedups(r.doc["backends"])
    r.write()
    r.log(f"agreement {agree}")
    for n, b in r.doc["backends"].items():
        s = b.get("summary")
        if s:
            r.log(f"{n:10s} step {s['step_ms']:9.1f} ms  attention {s['attention_ms']:8.1f}  mask {s['mask_ms']:6.1f}"
                  f"  layout {s['layout_ms']:6.1f}  rest {s['rest_ms']:8.1f}  share {s['attention_share']:.2f}")
        else:
            r.log(f"{n:10s} {b.get('error', 'no measured step')}")
    print(json.dumps(r.doc["speedups"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
