"""Sequence-parallel block-sparse attention over torch.distributed (Ulysses).

:func:`ulysses_attention` follows DeepSpeed-Ulysses (Jacobs et al., "DeepSpeed Ulysses: System Optimizations for
Enabling Training of Extreme Long Sequence Transformer Models", 2023) as xDiT / xfuser uses it for video DiTs: every
rank of the group holds a contiguous shard of the sequence of every head, ``[B, N_r, H, D]`` (rank 0 the first
tokens); an all-to-all gives every rank the full sequence of some of the heads; each rank runs
:func:`tessera.block_sparse_attention` on its heads with their rows of the (full-sequence) block mask; an all-to-all
brings the outputs back to the sequence shards. Masks make heads unequal, so by default the heads are assigned to
ranks by their active-block counts (longest-first greedy), and the outputs are permuted back exactly.

Communication (NCCL for CUDA tensors, gloo for CPU tensors), per call: one all-gather of a small int64 vector
(shapes, options, a fingerprint of the mask's per-head counts, and an error flag, so that an error on one rank is
raised on every rank instead of leaving the others waiting in a collective), one all-to-all each for q, k and v and
one for O (and LSE) per head group (``head_groups``: the transfers of later groups overlap the attention of earlier
ones), and one all-gather of a status flag after the local attention calls (same reason). The only device-to-host
copies are those two small vectors (the per-head active-block counts travel with the first).

torch is required (this module imports it); ``import tessera`` alone does not.
"""
from __future__ import annotations

import struct
import zlib
from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist

from . import _arrays, api
from .converters import KIND_CODES, MaskSpec, to_mask_spec
from .errors import TesseraError, TesseraRuntimeError, TesseraUnsupportedError

__all__ = ["ulysses_attention", "assign_heads", "HeadAssignment", "head_active_blocks"]

BALANCE_MODES = ("tiles", "even")


class HeadAssignment(NamedTuple):
    """Which heads each rank of the group computes.

    Attributes:
      q_heads: per rank, the query heads it computes, in the order its local call sees them (ascending).
      kv_heads: per rank, the kv head of each of its local kv heads (GQA: query heads ``q_heads[r][i]`` use local kv
        head ``i // (len(q_heads[r]) // len(kv_heads[r]))``). A kv head appears on several ranks, and possibly
        twice on one, only when there are fewer kv heads than ranks (it is then split into replicas, see
        :func:`assign_heads`).
      loads: per rank, the sum of its query heads' active blocks (the balanced quantity).
    """

    q_heads: Tuple[Tuple[int, ...], ...]
    kv_heads: Tuple[Tuple[int, ...], ...]
    loads: Tuple[int, ...]


