"""An attention processor for diffusers' Wan-style DiT self-attention (docs/python.md, "Attention processor").

`TesseraAttnProcessor` replaces the SDPA call of a `WanAttention` self-attention module (`blocks.<i>.attn1` of
diffusers' `WanTransformer3DModel`) by `tessera.block_sparse_attention` with a block mask that a sparsifier computes
from the live q and k of every call. It reproduces the rest of diffusers' `WanAttnProcessor` (projections, RMSNorm of
q and k across heads, head split, Wan's interleaved RoPE, output projection), so a model with it installed computes
the same function as with the default processor wherever the mask is dense. Cross-attention (`attn2`) keeps its own
processor. torch is imported lazily: `import tessera` never needs it.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._arrays import is_numpy, is_torch
from .errors import TesseraError, TesseraUnsupportedError

BlockSize = Union[int, Tuple[int, int]]
_ATTN1 = re.compile(r"(?:^|\.)blocks\.(\d+)\.attn1$")


def apply_wan_rotary(x, freqs_cos, freqs_sin):
    """Wan's RoPE (diffusers `WanRotaryPosEmbed` + `WanAttnProcessor`): channel pairs (2i, 2i+1) rotated by the
    angle whose cos/sin the model's `rope` module returns, repeated per pair.

    x: torch [B, N, H, D]; freqs_cos, freqs_sin: [1, N, 1, D] (float64 or float32, broadcast over B and H).
    Returns [B, N, H, D] in x's dtype (computed in the freqs' dtype, as diffusers does)."""
    import torch

    if x.shape[-1] % 2 or freqs_cos.shape[-1] != x.shape[-1] or freqs_sin.shape != freqs_cos.shape:
        raise TesseraError("rotary_emb", f"need (cos, sin) of shape [1, N, 1, {x.shape[-1]}] for x {tuple(x.shape)}, "
                                         f"got {tuple(freqs_cos.shape)} and {tuple(freqs_sin.shape)}")
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    cos = freqs_cos[..., 0::2]
    sin = freqs_sin[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out.type_as(x)


def wan_self_attention_qkv(attn, hidden_states, rotary_emb):
    """q, k, v of a Wan self-attention module as diffusers' `WanAttnProcessor` computes them before attention.

    attn: a diffusers `WanAttention` (to_q/to_k/to_v or fused to_qkv, norm_q, norm_k, heads); hidden_states: torch
    [B, N, C]; rotary_emb: (cos, sin) [1, N, 1, D] or None. Returns (q, k, v), each [B, N, H, D] in the model dtype,
    RoPE applied to q and k, tokens in the model's (raster) order."""
    if getattr(attn, "fused_projections", False):
        q, k, v = attn.to_qkv(hidden_states).chunk(3, dim=-1)
    else:
        q, k, v = attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)
    q = attn.norm_q(q).unflatten(2, (attn.heads, -1))
    k = attn.norm_k(k).unflatten(2, (attn.heads, -1))
    v = v.unflatten(2, (attn.heads, -1))
    if rotary_emb is not None:
        q = apply_wan_rotary(q, *rotary_emb)
        k = apply_wan_rotary(k, *rotary_emb)
    return q, k, v


