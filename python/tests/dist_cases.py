"""Cases of tessera.distributed.ulysses_attention, run inside a gloo group by test_distributed_cpu.py.

Every rank builds the same full request from a seed, calls the single-process tessera.block_sparse_attention on
it (the reference), takes its sequence shard and calls ulysses_attention. `run_world` spawns the processes and
collects, per case and rank, either ("ok", detail) / ("mismatch", detail) or the error raised.
"""
import json
import os
import socket
import sys
import time
import traceback
from datetime import timedelta

import numpy as np

from conftest import dense_to_csr, dense_to_index_lists

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _split(n, world, lens=None):
    """Shard boundaries: torch.tensor_split's (ragged N) unless explicit lengths are given."""
    if lens is None:
        base, extra = divmod(n, world)
        lens = [base + (r < extra) for r in range(world)]
    assert sum(lens) == n
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(int)
    return [(int(offs[r]), int(offs[r + 1])) for r in range(world)]


def _request(seed, b, n_q, n_kv, h_q, h_kv, d, bq, bkv, mask_heads, density, dtype="float64", empty_heads=()):
    import torch
    rng = np.random.default_rng(seed)
    q = torch.from_numpy(rng.standard_normal((b, n_q, h_q, d))).to(getattr(torch, dtype))
    k = torch.from_numpy(rng.standard_normal((b, n_kv, h_kv, d))).to(getattr(torch, dtype))
    v = torch.from_numpy(rng.standard_normal((b, n_kv, h_kv, d))).to(getattr(torch, dtype))
    nqb, nkvb = -(-n_q // bq), -(-n_kv // bkv)
    dens = np.asarray(density, dtype=float).reshape(1, -1, 1, 1)  # per-head densities vary: balancing matters
    dense = rng.random((b if mask_heads else 1, mask_heads or 1, nqb, nkvb)) < dens
    for h in empty_heads:
        dense[:, h] = False
    return q, k, v, dense, rng


def _shard(x, rank, world, lens=None):
    a, e = _split(x.shape[1], world, lens)[rank]
    return x[:, a:e]


def _compare(name, got, want):
    import torch
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: shape/dtype {tuple(got.shape)} {got.dtype} vs {tuple(want.shape)} {want.dtype}"
    if not torch.equal(got, want):
        diff = (got.double() - want.double()).abs()
        diff = torch.where(torch.isnan(diff), torch.zeros_like(diff), diff)
        return f"{name}: not bit-identical, max |diff| = {diff.max().item():.3g}"
    return None


def _check_equal(rank, world, q, k, v, mask, bs, balance, lens=None, lens_kv=None, return_lse=True, head_groups=1,
                 **kw):
    """ulysses_attention on this rank's shard == the shard of the single-process call, bit for bit."""
    import tessera
    import tessera.distributed as td
    ref = tessera.block_sparse_attention(q, k, v, mask, bs, return_lse=return_lse, **kw)
    ref_o, ref_lse = ref if return_lse else (ref, None)
    out = td.ulysses_attention(_shard(q, rank, world, lens), _shard(k, rank, world, lens_kv),
                               _shard(v, rank, world, lens_kv), mask, bs, None, balance=balance,
                               return_lse=return_lse, head_groups=head_groups, **kw)
    o, lse = out if return_lse else (out, None)
    a, e = _split(q.shape[1], world, lens)[rank]
    problems = [_compare("O", o, ref_o[:, a:e])]
    if return_lse:
        problems.append(_compare("LSE", lse, ref_lse[:, :, a:e]))
    problems = [p for p in problems if p]
    return ("mismatch", "; ".join(problems)) if problems else ("ok", f"shard {tuple(o.shape)}")


# ------------------------------------------------------------------------------------------ equality cases

@case
def dense_per_head_ragged(rank, world, balance):
    # H = 5 heads (not a multiple of 2 or 4), N = 203 (not a multiple of the world size or the block)
    q, k, v, dense, _ = _request(1, 1, 203, 203, 5, 5, 64, 64, 64, 5, [0.1, 0.9, 0.3, 0.6, 0.05])
    import torch
    return _check_equal(rank, world, q, k, v, torch.from_numpy(dense), 64, balance)


@case
def dense_per_head_ragged_two_head_groups(rank, world, balance):
    q, k, v, dense, _ = _request(1, 1, 203, 203, 5, 5, 64, 64, 64, 5, [0.1, 0.9, 0.3, 0.6, 0.05])
    return _check_equal(rank, world, q, k, v, dense, 64, balance, head_groups=2)


@case
def gqa_csr_head_groups_more_than_units(rank, world, balance):
    # 12 query heads on 4 kv heads, 3 head groups (some ranks have fewer units than groups), and 64 groups
    q, k, v, dense, _ = _request(16, 1, 150, 150, 12, 4, 64, 32, 32, 12, np.linspace(0.05, 0.95, 12))
    ro, ci = dense_to_csr(dense)
    r3 = _check_equal(rank, world, q, k, v, ("csr", ro, ci, dense.shape), 32, balance, head_groups=3)
    r64 = _check_equal(rank, world, q, k, v, ("csr", ro, ci, dense.shape), 32, balance, head_groups=64)
    return r3 if r3[0] != "ok" else r64


@case
def gqa_csr_per_head(rank, world, balance):
    # 6 query heads on 2 kv heads (G = 3): with 4 ranks each kv head is split into replicas
    q, k, v, dense, _ = _request(2, 1, 150, 150, 6, 2, 64, 32, 32, 6, [0.2, 0.8, 0.5, 0.1, 0.4, 0.7])
    ro, ci = dense_to_csr(dense)
    return _check_equal(rank, world, q, k, v, ("csr", ro, ci, dense.shape), 32, balance)


@case
def gqa_index_lists_batch2(rank, world, balance):
    # B = 2 with a per-batch, per-head mask (B_m = 2), 8 query heads on 2 kv heads, an empty head
    q, k, v, dense, rng = _request(3, 2, 130, 130, 8, 2, 64, 32, 32, 8, [0.3, 0.9, 0.1, 0.5, 0.0, 0.7, 0.2, 0.6],
                                   empty_heads=(4,))
    counts, indices = dense_to_index_lists(dense, rng)
    return _check_equal(rank, world, q, k, v, ("index_lists", counts, indices, dense.shape[-1]), 32, balance)


@case
def shared_mask_uneven_shards(rank, world, balance):
    # one mask for all heads (H_m = 1), explicit shard lengths with an empty shard
    q, k, v, dense, _ = _request(4, 1, 160, 160, 4, 4, 64, 32, 32, 0, 0.4)
    lens = [0, 160] if world == 2 else [10, 0, 100, 50]
    return _check_equal(rank, world, q, k, v, dense, 32, balance, lens=lens, lens_kv=lens)


@case
def cross_lengths_rectangular_blocks(rank, world, balance):
    # N_q != N_kv, B_Q != B_KV, float32 inputs, an explicit scale
    q, k, v, dense, _ = _request(5, 1, 100, 170, 3, 3, 64, 16, 48, 3, [0.5, 0.2, 0.8], dtype="float32")
    return _check_equal(rank, world, q, k, v, dense, (16, 48), balance, scale=0.3)


@case
def flashinfer_bsr_and_no_lse(rank, world, balance):
    import tessera
    q, k, v, dense, _ = _request(6, 1, 128, 128, 4, 4, 64, 32, 32, 4, [0.6, 0.1, 0.3, 0.9])
    ro, ci = dense_to_csr(dense)
    spec = tessera.from_flashinfer_bsr(ro, ci, 32, 32, num_heads=4)
    return _check_equal(rank, world, q, k, v, spec, None, balance, return_lse=False)


@case
def flex_block_mask_duck_typed(rank, world, balance):
    from types import SimpleNamespace

    import torch
    q, k, v, dense, rng = _request(7, 1, 96, 96, 4, 4, 64, 32, 32, 4, [0.5, 0.5, 0.2, 0.9])
    counts, indices = dense_to_index_lists(dense, rng)
    bm = SimpleNamespace(kv_num_blocks=torch.from_numpy(counts), kv_indices=torch.from_numpy(indices),
                         BLOCK_SIZE=(32, 32), mask_mod=None, seq_lengths=(96, 96))
    return _check_equal(rank, world, q, k, v, bm, None, balance)


@case
def strided_bhsd_inputs(rank, world, balance):
    # q, k, v given as transposed views of [B, H, N, D] tensors, in bfloat16 (2-byte transfers on gloo)
    import torch
    q, k, v, dense, _ = _request(8, 1, 90, 90, 4, 4, 64, 16, 16, 4, [0.3, 0.6, 0.9, 0.1], dtype="bfloat16")
    q, k, v = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v))
    return _check_equal(rank, world, q, k, v, torch.from_numpy(dense), 16, balance)