def _units(h_q: int, h_kv: int, world: int):
    """The units of assignment: (kv head, query heads) pairs. A kv head and its G = H_q / H_kv query heads form one
    unit; with fewer kv heads than ranks, each kv head is split into s replicas of G / s query heads (s the smallest
    divisor of G with H_kv * s >= world, else G), so that every rank can get work."""
    g = h_q // h_kv
    s = 1
    if h_kv < world:
        s = next((d for d in range(1, g + 1) if g % d == 0 and h_kv * d >= world), g)
    per = g // s
    return [(u // s, tuple(range((u // s) * g + (u % s) * per, (u // s) * g + (u % s + 1) * per)))
            for u in range(h_kv * s)]


def assign_heads(active_blocks: Sequence[int], num_kv_heads: int, world_size: int,
                 balance: str = "tiles") -> HeadAssignment:
    """Assigns heads to ranks (the rule :func:`ulysses_attention` uses; deterministic, the same on every rank).

    Args:
      active_blocks: per query head (length H_q), its active logical blocks over the batch (the cost of the head);
        for a mask shared by all heads pass the same value H_q times.
      num_kv_heads: H_kv (H_q % H_kv == 0); query heads h and h' share a kv head when h // G == h' // G, G = H_q / H_kv.
      world_size: number of ranks (>= 1).
      balance: "tiles": longest-first greedy (LPT): units (a kv head with its query heads) in decreasing order of
        cost, ties by index, each to the rank with the least load so far (ties: fewer units, then the lower rank);
        "even": contiguous split of the units, the first ``units % world_size`` ranks taking one more
        (``numpy.array_split``'s rule; DeepSpeed-Ulysses' and xDiT's contiguous head split).

    Returns a :class:`HeadAssignment`. Raises TesseraError naming "active_blocks", "num_kv_heads", "world_size" or
    "balance".
    """
    if balance not in BALANCE_MODES:
        raise TesseraError("balance", f"expected 'tiles' or 'even', got {balance!r}"[:200])
    if not _arrays.is_int(world_size) or int(world_size) < 1:
        raise TesseraError("world_size", f"expected a positive integer, got {world_size!r}"[:200])
    costs = [int(c) for c in active_blocks]
    if not costs or any(c < 0 for c in costs):
        raise TesseraError("active_blocks", "expected one non-negative count per query head")
    h_q = len(costs)
    if not _arrays.is_int(num_kv_heads) or int(num_kv_heads) < 1 or h_q % int(num_kv_heads):
        raise TesseraError("num_kv_heads", f"H_q = {h_q} is not a multiple of num_kv_heads = {num_kv_heads!r}"[:200])
    world = int(world_size)
    units = _units(h_q, int(num_kv_heads), world)
    unit_cost = [sum(costs[h] for h in qs) for _, qs in units]
    owner = [0] * len(units)
    if balance == "even":
        base, extra = divmod(len(units), world)
        u = 0
        for r in range(world):
            for _ in range(base + (r < extra)):
                owner[u] = r
                u += 1
    else:
        load = [0] * world
        count = [0] * world
        for u in sorted(range(len(units)), key=lambda i: (-unit_cost[i], i)):
            r = min(range(world), key=lambda i: (load[i], count[i], i))
            owner[u] = r
            load[r] += unit_cost[u]
            count[r] += 1
    q_heads, kv_heads, loads = [], [], []
    for r in range(world):
        mine = [u for u in range(len(units)) if owner[u] == r]
        q_heads.append(tuple(h for u in mine for h in units[u][1]))
        kv_heads.append(tuple(units[u][0] for u in mine))
        loads.append(sum(unit_cost[u] for u in mine))
    return HeadAssignment(tuple(q_heads), tuple(kv_heads), tuple(loads))


# --------------------------------------------------------------------------------------------------- masks

def _as_torch(x):
    """A mask array as a torch tensor (numpy arrays of the CPU path are wrapped, not copied)."""
    if _arrays.is_numpy(x):
        return torch.from_numpy(np.ascontiguousarray(x))
    return x


def _mask_device_stats(spec: MaskSpec):
    """Device-side summary of the mask: [per-head active blocks (H_m values, summed over B_m), structural checks].
    Structural checks (3 values): CSR: row_offsets[0], row_offsets[-1] - nnz, min row length; index lists: min count,
    K_max - max count, 0; dense: 0, 0, 0. Valid masks give (0, 0, >= 0)."""
    mb, mh, nqb, _ = spec.extents
    m0 = _as_torch(spec.m0)
    if spec.kind == "dense":
        per_head = (m0 != 0).sum(dim=(0, 2, 3), dtype=torch.int64)
        checks = torch.zeros(3, dtype=torch.int64, device=m0.device)
    elif spec.kind == "csr":
        ci = _as_torch(spec.m1)
        ro = m0.to(torch.int64)
        rows = ro[1:] - ro[:-1]
        per_head = rows.view(mb, mh, nqb).sum(dim=(0, 2))
        checks = torch.stack([ro[0], ro[-1] - ci.shape[0],
                              rows.min() if rows.numel() else torch.zeros((), dtype=torch.int64, device=ro.device)])
    else:
        idx = _as_torch(spec.m1)
        c = m0.to(torch.int64)
        per_head = c.sum(dim=(0, 2))
        if c.numel():
            checks = torch.stack([c.min(), idx.shape[-1] - c.max(), torch.zeros((), dtype=torch.int64,
                                                                                 device=c.device)])
        else:
            checks = torch.zeros(3, dtype=torch.int64, device=c.device)
    return per_head.to(torch.int64), checks


def head_active_blocks(block_mask, num_heads: int) -> List[int]:
    """Active logical blocks per query head (summed over the mask's batch) of any mask input
    :func:`tessera.block_sparse_attention` accepts, as :func:`assign_heads` takes them. A mask shared by all heads
    (H_m = 1) gives its count for each of the ``num_heads`` heads. Reads H_m integers from the mask's device."""
    spec = to_mask_spec(block_mask)
    if spec.extents[1] not in (1, num_heads):
        raise TesseraError("block_mask", f"H_m = {spec.extents[1]} is neither 1 nor num_heads = {num_heads}")
    per_head, _ = _mask_device_stats(spec)
    counts = per_head.cpu().tolist()
    return counts * num_heads if len(counts) == 1 and num_heads != 1 else counts


def _slice_mask(spec: MaskSpec, heads: Sequence[int], head_counts: Sequence[int]) -> MaskSpec:
    """The mask rows of the query heads `heads` (in that order), same format; a mask shared by all heads is kept.
    head_counts: the per-head active blocks (host ints, from the first exchange) = each head's CSR entries."""
    mb, mh, nqb, nkvb = spec.extents
    if mh == 1:
        return spec
    m0 = _as_torch(spec.m0)
    idx = torch.tensor(list(heads), dtype=torch.int64, device=m0.device)
    ext = (mb, len(heads), nqb, nkvb)
    if spec.kind == "dense":
        return MaskSpec("dense", m0.index_select(1, idx), None, ext, spec.block_size, spec.seq_lengths)
    if spec.kind == "index_lists":
        m1 = _as_torch(spec.m1)
        return MaskSpec("index_lists", m0.index_select(1, idx).contiguous(), m1.index_select(1, idx).contiguous(), ext,
                        spec.block_size, spec.seq_lengths)
    # block-CSR: rows (b, h, qb) of the selected heads, in the new head order.
    ci = _as_torch(spec.m1)
    ro = m0.to(torch.int64)
    lens = (ro[1:] - ro[:-1]).view(mb, mh, nqb).index_select(1, idx)           # [B_m, h, n_qb]
    starts = ro[:-1].view(mb, mh, nqb).index_select(1, idx)
    new_ro = torch.zeros(lens.numel() + 1, dtype=torch.int64, device=ro.device)
    torch.cumsum(lens.reshape(-1), 0, out=new_ro[1:])
    nnz = sum(int(head_counts[h]) for h in heads)
    # entry e of new row i comes from old entry starts[i] + (e - new_ro[i])
    shift = torch.repeat_interleave((starts.reshape(-1) - new_ro[:-1]), lens.reshape(-1), output_size=nnz)
    src = shift + torch.arange(nnz, dtype=torch.int64, device=ro.device)
    cols = ci.index_select(0, src) if nnz else ci[:0]
    return MaskSpec("csr", new_ro.to(torch.int32), cols.to(torch.int32).contiguous(), ext, spec.block_size,
                    spec.seq_lengths)


# ------------------------------------------------------------------------------------------- the exchanges

_DTYPE_CODES = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3, torch.float64: 4}
_ARG_SLOTS = 8  # int64 slots of the error's argument name (64 bytes, UTF-8, truncated)
_HEADER = 2 + _ARG_SLOTS  # [error code (0 none, 1 TesseraError, 2 unsupported, 3 other), 0], argument name