class TesseraAttnProcessor:
    """diffusers attention processor: Wan self-attention through `tessera.block_sparse_attention`.

    mask_fn(q, k) -> mask: called on every call with q, k [B, N, H, D] (RoPE applied, tokens in the block order) and
        returns any mask input of `block_sparse_attention` (dense [B_m, H_m, n_qb, n_kvb] bool, a block-CSR or
        index-list tuple, a FlexAttention BlockMask, a MaskSpec) on q's device, e.g. VSA's top-k index lists
        (bench/model/vsa.py `vsa_topk`). A new mask each call (mask_version 0).
    block_size: B or (B_Q, B_KV) tokens (multiples of 16 in [16, 1024]).
    token_order: None (blocks of consecutive tokens in the model's raster order) or an int sequence / tensor
        `perm` [N] that is a permutation of range(N): position p of the block order holds model token perm[p]
        (e.g. VSA's cube order, bench/model/vsa.py `cube_token_order`). q, k, v are gathered into it before
        mask_fn and attention and the output is scattered back, as VSA does around its kernel.
    scale: softmax scale (None: 1/sqrt(D)).

    Install it on the self-attention modules only (`install_self_attention`); a call with encoder_hidden_states
    (cross-attention) or an attention_mask raises TesseraUnsupportedError naming the argument.
    """

    def __init__(self, mask_fn: Callable[[Any, Any], Any], block_size: BlockSize = 64, *,
                 token_order: Optional[Sequence[int]] = None, scale: Optional[float] = None):
        if not callable(mask_fn):
            raise TesseraError("mask_fn", f"need a callable mask_fn(q, k) -> mask, got {type(mask_fn).__name__}")
        self.mask_fn = mask_fn
        self.block_size = block_size
        self.scale = scale
        self._order_src = token_order
        self._order: Dict[Any, Tuple[Any, Any]] = {}  # device -> (perm, inverse) int64 tensors

    # -- token order -------------------------------------------------------------------------------------------
    def orders(self, n: int, device) -> Optional[Tuple[Any, Any]]:
        """(perm, inverse) int64 tensors on `device` for n tokens, or None without a token_order."""
        if self._order_src is None:
            return None
        hit = self._order.get(device)
        if hit is None:
            import torch

            perm = torch.as_tensor(self._order_src).flatten().cpu()
            if perm.dtype.is_floating_point or perm.dtype.is_complex or perm.dtype == torch.bool:
                raise TesseraError("token_order", f"need integer token indices, got {perm.dtype}")
            perm = perm.to(torch.int64)
            ar = torch.arange(perm.numel())
            if perm.numel() == 0 or not torch.equal(torch.sort(perm).values, ar):
                raise TesseraError("token_order", f"not a permutation of range({perm.numel()})")
            inv = torch.empty_like(perm)
            inv[perm] = ar
            hit = (perm.to(device), inv.to(device))
            self._order[device] = hit
        if hit[0].numel() != n:
            raise TesseraError("token_order", f"has {hit[0].numel()} entries, the call has N = {n} tokens")
        return hit

    def to_block_order(self, x, orders):
        """[B, N, H, D] in the model's order -> the block order (a gather; x itself when there is no token_order)."""
        return x if orders is None else x.index_select(1, orders[0])

    def from_block_order(self, o, orders):
        """[B, N, H, D] in the block order -> the model's order."""
        return o if orders is None else o.index_select(1, orders[1])

    # -- the call ----------------------------------------------------------------------------------------------
    def attend(self, q, k, v):
        """Block-sparse attention of q, k, v [B, N, H, D] in the model's order; returns O [B, N, H, D]."""
        from .api import block_sparse_attention

        orders = self.orders(q.shape[1], q.device)
        q, k, v = (self.to_block_order(x, orders) for x in (q, k, v))
        mask = self.mask_fn(q, k)
        o = block_sparse_attention(q, k, v, mask, self.block_size, scale=self.scale, layout="bshd")
        return self.from_block_order(o, orders)

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None,
                 **kwargs):
        if encoder_hidden_states is not None:
            raise TesseraUnsupportedError(
                "encoder_hidden_states", "TesseraAttnProcessor is for self-attention (blocks.<i>.attn1); keep the "
                                         "default processor on cross-attention modules (install_self_attention)")
        if attention_mask is not None:
            raise TesseraUnsupportedError("attention_mask", "token-level attention masks are not supported; the "
                                                            "block mask comes from mask_fn")
        if kwargs:
            raise TesseraUnsupportedError(next(iter(kwargs)), "unexpected processor argument")
        q, k, v = wan_self_attention_qkv(attn, hidden_states, rotary_emb)
        o = self.attend(q, k, v)
        o = o.flatten(2, 3).type_as(q)
        return attn.to_out[1](attn.to_out[0](o))


