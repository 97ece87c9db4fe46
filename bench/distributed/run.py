#!/usr/bin/env python3
"""tessera.distributed.ulysses_attention on 1, 2 or 4 GPUs (issue 22), launched by torchrun
(scripts/gpu_distributed.sh):

    torchrun --nproc-per-node W bench/distributed/run.py --out DIR [--workloads wan,wan-varied,sta] [--reps 10]
    torchrun --nproc-per-node 1 bench/distributed/run.py --smoke --out DIR

Timing mode: per workload, rank 0 first times the single-GPU call (tessera.block_sparse_attention on the full
tensors, the others wait), then every rank times ulysses_attention on its sequence shard with balance="tiles" and
"even", and "tiles" with 2 and 4 head groups (overlap of the all-to-alls with the attention). One timed call =
barrier, synchronise, call, synchronise (host clock); a call's time is the slowest rank's, the figure the median of
--reps after --warmup. Scaling efficiency = T_1 / (W * T_W). Every mode's output is gathered and compared with the
single-GPU output (bf16: max |diff| and relative L2; they differ only where a rank selects another plan for its heads
than the single call does). Writes DIR/distributed_w<W>.json. --cpu runs it on gloo and the CPU path, with the
workload "tiny": a check of this script, not a measurement.

Workloads (masks from bench/peers/workloads.py, numpy, the same seed on every rank; q, k, v bf16, D = 128, B = 1):
- wan: Wan2.1 720p, N = 75,600, 40 heads, blocks of 64, the top 10 % of a score field per row (the peer scoreboard's
  Wan720-topk): every head has the same active-block count, so balancing cannot help; the scaling target's workload.
- wan-varied: the same field with a per-head fraction 0.02 + 0.23 u_h (u_h uniform): per-head density varies.
- sta: HunyuanVideo 768x1280x117, N = 115,200, 24 heads, the real STA windows of (step 20, layer 10) at B = 384
  (STA-HV768-B384): per-head windows differ, so do the active-block counts.

Smoke mode (--smoke, world size 1 is enough): small shapes through NCCL: ulysses_attention equals the direct call
bit for bit for both balance modes, with LSE, on dense, block-CSR and index-list masks, ragged N and GQA; an error
raised on every rank; prints one line per check and exits non-zero on a failure.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import tessera  # noqa: E402
import tessera.distributed as td  # noqa: E402
from peers import workloads as pw  # noqa: E402


DEVICE = torch.device("cpu")


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def log(msg):
    if dist.get_rank() == 0:
        print(msg, flush=True)


def shard_bounds(n, world):
    base, extra = divmod(n, world)
    lens = [base + (r < extra) for r in range(world)]
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(int)
    return [(int(offs[r]), int(offs[r + 1])) for r in range(world)]


def make_qkv(n, heads, d, seed, device, dtype=torch.bfloat16, batch=1):
    g = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn((batch, n, heads, d), generator=g, device=device, dtype=dtype) for _ in range(3)]


def timed(fn, warmup, reps):
    """Median over reps of the slowest rank's synchronised call time, ms."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        t = torch.tensor([(time.perf_counter() - t0) * 1e3], device=DEVICE, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        ts.append(t.item())
    return statistics.median(ts), ts


def gather_seq(x):
    """All ranks' sequence shards [1, n_r, H, D] concatenated (on every rank)."""
    world = dist.get_world_size()
    n = torch.tensor([x.shape[1]], device=x.device)
    ns = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(ns, n)
    ns = [int(v.item()) for v in ns]
    m = max(ns)
    pad = torch.zeros((1, m) + tuple(x.shape[2:]), dtype=x.dtype, device=x.device)
    pad[:, :x.shape[1]] = x
    parts = [torch.empty_like(pad) for _ in range(world)]
    dist.all_gather(parts, pad)
    return torch.cat([p[:, :ln] for p, ln in zip(parts, ns)], dim=1)


def compare(a, b):
    a, b = a.float(), b.float()
    return {"max_abs_diff": float((a - b).abs().max().item()),
            "rel_l2": float(((a - b).norm() / b.norm().clamp_min(1e-30)).item()),
            "bit_identical": bool(torch.equal(a, b))}