def _error_fields(err: Optional[BaseException]) -> List[int]:
    if err is None:
        return [0] * _HEADER
    code = 2 if isinstance(err, TesseraUnsupportedError) else 1 if isinstance(err, TesseraError) else 3
    name = (getattr(err, "argument", "") or "").encode()[: 8 * _ARG_SLOTS].ljust(8 * _ARG_SLOTS, b"\0")
    return [code, 0] + list(struct.unpack(f"<{_ARG_SLOTS}q", name))


def _raise_if_any(rows: List[List[int]], err: Optional[BaseException], stage: str):
    """After an exchange: re-raises this rank's own error, or raises one naming the argument another rank failed on."""
    if err is not None:
        raise err
    for r, row in enumerate(rows):
        if row[0]:
            arg = struct.pack(f"<{_ARG_SLOTS}q", *row[2:_HEADER]).rstrip(b"\0").decode(errors="replace")
            msg = (f"rank {r} of the group raised an error {stage} (see that rank's message); nothing is returned "
                   "on any rank")
            if row[0] == 1:
                raise TesseraError(arg, msg)
            if row[0] == 2:
                raise TesseraUnsupportedError(arg, msg)
            raise TesseraRuntimeError(arg, msg)


def _all_gather_rows(group, device, host: List[int], dev: Optional[torch.Tensor] = None, extra=None):
    """All-gathers one int64 vector per rank (host ints, then a device tensor) and copies the result (and `extra`,
    a local device tensor) to the host in one transfer. Returns (rows, extra as a list)."""
    world = dist.get_world_size(group)
    local = torch.tensor(host, dtype=torch.int64, device=device)
    if dev is not None:
        local = torch.cat([local, dev.to(device=device, dtype=torch.int64)])
    out = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(out, local, group=group)
    flat = torch.cat(out + ([extra.to(device=device, dtype=torch.int64)] if extra is not None else [])).cpu().tolist()
    n = local.numel()
    return [flat[r * n:(r + 1) * n] for r in range(world)], flat[world * n:]


# ---------------------------------------------------------------------------------------- argument checks

def _group_info(group):
    """(group, rank, world, backends) or raises (before any communication: without a usable group there is none)."""
    if not dist.is_available():
        raise TesseraUnsupportedError("group", "torch.distributed is not available in this torch build")
    if not dist.is_initialized():
        raise TesseraError("group", "torch.distributed is not initialized: call torch.distributed.init_process_group "
                                    "first (NCCL for CUDA tensors, gloo for CPU tensors)")
    if group is None:
        group = dist.group.WORLD
    elif not isinstance(group, dist.ProcessGroup):
        raise TesseraError("group", f"expected a torch.distributed ProcessGroup or None (the default group), got "
                                    f"{type(group).__name__}")
    rank = dist.get_rank(group)
    if rank < 0:
        raise TesseraError("group", "this process is not a member of the group")
    backend = str(dist.get_backend(group)).lower()
    # "gloo", "nccl", or a per-device list such as "cpu:gloo,cuda:nccl"
    backends = {}
    for part in backend.split(","):
        dev, _, name = part.rpartition(":")
        if dev:
            backends[dev] = name
        else:
            backends = {"cpu": name, "cuda": name}
    if backends.get("cpu") != "gloo" and backends.get("cuda") != "nccl":
        raise TesseraUnsupportedError("group", f"backend {backend!r}: ulysses_attention runs on NCCL (CUDA tensors) "
                                               "or gloo (CPU tensors)")
    return group, rank, dist.get_world_size(group), backends


