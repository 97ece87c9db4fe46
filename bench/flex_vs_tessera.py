#!/usr/bin/env python3
"""FlexAttention vs Tessera (mma.sync family) on the same tensors and block masks.

Reads the JSON and raw files written by bench_mma_attention (--data dir: q/k/v bf16 [B, N, H, D], per-family
block masks uint8 [B*H, n_qb, n_kvb], Tessera's best-plan O), times FlexAttention (torch.compile, one compiled
function per configuration; median of 10 after 3 warm-ups, CUDA events), checks Flex's O against Tessera's O
(relative L2), and writes the combined JSON with ratios (Flex ms / Tessera ms).
Usage: flex_vs_tessera.py --tessera OUT/tessera_mma_bench.json --data DIR --out OUT/flex_vs_tessera.json
"""
import argparse
import json
import os
import subprocess
import time

import numpy as np
import torch
import torch._dynamo
from torch.nn.attention.flex_attention import BlockMask, flex_attention

torch._dynamo.config.cache_size_limit = 256
if hasattr(torch._dynamo.config, "recompile_limit"):
    torch._dynamo.config.recompile_limit = 256


def load_bf16(path, shape):
    a = np.fromfile(path, dtype=np.uint16).reshape(shape)
    return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)


def time_cuda(fn, warm=3, reps=10):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return float(np.median(ts))


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    res = json.load(open(args.tessera))
    res["torch"] = torch.__version__
    res["timing"] = "CUDA events; Tessera median of 7 after 2 warm-ups, Flex median of 10 after 3 warm-ups"
    res["tflops_formula"] = "4 * head_dim * active (query, key) pairs / time"
    for g in res["geometries"]:
        B, N, H, D = g["batch"], g["n"], g["heads"], g["head_dim"]
        gdir = os.path.join(args.data, g["name"])
        q, k, v = (load_bf16(os.path.join(gdir, f"{n}.bf16"), (B, N, H, D)).transpose(1, 2).contiguous()
                   for n in ("q", "k", "v"))
        for f in g["families"]:
            bq, bkv = f["block_q"], f["block_kv"]
            nqb, nkvb = -(-N // bq), -(-N // bkv)
            mask = torch.from_numpy(np.fromfile(os.path.join(gdir, f"mask_{f['family']}.u8"), dtype=np.uint8)
                                    .reshape(B, H, nqb, nkvb)).cuda()
            counts = mask.sum(-1, dtype=torch.int32)
            idx = torch.argsort(mask.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
            opts = {} if (bq >= 128 and bkv >= 128) else {"BLOCK_M": bq, "BLOCK_N": bkv}
            variants = {}
            for form in ("partial", "full"):
                try:
                    if form == "partial":
                        bm = BlockMask.from_kv_blocks(counts, idx, BLOCK_SIZE=(bq, bkv), seq_lengths=(N, N))
                    else:
                        bm = BlockMask.from_kv_blocks(torch.zeros_like(counts), idx, counts, idx,
                                                      BLOCK_SIZE=(bq, bkv), seq_lengths=(N, N))
                    fn = torch.compile(lambda q, k, v, bm=bm: flex_attention(q, k, v, block_mask=bm, kernel_options=opts))
                    t0 = time.time()
                    out = fn(q, k, v)
                    torch.cuda.synchronize()
                    compile_ms = (time.time() - t0) * 1e3
                    ms = time_cuda(lambda: fn(q, k, v))
                    variants[form] = {"ms": ms, "first_call_ms": compile_ms, "out": out}
                except Exception as ex:  # report, do not hide
                    variants[form] = {"error": repr(ex)[:400]}
            ok = {k_: v_ for k_, v_ in variants.items() if "ms" in v_}
            o_t = load_bf16(os.path.join(gdir, f"o_{f['family']}.bf16"), (B, N, H, D)).transpose(1, 2)
            f["flex_variants"] = {k_: {kk: vv for kk, vv in v_.items() if kk != "out"} for k_, v_ in variants.items()}
            if ok:
                best = min(ok, key=lambda k_: ok[k_]["ms"])
                f["flex_form"] = best
                f["flex_ms"] = ok[best]["ms"]
                f["flex_tflops"] = 4.0 * D * f["active_pairs"] / (f["flex_ms"] * 1e-3) / 1e12
                f["ratio_flex_over_tessera"] = f["flex_ms"] / f["tessera_ms"]
                f["rel_l2_tessera_vs_flex"] = rel_l2(o_t, ok[best]["out"])
                print(f"{g['name']} {f['family']:10s} tessera {f['tessera_ms']:8.3f} ms ({f['tessera_tflops']:6.1f} TF) "
                      f"[{f['best_plan']}]  flex {f['flex_ms']:8.3f} ms ({f['flex_tflops']:6.1f} TF)  "
                      f"ratio {f['ratio_flex_over_tessera']:5.2f}  relL2 {f['rel_l2_tessera_vs_flex']:.2e}", flush=True)
            else:
                print(f"{g['name']} {f['family']}: flex failed {variants}", flush=True)
            if f["family"] == "Dense":
                try:
                    from torch.nn.attention import SDPBackend, sdpa_kernel
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        f["sdpa_flash2_ms"] = time_cuda(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))
                    f["sdpa_flash2_tflops"] = 4.0 * D * f["active_pairs"] / (f["sdpa_flash2_ms"] * 1e-3) / 1e12
                except Exception as ex:
                    f["sdpa_flash2_error"] = repr(ex)[:300]
            del variants, ok
            torch.cuda.empty_cache()
        del q, k, v
    try:
        res["git_revision"] = open(os.path.join(os.path.dirname(args.out), "revision.txt")).read().strip()
    except OSError:
        pass
    json.dump(res, open(args.out, "w"), indent=2)


if __name__ == "__main__":
    main()
