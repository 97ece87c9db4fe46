"""Block-mask inputs and converters (pure numpy / torch code; torch is only used for torch inputs).

Tessera takes the logical block mask M in one of three formats (DESIGN.md section 2). :class:`MaskSpec` is the
normalized form every input becomes:

- dense: bool/uint8 array ``[B_m, H_m, n_qb, n_kvb]`` (B_m in {1, B}, H_m in {1, H_q}; size 1 broadcasts);
- block-CSR: ``("csr", row_offsets, col_indices, (B_m, H_m, n_qb, n_kvb))``, int32 ``row_offsets
  [B_m*H_m*n_qb + 1]`` and ``col_indices [nnz]`` strictly increasing within each row; row
  ``(b_m*H_m + h_m)*n_qb + qb``;
- index lists: ``("index_lists", counts, indices, n_kvb)``, int32 ``counts [B_m, H_m, n_qb]`` and ``indices
  [B_m, H_m, n_qb, K_max]``; the first ``counts[...]`` entries of a row are its active kv blocks (any order, no
  duplicates), entries after them are ignored.

Converters: :func:`from_flex_block_mask` (FlexAttention ``BlockMask``), :func:`from_flashinfer_bsr` (FlashInfer
``BlockSparseAttentionWrapper.plan`` arguments), :func:`from_dense`.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from ._arrays import as_int32, is_array, is_cuda, is_int, is_numpy, torch_module
from .errors import TesseraError

__all__ = ["MaskSpec", "from_dense", "from_flashinfer_bsr", "from_flex_block_mask", "to_mask_spec"]

KIND_CODES = {"dense": 0, "csr": 1, "index_lists": 2}


class MaskSpec(NamedTuple):
    """A logical block mask in one of Tessera's three formats, ready for the native call.

    Attributes:
      kind: "dense", "csr" or "index_lists".
      m0: dense mask / row_offsets / counts (numpy array or torch tensor).
      m1: None / col_indices / indices.
      extents: (B_m, H_m, n_qb, n_kvb); n_kvb may be None (then ceil(N_kv / B_KV) of the request is used).
      block_size: (B_Q, B_KV) the mask was built for, or None (then the call's block_size is required).
      seq_lengths: (N_q, N_kv) the mask was built for, or None; checked against the request when given.
    """

    kind: str
    m0: Any
    m1: Any
    extents: Tuple[int, int, int, Optional[int]]
    block_size: Optional[Tuple[int, int]] = None
    seq_lengths: Optional[Tuple[int, int]] = None


def _pair(v, name: str) -> Tuple[int, int]:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise TesseraError(name, f"expected an int or a pair (B_Q, B_KV), got {v!r}")
        a, b = v
    else:
        a = b = v
    for x in (a, b):
        if not is_int(x):
            raise TesseraError(name, f"expected an int or a pair of ints (B_Q, B_KV), got {v!r}")
    return int(a), int(b)


def _block_pair(v, name: str) -> Tuple[int, int]:
    """_pair, each a block size (_check_block): what the mask converters take, checked when the mask is built."""
    a, b = _pair(v, name)
    return _check_block(a, name), _check_block(b, name)


def _check_block(b: int, name: str) -> int:
    """A block size in tokens: a multiple of 16 in [16, 1024] (DESIGN.md section 2), checked when the mask is built
    rather than at the call."""
    if not (16 <= b <= 1024 and b % 16 == 0):
        raise TesseraError(name, f"{b} is not a block size: multiples of 16 tokens in [16, 1024]")
    return b


def _positive_int(v, name: str) -> int:
    if type(v) is int and v > 0:
        return v
    if not is_int(v) or int(v) < 1:
        raise TesseraError(name, f"expected a positive integer, got {v!r}")
    return int(v)


def from_dense(dense, block_size=None) -> MaskSpec:
    """Dense block mask: bool or uint8 array [B_m, H_m, n_qb, n_kvb] (numpy or torch, any strides); non-zero =
    active. Raises TesseraError("block_mask") for another rank or dtype."""
    if not is_array(dense):
        raise TesseraError("block_mask", f"expected a numpy array or torch tensor, got {type(dense).__name__}")
    if dense.ndim != 4:
        raise TesseraError("block_mask", f"a dense block mask has rank 4 [B_m, H_m, n_qb, n_kvb], got shape "
                                         f"{tuple(dense.shape)}")
    t = torch_module()
    if t is not None and isinstance(dense, t.Tensor):
        ok = dense.dtype == t.bool or dense.dtype == t.uint8
    else:
        ok = dense.dtype == np.bool_ or dense.dtype == np.uint8
    if not ok:
        name = str(dense.dtype).replace("torch.", "")
        raise TesseraError("block_mask", f"a dense block mask is bool or uint8, got dtype {name}")
    return MaskSpec("dense", dense, None, tuple(dense.shape),
                    None if block_size is None else _block_pair(block_size, "block_size"))


def _csr_spec(row_offsets, col_indices, extents, block_size=None, arg="block_mask") -> MaskSpec:
    if not (isinstance(extents, (tuple, list)) and len(extents) == 4):
        raise TesseraError(f"{arg}.extents", f"expected (B_m, H_m, n_qb, n_kvb), got {extents!r}")
    for e in extents:
        _positive_int(e, f"{arg}.extents")
    ext = tuple(extents)
    ro = as_int32(row_offsets, f"{arg}.row_offsets")
    ci = as_int32(col_indices, f"{arg}.col_indices")
    return MaskSpec("csr", ro, ci, ext, block_size)


def _index_lists_spec(counts, indices, n_kvb, block_size=None, arg="block_mask") -> MaskSpec:
    c = as_int32(counts, f"{arg}.counts")
    i = as_int32(indices, f"{arg}.indices")
    if c.ndim != 3:
        raise TesseraError(f"{arg}.counts", f"expected rank 3 [B_m, H_m, n_qb], got shape {tuple(c.shape)}")
    if i.ndim != 4:
        raise TesseraError(f"{arg}.indices", f"expected rank 4 [B_m, H_m, n_qb, K_max], got shape {tuple(i.shape)}")
    b, h, nq = c.shape
    nk = None if n_kvb is None else _positive_int(n_kvb, f"{arg}.n_kvb")
    return MaskSpec("index_lists", c, i, (b, h, nq, nk), block_size)


# ------------------------------------------------------------------------------------------------ FlashInfer BSR

def _sort_csr_rows(indptr, indices):
    """Sorts column indices within each row (FlashInfer does not require sorted rows; Tessera's block-CSR does)."""
    rows = int(indptr.shape[0]) - 1
    nnz = int(indices.shape[0])
    if is_numpy(indptr):
        row_ids = np.repeat(np.arange(rows, dtype=np.int64), np.diff(indptr.astype(np.int64)))
        if row_ids.shape[0] != nnz:
            raise TesseraError("indptr", f"indptr[-1] - indptr[0] = {row_ids.shape[0]} but indices has {nnz} entries")
        order = np.lexsort((indices, row_ids))
        return np.ascontiguousarray(indices[order])
    torch = torch_module()
    counts = (indptr[1:] - indptr[:-1]).long()
    row_ids = torch.repeat_interleave(torch.arange(rows, device=indptr.device), counts, output_size=nnz)
    key = row_ids * (2**32) + indices.long()
    return indices[torch.argsort(key)].contiguous()


def from_flashinfer_bsr(indptr, indices, R: int, C: int, num_heads: Optional[int] = None, *,
                        num_kv_blocks: Optional[int] = None) -> MaskSpec:
    """Converts FlashInfer's BSR block mask (``BlockSparseAttentionWrapper.plan(indptr, indices, M, N, R, C, ...)``)
    to Tessera's block-CSR with block geometry (B_Q, B_KV) = (R, C).

    Args:
      indptr: int array [MB + 1] (one pattern shared by all heads, FlashInfer's fa2/fa3 path) or
        [num_heads * MB + 1] (per-head patterns, rows ordered head-major) when ``num_heads`` is given.
        MB = ceil(M / R) query blocks.
      indices: int array [nnz], kv-block column ids of each row (any order within a row; they are sorted here).
      R, C: FlashInfer's block sizes in tokens (rows, columns) = Tessera's (B_Q, B_KV); multiples of 16 in
        [16, 1024] for Tessera (checked at the call).
      num_heads: number of per-head patterns (H_m); None = a single pattern broadcast over heads.
      num_kv_blocks: n_kvb = ceil(N / C); None = taken from the key length at the call.

    Returns a MaskSpec (kind "csr", extents (1, H_m, MB, n_kvb)). Batch: FlashInfer has none; use B = 1 (q of
    shape [1, M, H, D], i.e. ``q.unsqueeze(0)``).
    Raises TesseraError naming "indptr", "indices", "R", "C" or "num_heads". numpy inputs are checked here;
    CUDA tensors are checked on the device at the call.
    """
    r = _check_block(_positive_int(R, "R"), "R")
    c = _check_block(_positive_int(C, "C"), "C")
    ip = as_int32(indptr, "indptr")
    ix = as_int32(indices, "indices")
    if ip.ndim != 1 or ip.shape[0] < 2:
        raise TesseraError("indptr", f"expected a 1-D array of rows + 1 >= 2 entries, got shape {tuple(ip.shape)}")
    if ix.ndim != 1:
        raise TesseraError("indices", f"expected a 1-D array, got shape {tuple(ix.shape)}")
    if is_cuda(ip) != is_cuda(ix):
        raise TesseraError("indices", "indptr and indices must be on the same device")
    rows = int(ip.shape[0]) - 1
    heads = 1 if num_heads is None else _positive_int(num_heads, "num_heads")
    if rows % heads:
        raise TesseraError("num_heads", f"indptr has {rows} rows, not a multiple of num_heads = {heads}")
    if not is_cuda(ip):
        ipn = ip if is_numpy(ip) else ip.numpy()
        if int(ipn[0]) != 0:
            raise TesseraError("indptr", f"indptr[0] must be 0, got {int(ipn[0])}")
        if np.any(np.diff(ipn) < 0):
            raise TesseraError("indptr", "indptr must be non-decreasing")
        if int(ipn[-1]) != int(ix.shape[0]):
            raise TesseraError("indptr", f"indptr[-1] = {int(ipn[-1])} but indices has {int(ix.shape[0])} entries")
    ix = _sort_csr_rows(ip, ix)
    nk = None if num_kv_blocks is None else _positive_int(num_kv_blocks, "num_kv_blocks")
    return MaskSpec("csr", ip, ix, (1, heads, rows // heads, nk), (r, c))


# ---------------------------------------------------------------------------------------- FlexAttention BlockMask

def _is_noop_mask_mod(mask_mod) -> bool:
    if mask_mod is None:
        return True
    return getattr(mask_mod, "__name__", "") == "noop_mask"


def _merge_index_lists(c1, i1, c2, i2):
    """Per row: the first c1 entries of i1, then the first c2 entries of i2. Returns (counts, indices)."""
    k1, k2 = int(i1.shape[-1]), int(i2.shape[-1])
    if is_numpy(c1):
        pos = np.arange(k1 + k2)
        valid = np.where(pos < k1, pos < c1[..., None], (pos - k1) < c2[..., None])
        order = np.argsort(~valid, axis=-1, kind="stable")
        merged = np.take_along_axis(np.concatenate([i1, i2], axis=-1), order, axis=-1)
        return (c1 + c2).astype(np.int32), np.ascontiguousarray(merged.astype(np.int32))
    torch = torch_module()
    pos = torch.arange(k1 + k2, device=c1.device)
    valid = torch.where(pos < k1, pos < c1[..., None], (pos - k1) < c2[..., None])
    order = torch.sort((~valid).to(torch.uint8), dim=-1, stable=True).indices
    merged = torch.gather(torch.cat([i1, i2], dim=-1), -1, order)
    return (c1 + c2).to(torch.int32).contiguous(), merged.to(torch.int32).contiguous()


def from_flex_block_mask(block_mask, *, partial_blocks: str = "auto") -> MaskSpec:
    """Converts a FlexAttention ``BlockMask`` (duck-typed: ``kv_num_blocks``, ``kv_indices``, optional
    ``full_kv_num_blocks`` / ``full_kv_indices``, ``BLOCK_SIZE``, ``mask_mod``, ``seq_lengths``) to index lists.

    FlexAttention splits a row's active kv blocks into "partial" (``kv_*``, where ``mask_mod`` is applied per
    element) and "full" (``full_kv_*``) blocks; both are merged into one list per row. ``BLOCK_SIZE`` is the logical
    block geometry (B_Q, B_KV). Tessera masks at block granularity, so element-wise ``mask_mod`` masking inside
    partial blocks is not reproduced:

    - partial_blocks="auto" (default): accepted when ``mask_mod`` is None or FlexAttention's ``noop_mask`` (masks
      built with ``BlockMask.from_kv_blocks`` and no mask_mod: exact). Otherwise, if any partial block exists, raises
      TesseraError("block_mask.mask_mod") (this check reads one count from the device).
    - partial_blocks="active": partial blocks are treated as fully active (right for block-level masks, e.g.
      ``create_block_mask`` with a mask_mod that only looks at block indices, whose partial blocks are the ragged
      tail: Tessera never lets tokens past N contribute).

    Returns a MaskSpec (kind "index_lists", extents (B_m, H_m, n_qb, n_kvb), block_size and seq_lengths from the
    BlockMask). Raises TesseraError naming "block_mask.*".
    """
    for attr in ("kv_num_blocks", "kv_indices", "BLOCK_SIZE"):
        if not hasattr(block_mask, attr):
            raise TesseraError("block_mask", f"not a FlexAttention BlockMask (no attribute {attr})")
    if partial_blocks not in ("auto", "active"):
        raise TesseraError("partial_blocks", f"expected 'auto' or 'active', got {partial_blocks!r}")
    bq, bkv = _pair(block_mask.BLOCK_SIZE, "block_mask.BLOCK_SIZE")
    c1 = as_int32(block_mask.kv_num_blocks, "block_mask.kv_num_blocks")
    i1 = as_int32(block_mask.kv_indices, "block_mask.kv_indices")
    if c1.ndim != 3 or i1.ndim != 4 or tuple(i1.shape[:3]) != tuple(c1.shape):
        raise TesseraError("block_mask.kv_indices", f"expected kv_num_blocks [B, H, Qb] and kv_indices [B, H, Qb, K], "
                                                    f"got {tuple(c1.shape)} and {tuple(i1.shape)}")
    mask_mod = getattr(block_mask, "mask_mod", None)
    if partial_blocks == "auto" and not _is_noop_mask_mod(mask_mod):
        has_partial = bool((c1 > 0).any())
        if has_partial:
            name = getattr(mask_mod, "__name__", type(mask_mod).__name__)
            raise TesseraError("block_mask.mask_mod", f"the BlockMask has partial blocks with mask_mod '{name}'; Tessera "
                                                      "masks whole blocks and would not apply it inside them. If the "
                                                      "mask is block-level, convert with "
                                                      "from_flex_block_mask(bm, partial_blocks='active')")
    f_c = getattr(block_mask, "full_kv_num_blocks", None)
    f_i = getattr(block_mask, "full_kv_indices", None)
    if (f_c is None) != (f_i is None):
        raise TesseraError("block_mask.full_kv_indices", "full_kv_num_blocks and full_kv_indices must both be given")
    if f_c is not None:
        c2 = as_int32(f_c, "block_mask.full_kv_num_blocks")
        i2 = as_int32(f_i, "block_mask.full_kv_indices")
        if tuple(c2.shape) != tuple(c1.shape) or i2.ndim != 4 or tuple(i2.shape[:3]) != tuple(c1.shape):
            raise TesseraError("block_mask.full_kv_indices", f"shapes {tuple(c2.shape)} / {tuple(i2.shape)} do not "
                                                             f"match kv_num_blocks {tuple(c1.shape)}")
        counts, indices = _merge_index_lists(c1, i1, c2, i2)
    else:
        counts, indices = c1, i1
    seq = getattr(block_mask, "seq_lengths", None)
    seq_lengths = None
    n_kvb = None
    if seq is not None:
        seq_lengths = (int(seq[0]), int(seq[1]))
        n_kvb = -(-seq_lengths[1] // bkv)
    b, h, nq = (int(s) for s in counts.shape)
    return MaskSpec("index_lists", counts, indices, (b, h, nq, n_kvb), (bq, bkv), seq_lengths)


# ------------------------------------------------------------------------------------------------- any input

_last_tuple = None  # (tuple, MaskSpec) of the last tuple input whose spec holds the tuple's own arrays


def to_mask_spec(block_mask, cache: bool = False) -> MaskSpec:
    """Normalizes any accepted mask input (see the module docstring) to a MaskSpec. Raises TesseraError
    ("block_mask...") for anything else. With `cache`, the same tuple object passed again is not parsed again (only
    when its spec refers to the tuple's own arrays, so in-place updates of their contents are still seen)."""
    global _last_tuple
    if isinstance(block_mask, MaskSpec):
        return block_mask
    if cache:
        last = _last_tuple
        if last is not None and block_mask is last[0]:
            return last[1]
    if isinstance(block_mask, tuple) and block_mask and isinstance(block_mask[0], str):
        spec = _tuple_spec(block_mask)
        if cache and len(block_mask) > 2 and spec.m0 is block_mask[1] and spec.m1 is block_mask[2]:
            _last_tuple = (block_mask, spec)
        return spec
    if is_array(block_mask):
        return from_dense(block_mask)
    if hasattr(block_mask, "kv_num_blocks") and hasattr(block_mask, "kv_indices"):
        return from_flex_block_mask(block_mask)
    raise TesseraError("block_mask", f"unsupported mask type {type(block_mask).__name__}: expected a bool/uint8 array, "
                                     "a ('csr', ...) or ('index_lists', ...) tuple, a MaskSpec or a FlexAttention "
                                     "BlockMask")


def _tuple_spec(block_mask) -> MaskSpec:
    kind = block_mask[0]
    if kind == "csr":
        if len(block_mask) != 4:
            raise TesseraError("block_mask", "expected ('csr', row_offsets, col_indices, (B_m, H_m, n_qb, n_kvb))")
        return _csr_spec(block_mask[1], block_mask[2], block_mask[3])
    if kind == "index_lists":
        if len(block_mask) != 4:
            raise TesseraError("block_mask", "expected ('index_lists', counts, indices, n_kvb)")
        return _index_lists_spec(block_mask[1], block_mask[2], block_mask[3])
    if kind == "dense":
        if len(block_mask) != 2:
            raise TesseraError("block_mask", "expected ('dense', mask)")
        return from_dense(block_mask[1])
    raise TesseraError("block_mask", f"unknown mask format {kind!r} (expected 'csr', 'index_lists' or 'dense')")