def _exchange_device(q, backends):
    """The device of this rank's collectives: q's when the group has the backend for it (gloo for CPU tensors, NCCL
    for CUDA tensors: then the current CUDA device), else one the group's backend serves (the checks then raise)."""
    kind = q.device.type if isinstance(q, torch.Tensor) else None
    if kind not in ("cpu", "cuda") or backends.get(kind) != ("gloo" if kind == "cpu" else "nccl"):
        kind = "cpu" if backends.get("cpu") == "gloo" else "cuda"
    if kind == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _check_local(q, k, v, block_mask, block_size, scale, balance, return_lse, plan_id, head_groups, backends):
    """Every check that needs no communication. Returns (spec, bq, bkv, scale). Raises TesseraError naming the
    argument."""
    api._check_options(return_lse, 0, plan_id)
    if balance not in BALANCE_MODES:
        raise TesseraError("balance", f"expected 'tiles' or 'even', got {balance!r}"[:200])
    if type(head_groups) is not int or not 1 <= head_groups <= 1024:
        raise TesseraError("head_groups", f"expected an int in [1, 1024], got {head_groups!r}"[:200])
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TesseraError(name, f"expected a torch tensor (torch.distributed moves it), got {type(x).__name__}")
    api._check_qkv(q, k, v, "bshd")
    for name, x in (("q", q), ("k", k), ("v", v)):
        api._check_torch_storage(x, name)
    dev = q.device.type
    if dev == "cuda" and q.dtype not in (torch.bfloat16, torch.float16):
        raise TesseraError("q", f"dtype {_arrays.dtype_name(q)} is not supported on CUDA: expected bfloat16 or "
                                "float16")
    api._check_cpu_dtypes(q, q, q, True)  # q's dtype first, so that a bad q is named as such
    for name, x in (("k", k), ("v", v)):
        if x.device != q.device:
            raise TesseraError(name, f"on {x.device}, q on {q.device}: q, k and v must be on one device")
        if x.dtype != q.dtype:
            raise TesseraError(name, f"dtype {_arrays.dtype_name(x)} differs from q's {_arrays.dtype_name(q)}")
    want = "gloo" if dev == "cpu" else "nccl"
    if backends.get(dev) != want:
        raise TesseraUnsupportedError("group", f"{dev.upper()} tensors need a '{want}' process group, this group's "
                                               f"backend is {backends.get(dev, 'none')!r} for {dev}")
    if dev == "cuda":
        if q.get_device() != torch.cuda.current_device():
            raise TesseraError("q", f"on cuda:{q.get_device()} but this rank's current CUDA device is "
                                    f"cuda:{torch.cuda.current_device()} (call torch.cuda.set_device(local_rank))")
    if (q.requires_grad or k.requires_grad or v.requires_grad) and torch.is_grad_enabled():
        raise TesseraUnsupportedError("q", "backward is not supported (forward only): call under torch.no_grad() / "
                                           "torch.inference_mode(), or detach q, k and v")
    b, _, h_q, d = q.shape
    for name, x in (("k", k), ("v", v)):
        if x.shape[0] != b or x.shape[3] != d:
            raise TesseraError(name, f"shape {tuple(x.shape)}: expected [B, N_kv_r, H_kv, D] with q's B = {b} and "
                                     f"D = {d}")
    if tuple(v.shape) != tuple(k.shape):
        raise TesseraError("v", f"shape {tuple(v.shape)} differs from k's {tuple(k.shape)}")
    h_kv = k.shape[2]
    if h_kv < 1 or h_q < 1 or h_q % h_kv:
        raise TesseraError("k", f"H_q = {h_q} is not a multiple of H_kv = {h_kv} (GQA/MQA need H_q % H_kv == 0)")
    spec = to_mask_spec(block_mask)
    bq, bkv = api._block_sizes(block_size, spec)
    for x in (bq, bkv):
        if x < 16 or x > 1024 or x % 16:
            raise TesseraError("block_size", f"({bq}, {bkv}): B_Q and B_KV must be multiples of 16 in [16, 1024]")
    api._check_mask_arrays(spec)
    for x in (spec.m0, spec.m1):
        if x is None:
            continue
        on = x.device.type if isinstance(x, torch.Tensor) else "cpu"
        if on != dev or (dev == "cuda" and x.get_device() != q.get_device()):
            raise TesseraError("block_mask", f"the mask arrays must be on q's device ({q.device}), got "
                                             f"{x.device if isinstance(x, torch.Tensor) else 'a numpy array'}")
    mb, mh, nqb, _ = spec.extents
    if mb not in (1, b):
        raise TesseraError("block_mask", f"batch extent B_m = {mb} is neither 1 nor B = {b}")
    if mh not in (1, h_q):
        raise TesseraError("block_mask", f"head extent H_m = {mh} is neither 1 nor H_q = {h_q}")
    if spec.kind == "csr":
        ro, ci = spec.m0, spec.m1
        if ro.ndim != 1 or ro.shape[0] != mb * mh * nqb + 1:
            raise TesseraError("mask.row_offsets", f"expected shape [{mb * mh * nqb + 1}] (B_m * H_m * n_qb + 1), got "
                                                   f"{tuple(ro.shape)}")
        if ci.ndim != 1:
            raise TesseraError("mask.col_indices", f"expected a 1-D array, got shape {tuple(ci.shape)}")
    if spec.kind == "index_lists" and tuple(spec.m1.shape[:3]) != tuple(spec.m0.shape):
        raise TesseraError("block_mask.indices", f"shape {tuple(spec.m1.shape)} does not extend counts' "
                                                 f"{tuple(spec.m0.shape)}")
    if scale is not None:
        scale = api._check_scale(api._scale_value(scale))
    return spec, bq, bkv, scale