def workload(name):
    if name == "wan":
        n, heads, b = 75600, 40, 64
        return dict(n=n, heads=heads, block=b, recipe="Wan720-topk (top 10 % per row)",
                    make=lambda: pw.topk_score_field(heads, pw.n_blocks(n, b), 0.10, np.random.default_rng(1)))
    if name == "wan-varied":
        n, heads, b = 75600, 40, 64

        def make():
            rng = np.random.default_rng(2)
            fracs = 0.02 + 0.23 * rng.random(heads)
            return np.concatenate([pw.topk_score_field(1, pw.n_blocks(n, b), float(f), rng) for f in fracs])
        return dict(n=n, heads=heads, block=b, recipe="Wan720 top-k, per-head fraction 0.02 + 0.23 u_h", make=make)
    if name == "tiny":  # a check of this script on the CPU (--cpu), not a measurement
        n, heads, b = 700, 6, 64

        def make():
            rng = np.random.default_rng(3)
            nb = pw.n_blocks(n, b)
            return rng.random((heads, nb, nb)) < rng.uniform(0.05, 0.9, (heads, 1, 1))
        return dict(n=n, heads=heads, block=b, recipe="random, per-head density 0.05-0.9 (script check)", make=make)
    if name == "sta":
        step, layer = pw.STA_CASE
        n = pw.STA_TILE_TOKENS * int(np.prod(pw.STA_GRID))
        return dict(n=n, heads=24, block=pw.STA_TILE_TOKENS,
                    recipe=f"real STA, HunyuanVideo 768x1280x117, step {step} layer {layer}, B = 384",
                    make=lambda: pw.sta_mask(pw.load_sta_table(), step, layer, 24))
    raise SystemExit(f"--workloads: unknown workload {name!r} (wan, wan-varied, sta)")


# (JSON key, balance, head_groups): the comparison, then the overlap of communication and attention
MODES = (("tiles", "tiles", 1), ("even", "even", 1), ("tiles_g2", "tiles", 2), ("tiles_g4", "tiles", 4))


def run_workload(name, args, device):
    rank, world = dist.get_rank(), dist.get_world_size()
    w = workload(name)
    n, heads, bs, d = w["n"], w["heads"], w["block"], 128
    mask_np = w["make"]()
    mask = torch.from_numpy(mask_np[None]).to(device)
    counts = td.head_active_blocks(mask, heads)
    q, k, v = make_qkv(n, heads, d, 7, device, args.dtype)
    a, e = shard_bounds(n, world)[rank]
    qs, ks, vs = (x[:, a:e].contiguous() for x in (q, k, v))
    row = {"workload": name, "recipe": w["recipe"], "n": n, "heads": heads, "head_dim": d, "block": bs,
           "density": float(mask_np.mean()), "active_blocks_per_head": {"min": min(counts), "max": max(counts),
                                                                        "mean": sum(counts) / heads}}
    # single GPU, on rank 0
    single = None
    if rank == 0:
        direct = lambda: tessera.block_sparse_attention(q, k, v, mask, bs)  # noqa: E731
        for _ in range(args.warmup):
            direct()
        ts = []
        for _ in range(args.reps):
            sync()
            t0 = time.perf_counter()
            direct()
            sync()
            ts.append((time.perf_counter() - t0) * 1e3)
        row["single_gpu_ms"] = statistics.median(ts)
        row["single_gpu_plan"] = tessera.last_dispatch()["plan_id"]
        single = direct()
    dist.barrier()
    t1 = torch.tensor([row.get("single_gpu_ms", 0.0)], device=device, dtype=torch.float64)
    dist.broadcast(t1, 0)
    t1 = t1.item()
    for key, balance, groups in MODES:
        fn = lambda: td.ulysses_attention(qs, ks, vs, mask, bs, None, balance=balance,  # noqa: E731
                                          head_groups=groups)
        ms, ts = timed(fn, args.warmup, args.reps)
        o = gather_seq(fn())
        asg = td.assign_heads(counts, heads, world, balance)
        mean_load = sum(asg.loads) / world
        res = {"ms": ms, "reps_ms": ts, "efficiency": t1 / (world * ms) if ms > 0 else None,
               "speedup": t1 / ms if ms > 0 else None, "loads": list(asg.loads),
               "load_imbalance": max(asg.loads) / mean_load if mean_load else None,
               "plan_rank0": tessera.last_dispatch()["plan_id"] if asg.q_heads[rank] else None}
        if rank == 0:
            res["vs_single_gpu"] = compare(o, single)
        row[key] = res
        log(f"  {name} W={world} {key}: {ms:.3f} ms (1 GPU {t1:.3f} ms), efficiency "
            f"{res['efficiency']:.3f}, load imbalance {res['load_imbalance']:.3f}"
            + (f", vs 1 GPU max|diff| {res['vs_single_gpu']['max_abs_diff']:.3g}" if rank == 0 else ""))
        del o
    if row["tiles"]["ms"] and row["even"]["ms"]:
        row["tiles_speedup_over_even"] = row["even"]["ms"] / row["tiles"]["ms"]
    return row


# ---------------------------------------------------------------------------------------------------- smoke

