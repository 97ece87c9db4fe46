"""The torch custom op ``torch.ops.tessera.block_sparse_attention`` (imported only when torch is in use).

Schema (masks travel as tensors, never Python objects):

    tessera::block_sparse_attention(Tensor q, Tensor k, Tensor v, int mask_kind, Tensor m0, Tensor? m1,
        int[] extents, int block_q, int block_kv, float? scale, bool bhsd, bool return_lse, int mask_version,
        str plan_id) -> (Tensor O, Tensor LSE)

mask_kind 0: m0 = dense [B_m, H_m, n_qb, n_kvb]; 1: m0 = row_offsets, m1 = col_indices; 2: m0 = counts,
m1 = indices. extents = (B_m, H_m, n_qb, n_kvb). O has q's shape and dtype (contiguous); LSE is [B, H_q, N_q]
float32 when return_lse, else an empty float32 tensor of shape (0,). The fake (meta) implementation produces
the same shapes, so the op works under torch.compile (no graph break) and inside CUDA-graph capture when the
runtime does not synchronize (exact repeats, ``mask_version``).

``tessera.block_sparse_attention`` calls the native code directly in eager mode (lower overhead) and goes through
this op only while torch.compile traces.
"""
from typing import List, Optional, Tuple

import torch

from . import api
from .converters import KIND_CODES
from .errors import TesseraError

__all__ = ["block_sparse_attention_op", "call_op"]

_KIND_NAMES = {code: name for name, code in KIND_CODES.items()}


@torch.library.custom_op("tessera::block_sparse_attention", mutates_args=())
def block_sparse_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask_kind: int, m0: torch.Tensor,
                              m1: Optional[torch.Tensor], extents: List[int], block_q: int, block_kv: int,
                              scale: Optional[float], bhsd: bool, return_lse: bool, mask_version: int,
                              plan_id: str) -> Tuple[torch.Tensor, torch.Tensor]:
    kind = _KIND_NAMES[mask_kind]
    spec = api.MaskSpec(kind, m0, m1, tuple(extents))
    o, lse = api._run(q, k, v, spec, block_q, block_kv, scale, "bhsd" if bhsd else "bshd", return_lse, True,
                      mask_version, plan_id or None)
    if lse is None:
        lse = q.new_empty((0,), dtype=torch.float32)
    return o, lse


@block_sparse_attention_op.register_fake
def _(q, k, v, mask_kind, m0, m1, extents, block_q, block_kv, scale, bhsd, return_lse, mask_version, plan_id):
    o = q.new_empty(q.shape)
    if return_lse:
        b = q.shape[0]
        h, n = (q.shape[1], q.shape[2]) if bhsd else (q.shape[2], q.shape[1])
        lse = q.new_empty((b, h, n), dtype=torch.float32)
    else:
        lse = q.new_empty((0,), dtype=torch.float32)
    return o, lse


def call_op(q, k, v, block_mask, block_size, scale, layout, return_lse, mask_version, plan_id):
    """Argument handling of tessera.block_sparse_attention, then the custom op (used while torch.compile traces)."""
    _, spec, bq, bkv, scale = api._prepare(q, k, v, block_mask, block_size, scale, layout, cache=False)
    for t in (spec.m0, spec.m1):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TesseraError("block_mask", "mask arrays must be torch tensors when q is a torch tensor under "
                                             "torch.compile")
    bhsd = layout == "bhsd"
    n_q, n_kv = (q.shape[2], k.shape[2]) if bhsd else (q.shape[1], k.shape[1])
    extents = api._resolve_extents(spec, int(n_q), int(n_kv), bq, bkv)
    o, lse = torch.ops.tessera.block_sparse_attention(q, k, v, KIND_CODES[spec.kind], spec.m0, spec.m1,
                                                      [int(e) for e in extents], bq, bkv, scale, bhsd, return_lse,
                                                      int(mask_version), plan_id or "")
    return (o, lse) if return_lse else o