def _fingerprint(per_head: torch.Tensor) -> torch.Tensor:
    """Three int64 values that differ when two ranks' per-head counts differ (sum, index-weighted sum, sum of
    squares): a consistency check of the replicated mask, not a comparison of its contents."""
    w = torch.arange(1, per_head.numel() + 1, dtype=torch.int64, device=per_head.device)
    return torch.stack([per_head.sum(), (per_head * w).sum(), (per_head * per_head).sum()])


# --------------------------------------------------------------------------------------------- all-to-alls

def _post_to_heads(x: torch.Tensor, heads_per_rank, lens, rank, group):
    """Forward all-to-all of one tensor, issued asynchronously. x: this rank's shard [B, n_me, H, D];
    heads_per_rank[r]: the heads rank r computes (in this head group). Returns (work, view): after work.wait(), view
    is the full sequence of this rank's heads [B, N, h_me, D], a view of the received buffer [N, h_me, B, D] (every
    source's tokens are consecutive there, so no copy is needed)."""
    b, n_me, _, d = x.shape
    dev = x.device
    t = torch.arange(n_me, dtype=torch.int64, device=dev)
    bb = torch.arange(b, dtype=torch.int64, device=dev)
    bi, ti, hi = [], [], []
    for heads in heads_per_rank:  # send order (destination, token, head, batch)
        hs = torch.tensor(heads, dtype=torch.int64, device=dev)
        shape = (n_me, len(heads), b)
        ti.append(t.view(-1, 1, 1).expand(shape).reshape(-1))
        hi.append(hs.view(1, -1, 1).expand(shape).reshape(-1))
        bi.append(bb.view(1, 1, -1).expand(shape).reshape(-1))
    send = x[torch.cat(bi), torch.cat(ti), torch.cat(hi)]  # one gather, any strides: [sum_r n_me*h_r*B, D]
    h_me = len(heads_per_rank[rank])
    recv = torch.empty((sum(lens), h_me, b, d), dtype=x.dtype, device=dev)
    work = dist.all_to_all_single(recv.view(-1), send.view(-1), output_split_sizes=[ln * h_me * b * d for ln in lens],
                                  input_split_sizes=[n_me * len(hs) * b * d for hs in heads_per_rank], group=group,
                                  async_op=True)
    return (work, send), recv.permute(2, 0, 1, 3)


def _post_back(y: torch.Tensor, recv: torch.Tensor, inner: int, heads_per_rank, lens, rank, group):
    """Backward all-to-all, issued asynchronously. y: this rank's result laid out [N, h_me, B, inner] (token-major, so
    every destination's tokens are consecutive); recv: the flat slice receiving the source-major chunks
    [n_me, h_r, B, inner] of every source r. Returns what must stay alive until the work is waited on."""
    h_me = len(heads_per_rank[rank])
    b = y.shape[2]
    n_me = lens[rank]
    send = y.reshape(-1)
    work = dist.all_to_all_single(recv, send, output_split_sizes=[n_me * len(h) * b * inner for h in heads_per_rank],
                                  input_split_sizes=[ln * h_me * b * inner for ln in lens], group=group, async_op=True)
    return work, send