@case
def tabled_key_forced_plan(rank, world, balance):
    # D = 128 selects with the embedded plan table: each rank may select another plan for its heads, so force the
    # single-process call's plan for the bit-for-bit comparison
    import tessera
    q, k, v, dense, _ = _request(9, 1, 120, 120, 4, 4, 128, 32, 32, 4, [0.2, 0.9, 0.5, 0.7])
    tessera.block_sparse_attention(q, k, v, dense, 32)
    plan = tessera.last_dispatch()["plan_id"]
    return _check_equal(rank, world, q, k, v, dense, 32, balance, plan_id=plan)


@case
def tabled_key_selected_plans(rank, world, balance):
    # the same without plan_id: plans may differ per rank, results only by float64 summation order
    import torch

    import tessera
    import tessera.distributed as td
    q, k, v, dense, _ = _request(9, 1, 120, 120, 4, 4, 128, 32, 32, 4, [0.2, 0.9, 0.5, 0.7])
    ref = tessera.block_sparse_attention(q, k, v, dense, 32)
    o = td.ulysses_attention(_shard(q, rank, world), _shard(k, rank, world), _shard(v, rank, world), dense, 32,
                             balance=balance)
    a, e = _split(120, world)[rank]
    err = (o - ref[:, a:e]).abs().max().item()
    return ("ok", f"max |diff| {err:.3g}") if err <= 1e-12 and o.dtype == torch.float64 else ("mismatch", str(err))