def smoke(device, dtype):
    """Small checks (NCCL; gloo with --cpu); returns the number of failures."""
    rank, world = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(0)
    fails = 0

    def check(label, fn):
        nonlocal fails
        try:
            ok, detail = fn()
        except Exception:  # noqa: BLE001 - reported
            ok, detail = False, traceback.format_exc()[-1500:]
        fails += not ok
        log(f"smoke {'ok  ' if ok else 'FAIL'} {label}: {detail}")

    def equal_case(n, h_q, h_kv, bs, fmt, balance, groups=1, batch=1):
        def run():
            q, = make_qkv(n, h_q, 128, n + h_q, device, dtype, batch)[:1]
            k, v = make_qkv(n, h_kv, 128, n + h_kv + 1, device, dtype, batch)[:2]
            nb = -(-n // bs)
            # B > 1: the local call reads q, k, v in the received layout [N, h, B, D] (batch stride D, head stride
            # B * D), a layout no single-GPU caller passes
            dense = rng.random((batch, h_q, nb, nb)) < rng.uniform(0.05, 0.9, (1, h_q, 1, 1))
            dense[..., 0] = True
            if fmt == "dense":
                mask = torch.from_numpy(dense).to(device)
            elif fmt == "csr":
                flat = dense.reshape(-1, nb)
                ro = np.concatenate([[0], np.cumsum(flat.sum(1))]).astype(np.int32)
                ci = np.nonzero(flat)[1].astype(np.int32)
                mask = ("csr", torch.from_numpy(ro).to(device), torch.from_numpy(ci).to(device), dense.shape)
            else:
                cnt = dense.sum(-1).astype(np.int32)
                idx = np.zeros(dense.shape[:3] + (nb,), np.int32)
                for i in np.ndindex(*dense.shape[:3]):
                    cols = np.nonzero(dense[i])[0]
                    idx[i][:len(cols)] = cols[::-1]
                mask = ("index_lists", torch.from_numpy(cnt).to(device), torch.from_numpy(idx).to(device), nb)
            o_ref, lse_ref = tessera.block_sparse_attention(q, k, v, mask, bs, return_lse=True)
            plan = tessera.last_dispatch()["plan_id"]
            a, e = shard_bounds(n, world)[rank]
            o, lse = td.ulysses_attention(q[:, a:e], k[:, a:e], v[:, a:e], mask, bs, None, balance=balance,
                                          return_lse=True, plan_id=plan, head_groups=groups)
            sync()
            same = torch.equal(o, o_ref[:, a:e]) and torch.equal(lse, lse_ref[:, :, a:e])
            return same, f"shard {tuple(o.shape)}, plan {plan}, bit-identical {same}"
        return run

    for n, h_q, h_kv, bs, fmt in ((1000, 5, 5, 64, "dense"), (777, 8, 2, 32, "csr"), (1500, 6, 6, 128, "index_lists")):
        for balance in ("tiles", "even"):
            check(f"N={n} H={h_q}/{h_kv} B={bs} {fmt} {balance}", equal_case(n, h_q, h_kv, bs, fmt, balance))
    check("N=1000 H=5/5 B=64 dense tiles, 2 head groups", equal_case(1000, 5, 5, 64, "dense", "tiles", 2))
    check("batch 2, N=640 H=4/2 B=64 csr tiles", equal_case(640, 4, 2, 64, "csr", "tiles", 1, 2))

    def error_case():
        q = torch.zeros((1, 64, 2, 128), device=device, dtype=dtype)
        bad = q.to(torch.int32) if rank == world - 1 else q
        try:
            td.ulysses_attention(bad, q, q, torch.ones((1, 2, 1, 1), dtype=torch.bool, device=device), 64)
        except tessera.TesseraError as e:
            return e.argument == "q", str(e)[:160]
        return False, "no error raised"
    check("error on the last rank raised everywhere", error_case)
    t = torch.tensor([fails], device=device)
    dist.all_reduce(t)
    return int(t.item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/distributed")
    ap.add_argument("--workloads", default="wan,wan-varied,sta")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--revision", default=os.environ.get("TESSERA_REVISION", ""))
    ap.add_argument("--cpu", action="store_true",
                    help="gloo on the CPU path (a check of this script, not a measurement)")
    args = ap.parse_args()
    global DEVICE
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.cpu:
        device = torch.device("cpu")
        args.dtype = torch.float64
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        args.dtype = torch.bfloat16
        dist.init_process_group("nccl")
    DEVICE = device
    world = dist.get_world_size()
    os.makedirs(args.out, exist_ok=True)
    if args.smoke:
        fails = smoke(device, args.dtype)
        log(f"smoke: world size {world}, {fails} failure(s)")
        dist.destroy_process_group()
        sys.exit(1 if fails else 0)
    doc = {"issue": 22, "world_size": world, "torch": torch.__version__, "revision": args.revision,
           "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (script check)",
           "nccl": str(torch.cuda.nccl.version()) if device.type == "cuda" else None, "reps": args.reps,
           "warmup": args.warmup, "dtype": str(args.dtype).replace("torch.", ""), "batch": 1,
           "protocol": "per call: barrier, synchronise, call, synchronise (host clock); slowest rank; median of reps",
           "workloads": []}
    path = os.path.join(args.out, f"distributed_w{world}.json")
    for name in [s.strip() for s in args.workloads.split(",") if s.strip()]:
        try:
            doc["workloads"].append(run_workload(name, args, device))
        except Exception:  # noqa: BLE001 - recorded, the next workload still runs
            doc["workloads"].append({"workload": name, "error": traceback.format_exc()[-2000:]})
            log(doc["workloads"][-1]["error"])
        if dist.get_rank() == 0:
            with open(path, "w") as f:
                json.dump(doc, f, indent=1)
        torch.cuda.empty_cache()
    log(f"wrote {path}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