def _gather_positions(chunks, h_total, n_me, b, dev) -> torch.Tensor:
    """[B, n_me, H] row positions, in the buffer the backward all-to-alls fill, of each (batch, token, original head).
    chunks: (heads, first row) of every received chunk [n_me, len(heads), B] (per head group, per source)."""
    pos = torch.empty((b, n_me, h_total), dtype=torch.int64, device=dev)
    t = torch.arange(n_me, dtype=torch.int64, device=dev).view(1, -1, 1)
    bb = torch.arange(b, dtype=torch.int64, device=dev).view(-1, 1, 1)
    for heads, off in chunks:
        h_r = len(heads)
        if h_r:
            j = torch.arange(h_r, dtype=torch.int64, device=dev).view(1, 1, -1)
            idx = torch.tensor(heads, dtype=torch.int64, device=dev)
            pos.index_copy_(2, idx, (off + (t * h_r + j) * b + bb).expand(b, n_me, h_r))
    return pos


def _head_groups(assignment: HeadAssignment, h_q: int, world: int, groups: int):
    """Splits every rank's units into `groups` contiguous head groups (sizes differing by at most one unit). Returns
    [(q_heads per rank, kv_heads per rank)] for each group that has heads on some rank."""
    per = h_q // sum(len(kv) for kv in assignment.kv_heads)  # query heads per unit (the same for every unit)
    out = []
    for gi in range(groups):
        qs, kvs = [], []
        for r in range(world):
            kv_r = assignment.kv_heads[r]
            units = [u for u in range(len(kv_r)) if u * groups // len(kv_r) == gi]
            qs.append(tuple(h for u in units for h in assignment.q_heads[r][u * per:(u + 1) * per]))
            kvs.append(tuple(kv_r[u] for u in units))
        if any(qs):
            out.append((tuple(qs), tuple(kvs)))
    return out


# -------------------------------------------------------------------------------------------------- the call

def ulysses_attention(q, k, v, block_mask, block_size=None, group=None, *, balance: str = "tiles",
                      return_lse: bool = False, scale: Optional[float] = None, plan_id: Optional[str] = None,
                      head_groups: int = 1):
    """Block-sparse attention E(M) of a sequence-sharded request over a torch.distributed group (Ulysses).

    Every rank of ``group`` calls it with its own sequence shard and the same full-sequence mask and options.

    Args:
      q: this rank's shard ``[B, N_r, H_q, D]`` (layout "bshd", the DeepSpeed-Ulysses / xDiT order) of the full query
        sequence: rank r holds tokens ``[N_0 + ... + N_{r-1}, ... + N_r)``. The N_r may differ (ragged N, e.g.
        ``torch.tensor_split(x, world, dim=1)``) and may be 0. CUDA tensors (bf16/fp16, a NCCL group, on the rank's
        current CUDA device) or CPU tensors (f16/bf16/f32/f64, a gloo group). Any positive strides on the first three
        dims, head dim contiguous (a ``[B, H, N_r, D]`` tensor passes as ``x.transpose(1, 2)``).
      k, v: the shards ``[B, N_kv_r, H_kv, D]`` of the full key/value sequences (N_kv_r may differ from N_r);
        H_q % H_kv == 0 (GQA/MQA).
      block_mask: the logical block mask of the *full* sequences, any format :func:`tessera.block_sparse_attention`
        takes (dense, block-CSR, index lists, FlexAttention BlockMask, FlashInfer BSR), the same on every rank, on
        q's device: ``[B_m, H_m, ceil(N_q / B_Q), ceil(N_kv / B_KV)]`` with N_q = sum of the N_r. Per-head masks
        (H_m = H_q) are sliced per rank; a shared mask (H_m = 1) is passed whole.
      block_size: B or (B_Q, B_KV) in tokens, multiples of 16 in [16, 1024] (may be None when the mask carries it).
      group: the torch.distributed ProcessGroup (None = the default group).
      balance: "tiles" (default): heads assigned to ranks by their active blocks, longest-first greedy
        (:func:`assign_heads`), so that the ranks' attention work is as equal as possible; "even": the contiguous
        split of DeepSpeed-Ulysses / xDiT (H_q not divisible by the world size: the first ranks take one more).
      return_lse: exactly True or False: also return this shard's LSE ``[B, H_q, N_r]`` float32 (natural log).
      scale: softmax scale (default 1/sqrt(D)), as in :func:`tessera.block_sparse_attention`.
      plan_id: force this plan on every rank (for comparisons); None lets each rank select for its heads.
      head_groups: split every rank's heads into this many groups (an int >= 1; more groups than a rank has units
        leave some empty): the all-to-alls of every group are issued at once and group i's attention runs while
        the later groups' inputs arrive and the earlier groups' outputs leave (NCCL runs them on its own stream).
        1 (default): no overlap. Results are the same for any value (one local call per group: plans are selected
        per group).

    Returns this rank's shard of O, ``[B, N_r, H_q, D]`` (q's dtype and device, contiguous), or (O, LSE).
    Each head is computed by one rank with that head's full q, k, v and mask rows, so O equals a single-process
    :func:`tessera.block_sparse_attention` of the gathered tensors up to the summation order of the plan each rank
    selects (bit for bit where the plans are the same, e.g. with ``plan_id``; the CPU path is float64).

    Raises (on every rank of the group, before any tensor data is exchanged, after one small all-gather that carries
    each rank's verdict; nothing is returned on any rank): TesseraError naming the argument ("q", "k", "v",
    "block_mask", "mask.row_offsets", "block_size", "balance", "return_lse", "scale", "plan_id", "head_groups",
    "group"): a rank whose own arguments are invalid raises its own error, the others an error naming the same
    argument and that rank; arguments that disagree between ranks (B, H, D, dtype, block size, mask extents or
    per-head active blocks, options) raise on every rank. Errors of a local attention call (mask contents such as
    a column out of range, unsupported plans) are exchanged the same way after the last group (the outputs have
    moved by then, but nothing is returned). Errors about ``group`` itself (not initialized, not a member, a backend
    other than NCCL or gloo) are raised at once, without communication.
    """
    group, rank, world, backends = _group_info(group)
    device = _exchange_device(q, backends)
    err: Optional[BaseException] = None
    host = [0] * 19
    dev_fields = torch.zeros(6, dtype=torch.int64, device=device)
    per_head = torch.zeros(0, dtype=torch.int64, device=device)
    try:
        spec, bq, bkv, scale = _check_local(q, k, v, block_mask, block_size, scale, balance, return_lse, plan_id,
                                            head_groups, backends)
        b, n_me, h_q, d = q.shape
        mb, mh, nqb, nkvb = spec.extents
        scale_bits = struct.unpack("<q", struct.pack("<d", -1.0 if scale is None else scale))[0]
        host = [int(n_me), int(k.shape[1]), b, h_q, int(k.shape[2]), d, _DTYPE_CODES[q.dtype], bq, bkv,
                KIND_CODES[spec.kind], mb, mh, nqb, -1 if nkvb is None else int(nkvb),
                BALANCE_MODES.index(balance), int(return_lse), scale_bits, zlib.crc32((plan_id or "").encode()),
                int(head_groups)]
        per_head, checks = _mask_device_stats(spec)
        dev_fields = torch.cat([_fingerprint(per_head), checks])
    except Exception as e:  # exchanged so that every rank raises, none waits in a collective
        err = e
    rows, counts = _all_gather_rows(group, device, _error_fields(err) + host, dev_fields, per_head)
    _raise_if_any(rows, err, "while checking its arguments")
    spec, lens, lens_kv, n_q, n_kv = _check_agreement(rows, spec, bq, bkv)
    b, n_me, h_q, d = q.shape
    h_kv = k.shape[2]
    counts = counts * h_q if len(counts) == 1 else counts
    assignment = assign_heads(counts, h_kv, world, balance)
    groups = _head_groups(assignment, h_q, world, int(head_groups))
    # sequence shards -> full sequences of this rank's heads, every group's transfers issued now
    posted = [[_post_to_heads(x, hs, ln, rank, group) for x, hs, ln in ((q, qg, lens), (k, kvg, lens_kv),
                                                                        (v, kvg, lens_kv))] for qg, kvg in groups]
    rows_total = n_me * h_q * b
    recv_o = torch.empty(rows_total * d, dtype=q.dtype, device=q.device)
    recv_lse = torch.empty(rows_total, dtype=torch.float32, device=q.device) if return_lse else None
    chunks, keep, first = [], [], 0
    err = None
    for gi, (qg, _) in enumerate(groups):
        for (work, _), _ in posted[gi]:
            work.wait()
        q_me, k_me, v_me = (view for _, view in posted[gi])
        posted[gi] = None  # the send buffers (and, once the local call is done, the received ones) can go
        mine = qg[rank]
        o_me = lse_me = None
        if mine and err is None:
            try:
                local_spec = _slice_mask(spec, mine, counts)
                res = api.block_sparse_attention(q_me, k_me, v_me, local_spec, (bq, bkv), scale=scale, layout="bshd",
                                                 return_lse=return_lse, plan_id=plan_id)
                o_me, lse_me = res if return_lse else (res, None)
            except (TesseraError, TesseraRuntimeError) as e:
                # the local call sees the mask sliced to this rank's heads: its head and row numbers count within it
                err = type(e)(e.argument, f"{e.message} [in rank {rank}'s call on query heads {list(mine)} of {h_q}: "
                                          "head, row and entry numbers count within the mask sliced to these heads]",
                              e.code)
                err.__cause__ = e
            except Exception as e:  # noqa: BLE001 - exchanged below, re-raised on this rank
                err = e
        if o_me is None:  # no heads here, or an error: still take part in the transfers (nothing is returned)
            o_me = q_me.new_zeros((b, n_q, len(mine), d))
            lse_me = torch.zeros((b, len(mine), n_q), dtype=torch.float32, device=q.device) if return_lse else None
        # full sequences of this group's heads -> sequence shards
        size = n_me * sum(len(h) for h in qg) * b
        keep.append(_post_back(o_me.permute(1, 2, 0, 3), recv_o[first * d:(first + size) * d], d, qg, lens, rank,
                               group))
        if return_lse:
            keep.append(_post_back(lse_me.permute(2, 1, 0).unsqueeze(-1), recv_lse[first:first + size], 1, qg, lens,
                                   rank, group))
        for heads in qg:  # the received chunks of this group, source by source
            chunks.append((heads, first))
            first += n_me * len(heads) * b
        q_me = k_me = v_me = o_me = lse_me = None
    rows, _ = _all_gather_rows(group, device, _error_fields(err))
    for work, _ in keep:
        work.wait()
    _raise_if_any(rows, err, "in its local attention call")
    pos = _gather_positions(chunks, h_q, n_me, b, q.device)
    o = recv_o.view(-1, d).index_select(0, pos.view(-1)).view(b, n_me, h_q, d)
    if not return_lse:
        return o
    lse = recv_lse.index_select(0, pos.permute(0, 2, 1).reshape(-1)).view(b, h_q, n_me)
    return o, lse


# The exchanged fields every rank must agree on (after n_r and n_kv_r), and the argument each names.
_AGREE = ("B", "H_q", "H_kv", "D", "dtype", "B_Q", "B_KV", "mask format", "B_m", "H_m", "n_qb", "n_kvb", "balance",
          "return_lse", "scale", "plan_id (CRC-32)", "head_groups", "active blocks per head (sum)",
          "active blocks per head (weighted sum)", "active blocks per head (sum of squares)")
_AGREE_ARGS = ("q", "q", "k", "q", "q", "block_size", "block_size", "block_mask", "block_mask", "block_mask",
               "block_mask", "block_mask", "balance", "return_lse", "scale", "plan_id", "head_groups", "block_mask",
               "block_mask", "block_mask")


def _check_agreement(rows, spec: MaskSpec, bq: int, bkv: int):
    """Checks that every rank passed the same request (all ranks see the same rows, so all raise the same error) and
    the mask's extents against the gathered sequence lengths. Returns (spec, lens, lens_kv, N_q, N_kv)."""
    h = _HEADER
    fields = [row[h + 2:h + 22] for row in rows]  # all but n_r, n_kv_r (host fields, then the fingerprint)
    for i, name in enumerate(_AGREE):
        vals = [f[i] for f in fields]
        if any(x != vals[0] for x in vals):
            shown = ", ".join(f"rank {r}: {x}" for r, x in enumerate(vals))
            raise TesseraError(_AGREE_ARGS[i], f"{name} differs between the ranks of the group ({shown})"[:400] +
                               ": every rank passes its shard of one request with the same mask and options")
    checks = rows[0][h + 22:h + 25]
    if spec.kind == "csr" and (checks[0] != 0 or checks[1] != 0 or checks[2] < 0):
        raise TesseraError("mask.row_offsets", f"not a valid block-CSR: row_offsets[0] = {checks[0]} (must be 0), "
                                               f"row_offsets[-1] - len(col_indices) = {checks[1]} (must be 0), "
                                               f"smallest row length {checks[2]} (must be >= 0)")
    if spec.kind == "index_lists" and (checks[0] < 0 or checks[1] < 0):
        raise TesseraError("mask.counts", f"counts must lie in [0, K_max]: smallest {checks[0]}, K_max - largest "
                                          f"{checks[1]}")
    lens = [row[h] for row in rows]
    lens_kv = [row[h + 1] for row in rows]
    n_q, n_kv = sum(lens), sum(lens_kv)
    if n_q < 1 or n_kv < 1:
        raise TesseraError("q" if n_q < 1 else "k", f"the gathered sequence is empty (N_q = {n_q}, N_kv = {n_kv})")
    mb, mh, nqb, nkvb = spec.extents
    want_q, want_kv = -(-n_q // bq), -(-n_kv // bkv)
    if nqb != want_q or (nkvb is not None and nkvb != want_kv):
        raise TesseraError("block_mask", f"extents (n_qb, n_kvb) = ({nqb}, {nkvb}) but the gathered sequences "
                                         f"(N_q, N_kv) = ({n_q}, {n_kv}) with blocks ({bq}, {bkv}) need "
                                         f"({want_q}, {want_kv}): the mask covers the full sequences, not a shard")
    if spec.seq_lengths is not None and tuple(spec.seq_lengths) != (n_q, n_kv):
        raise TesseraError("block_mask", f"the mask was built for sequence lengths {tuple(spec.seq_lengths)} but the "
                                         f"gathered q/k have (N_q, N_kv) = ({n_q}, {n_kv})")
    if nkvb is None:
        spec = spec._replace(extents=(mb, mh, nqb, want_kv))
    return spec, lens, lens_kv, n_q, n_kv