# --------------------------------------------------------------------------------------------- error cases

def _error_info(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test inspects it
        return ("raised", {"type": type(e).__name__, "argument": getattr(e, "argument", None), "message": str(e)})
    return ("no error", "")


@case
def error_one_rank_bad_dtype(rank, world, balance):
    import torch

    import tessera.distributed as td
    q, k, v, dense, _ = _request(10, 1, 64, 64, 2, 2, 64, 32, 32, 2, 0.5)
    qs = _shard(q, rank, world)
    if rank == 1:
        qs = qs.to(torch.int32)  # invalid on this rank only
    return _error_info(lambda: td.ulysses_attention(qs, _shard(k, rank, world), _shard(v, rank, world), dense, 32,
                                                    balance=balance))


@case
def error_masks_differ_between_ranks(rank, world, balance):
    import tessera.distributed as td
    q, k, v, dense, _ = _request(11, 1, 64, 64, 2, 2, 64, 32, 32, 2, 0.5)
    if rank == world - 1:
        dense = dense.copy()
        dense[0, 1, 0, 0] = not dense[0, 1, 0, 0]
    return _error_info(lambda: td.ulysses_attention(_shard(q, rank, world), _shard(k, rank, world),
                                                    _shard(v, rank, world), dense, 32, balance=balance))


@case
def error_heads_differ_between_ranks(rank, world, balance):
    import tessera.distributed as td
    q, k, v, dense, _ = _request(12, 1, 64, 64, 4, 4, 64, 32, 32, 0, 0.5)
    qs, ks, vs = (_shard(x, rank, world) for x in (q, k, v))
    if rank == 0:
        qs, ks, vs = qs[:, :, :2], ks[:, :, :2], vs[:, :, :2]
    return _error_info(lambda: td.ulysses_attention(qs, ks, vs, dense, 32, balance=balance))


@case
def error_mask_for_a_shard(rank, world, balance):
    # a mask of the local shard's length instead of the full sequence
    import tessera.distributed as td
    q, k, v, _, rng = _request(13, 1, 128, 128, 2, 2, 64, 32, 32, 0, 0.5)
    qs = _shard(q, rank, world)
    nb = -(-qs.shape[1] // 32)
    dense = rng.random((1, 2, nb, nb)) < 0.5
    return _error_info(lambda: td.ulysses_attention(qs, _shard(k, rank, world), _shard(v, rank, world), dense, 32,
                                                    balance=balance))


def _bad_last_column(rank, world, balance, heads, **kw):
    """A column out of range in the last head's rows: only the rank computing that head sees it in its local call."""
    import tessera.distributed as td
    q, k, v, dense, _ = _request(14, 1, 128, 128, heads, heads, 64, 32, 32, heads, 0.5)
    ro, ci = dense_to_csr(dense)
    ci = ci.copy()
    ci[-1] = 99
    return _error_info(lambda: td.ulysses_attention(_shard(q, rank, world), _shard(k, rank, world),
                                                    _shard(v, rank, world), ("csr", ro, ci, dense.shape), 32,
                                                    balance=balance, **kw))


@case
def error_mask_content_in_local_call(rank, world, balance):
    return _bad_last_column(rank, world, balance, 4)


@case
def error_mask_content_second_head_group(rank, world, balance):
    # with 2 head groups the error comes from a later group's call, after other transfers were issued
    return _bad_last_column(rank, world, balance, 8, return_lse=True, head_groups=2)


@case
def error_bad_balance_everywhere(rank, world, balance):
    import tessera.distributed as td
    q, k, v, dense, _ = _request(15, 1, 64, 64, 2, 2, 64, 32, 32, 2, 0.5)
    return _error_info(lambda: td.ulysses_attention(_shard(q, rank, world), _shard(k, rank, world),
                                                    _shard(v, rank, world), dense, 32, balance="heads"))


# ------------------------------------------------------------------------------------------------ running

def _worker(rank, world, port, out_dir, names):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    results = {}
    for name in names:
        for balance in ("tiles", "even"):
            start = time.perf_counter()
            try:
                status, detail = CASES[name](rank, world, balance)
            except Exception:  # noqa: BLE001 - reported to the test
                status, detail = "exception", traceback.format_exc()[-2000:]
            results[f"{name}[{balance}]"] = {"status": status, "detail": detail,
                                             "seconds": round(time.perf_counter() - start, 3)}
            dist.barrier()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()
    # Skip the interpreter's finalization: gloo's worker threads can still hold work objects with tensors then, and
    # releasing them during finalization aborts the process now and then ("terminate called without an active
    # exception", SIGABRT; seen about once in ten runs of this file). Everything of value is written and flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(world, out_dir, names=None, timeout=240):
    """Runs the cases in `world` gloo processes. Returns {case[balance]: [result of rank 0, rank 1, ...]}."""
    import torch.multiprocessing as mp
    names = list(CASES) if names is None else names
    ctx = mp.start_processes(_worker, args=(world, _free_port(), out_dir, names), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + timeout

    def finished():
        return [r for r in range(world) if os.path.exists(os.path.join(out_dir, f"rank{r}.json"))]
    try:
        while not ctx.join(timeout=max(1.0, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.terminate()
                raise TimeoutError(f"the {world} gloo processes did not finish within {timeout} s (ranks that wrote "
                                   f"their results: {finished()})")
    except mp.ProcessExitedException as e:
        raise RuntimeError(f"{e} (ranks that wrote their results before it: {finished()})") from e
    per_rank = []
    for r in range(world):
        with open(os.path.join(out_dir, f"rank{r}.json")) as f:
            per_rank.append(json.load(f))
    return {key: [per_rank[r][key] for r in range(world)] for key in per_rank[0]}


if __name__ == "__main__":  # manual run: python dist_cases.py WORLD
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        res = run_world(int(sys.argv[1]) if len(sys.argv) > 1 else 2, tmp)
    for key, rows in res.items():
        print(key, [(r["status"], r["seconds"]) for r in rows])
        for r, row in enumerate(rows):
            if row["status"] not in ("ok", "raised"):
                print("  rank", r, row["detail"])