def merge_attention_lse(o_a, lse_a, o_b, lse_b):
    """Exact attention over the union of two disjoint key sets from the two partial results, e.g. video queries over
    video keys through a block-sparse mask (part a) and over the text keys densely (part b), as joint-attention DiTs
    (HunyuanVideo with STA) need: O = (e^lse_a O_a + e^lse_b O_b) / (e^lse_a + e^lse_b), LSE = ln(e^lse_a + e^lse_b).

    o_a, o_b: [B, N, H, D] (`return_lse=True` outputs of block_sparse_attention, layout "bshd"); lse_a, lse_b:
    [B, H, N] float32/float64, natural log, -inf for a query with no key in that part. numpy arrays or torch tensors
    (both parts the same kind). Returns (O [B, N, H, D] in o_a's dtype, LSE [B, H, N]); a query with no key in either
    part gets O = 0 and LSE = -inf. Raises TesseraError naming the argument for a non-array, an array of the other
    kind (numpy against torch), an integer LSE, or mismatched shapes."""
    kind = "torch" if is_torch(o_a) else "numpy" if is_numpy(o_a) else None
    if kind is None:
        raise TesseraError("o_a", f"expected a numpy array or a torch tensor, got {type(o_a).__name__}")
    for name, x in (("lse_a", lse_a), ("o_b", o_b), ("lse_b", lse_b)):
        if not (is_torch(x) if kind == "torch" else is_numpy(x)):
            raise TesseraError(name, f"expected a {kind} array like o_a, got {type(x).__name__}")
    for name, x in (("lse_a", lse_a), ("lse_b", lse_b)):
        if not (x.dtype.is_floating_point if kind == "torch" else x.dtype.kind == "f"):
            raise TesseraError(name, f"expected a floating-point LSE, got dtype {x.dtype}")
    xp, swap, cast = _array_ops(o_a)
    if tuple(o_a.shape) != tuple(o_b.shape):
        raise TesseraError("o_b", f"shape {tuple(o_b.shape)} differs from o_a's {tuple(o_a.shape)}")
    want = (o_a.shape[0], o_a.shape[2], o_a.shape[1])
    for name, x in (("lse_a", lse_a), ("lse_b", lse_b)):
        if tuple(x.shape) != want:
            raise TesseraError(name, f"need [B, H, N] = {list(want)} for o_a {tuple(o_a.shape)}, got {tuple(x.shape)}")
    m = xp.maximum(lse_a, lse_b)
    finite = xp.isfinite(m)
    m0 = xp.where(finite, m, xp.zeros_like(m))
    wa = xp.where(finite, xp.exp(lse_a - m0), xp.zeros_like(m))
    wb = xp.where(finite, xp.exp(lse_b - m0), xp.zeros_like(m))
    tot = xp.where(finite, wa + wb, xp.ones_like(m))
    lse = xp.where(finite, m0 + xp.log(tot), m)
    o = o_a * swap(wa / tot)[..., None] + o_b * swap(wb / tot)[..., None]  # weights [B, H, N] -> [B, N, H, 1]
    return cast(o, o_a), lse


def _array_ops(x):
    """(module, swap axes 1 and 2, cast like) for a torch tensor or a numpy array."""
    if type(x).__module__.split(".")[0] == "torch":  # no torch import for numpy inputs
        import torch

        return torch, (lambda a: a.transpose(1, 2)), (lambda a, like: a.to(like.dtype))
    import numpy as np

    return np, (lambda a: np.swapaxes(a, 1, 2)), (lambda a, like: a.astype(like.dtype))


def install_self_attention(transformer, make_processor: Callable[[int, str], Any]) -> List[Tuple[str, Any]]:
    """Sets make_processor(layer, name) as the processor of every self-attention module `blocks.<layer>.attn1` of a
    diffusers transformer (WanTransformer3DModel and other models with that naming); other modules keep theirs.
    Returns [(module name, processor)] in layer order. Raises TesseraError("transformer") when no module matches."""
    found = []
    for name, module in transformer.named_modules():
        m = _ATTN1.search(name)
        if m and hasattr(module, "set_processor"):
            found.append((int(m.group(1)), name, module))
    if not found:
        raise TesseraError("transformer", "no self-attention module named blocks.<i>.attn1 with set_processor")
    out = []
    for layer, name, module in sorted(found, key=lambda t: t[0]):
        p = make_processor(layer, name)
        module.set_processor(p)
        out.append((name, p))
    return out


__all__ = ["TesseraAttnProcessor", "apply_wan_rotary", "wan_self_attention_qkv", "install_self_attention",
           "merge_attention_lse"]
