"""CPU tests of tessera.attn_processor: the LSE merge (numpy, through the CPU path), and with torch the processor's
shape, layout and token-order handling against an SDPA/float64 reference, its errors, and (with diffusers) a tiny
WanTransformer3DModel with the processor installed against the model's own processors."""
import numpy as np
import pytest

import tessera
from tessera.attn_processor import merge_attention_lse


def test_lse_merge_equals_attention_over_concatenated_keys():
    """Video queries over video keys (block-sparse, with empty rows) and over text keys (dense), merged through the
    LSE, equal attention over the concatenated keys with the joined mask (float64 CPU path)."""
    rng = np.random.default_rng(7)
    b, n_v, n_t, h, d, bs = 1, 200, 64, 2, 64, 64  # 200 video tokens: 4 blocks, the last partial
    q = rng.standard_normal((b, n_v, h, d))
    kv, vv = rng.standard_normal((b, n_v, h, d)), rng.standard_normal((b, n_v, h, d))
    kt, vt = rng.standard_normal((b, n_t, h, d)), rng.standard_normal((b, n_t, h, d))
    m = rng.random((b, h, 4, 4)) < 0.5
    m[0, 0, 1, :] = False  # a query block with no video key: all its weight goes to the text part
    o_v, lse_v = tessera.block_sparse_attention(q, kv, vv, m, bs, return_lse=True)
    o_t, lse_t = tessera.block_sparse_attention(q, kt, vt, np.ones((1, 1, 4, 1), bool), bs, return_lse=True)
    o, lse = merge_attention_lse(o_v, lse_v, o_t, lse_t)
    # token-level float64 reference over the concatenated keys [video | text]; the LSE the call returns is
    # float32 (docs/python.md), so the merged weights carry float32 rounding
    ref_o, ref_lse = _token_reference(q, np.concatenate([kv, kt], 1), np.concatenate([vv, vt], 1), m, bs, n_v)
    assert np.allclose(o, ref_o, atol=2e-6, rtol=1e-6)
    assert np.allclose(lse, ref_lse, atol=2e-6, rtol=1e-6)
    # and the merge of an empty part with another empty part: O = 0, LSE = -inf
    empty = np.full_like(lse_v, -np.inf)
    o0, l0 = merge_attention_lse(np.zeros_like(o_v), empty, np.zeros_like(o_v), empty)
    assert np.all(o0 == 0) and np.all(np.isneginf(l0))


def _token_reference(q, k, v, m_video, bs, n_v):
    """float64 attention of q over [video keys (block mask m_video) | text keys (all)] at token level."""
    b, n, h, d = q.shape
    qb = np.arange(n) // bs
    kb = np.arange(n_v) // bs
    allowed = np.concatenate([m_video[:, :, qb][:, :, :, kb],
                              np.ones((b, h, n, k.shape[1] - n_v), bool)], -1)  # [B, H, N, N_kv]
    s = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(d)
    s = np.where(allowed, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    l = p.sum(-1, keepdims=True)
    return np.einsum("bhij,bjhd->bihd", p / l, v), (mx + np.log(l))[..., 0]


def test_lse_merge_errors_name_the_argument():
    o = np.zeros((1, 8, 2, 64))
    lse = np.zeros((1, 2, 8))
    with pytest.raises(tessera.TesseraError) as e:
        merge_attention_lse(o, lse, o[:, :4], lse)
    assert e.value.argument == "o_b"
    with pytest.raises(tessera.TesseraError) as e:
        merge_attention_lse(o, lse, o, lse[:, :1])
    assert e.value.argument == "lse_b"
    for args, argument in (((o, None, o, lse), "lse_a"), ((list(o), lse, o, lse), "o_a"),
                           ((o, lse, o, lse.astype(np.int32)), "lse_b")):
        with pytest.raises(tessera.TesseraError) as e:
            merge_attention_lse(*args)
        assert e.value.argument == argument
    torch = pytest.importorskip("torch")
    with pytest.raises(tessera.TesseraError) as e:  # numpy against torch
        merge_attention_lse(o, lse, torch.from_numpy(o), lse)
    assert e.value.argument == "o_b"


# ------------------------------------------------------------------------------------------------ with torch
def _torch():
    return pytest.importorskip("torch", reason="torch is not installed (scripts/setup.sh, issue 22)")


def _fake_wan_attention(torch, dim, heads):
    """A module with WanAttention's attributes (to_q/k/v, norm_q/k across heads, heads, to_out)."""
    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.to_q, self.to_k, self.to_v = (torch.nn.Linear(dim, dim) for _ in range(3))
            self.norm_q = torch.nn.RMSNorm(dim, eps=1e-6)
            self.norm_k = torch.nn.RMSNorm(dim, eps=1e-6)
            self.to_out = torch.nn.ModuleList([torch.nn.Linear(dim, dim), torch.nn.Dropout(0.0)])
    return Attn()


def _rope(torch, n, d, seed):
    g = torch.Generator().manual_seed(seed)
    ang = torch.rand(1, n, 1, d // 2, generator=g, dtype=torch.float64) * 6.28
    return ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)


def _sdpa_reference(torch, attn, x, rope, dense_tok=None):
    """The module's output with SDPA (float64) over the raster tokens; dense_tok [H, N, N] bool restricts keys."""
    q = attn.norm_q(attn.to_q(x)).unflatten(2, (attn.heads, -1))
    k = attn.norm_k(attn.to_k(x)).unflatten(2, (attn.heads, -1))
    v = attn.to_v(x).unflatten(2, (attn.heads, -1))

    def rot(t):  # the textbook interleaved RoPE, written independently of apply_wan_rotary
        c, s = rope[0][..., 0::2], rope[1][..., 0::2]
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)

    q, k = rot(q.double()), rot(k.double())
    o = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                         v.double().transpose(1, 2),
                                                         attn_mask=None if dense_tok is None else dense_tok[None])
    return attn.to_out[0](o.transpose(1, 2).flatten(2, 3).to(x.dtype))


def test_processor_dense_mask_with_cube_order_equals_sdpa():
    torch = _torch()
    from tessera.attn_processor import TesseraAttnProcessor

    import sys, os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from bench.model.vsa import cube_token_order

    torch.manual_seed(0)
    heads, d, grid = 2, 64, (5, 8, 12)  # 480 tokens: 6 full cubes + 96 edge tokens; blocks 7 full + 1 of 32
    n = int(np.prod(grid))
    attn = _fake_wan_attention(torch, heads * d, heads).double()
    x = torch.randn(1, n, heads * d, dtype=torch.float64)
    rope = _rope(torch, n, d, 1)
    seen = {}

    def mask_fn(q, k):
        seen["shape"] = (tuple(q.shape), tuple(k.shape))
        return torch.ones(1, 1, 8, 8, dtype=torch.bool)

    p = TesseraAttnProcessor(mask_fn, 64, token_order=cube_token_order(grid))
    with torch.no_grad():  # forward only
        out = p(attn, x, rotary_emb=rope)
        ref = _sdpa_reference(torch, attn, x, rope)
    assert seen["shape"] == ((1, n, heads, d), (1, n, heads, d))
    assert out.shape == (1, n, heads * d)
    assert torch.allclose(out, ref, atol=1e-9, rtol=1e-9)


def test_processor_sparse_mask_is_applied_in_block_order():
    """A sparse block mask in the cube order: the output equals SDPA with the token mask it implies, mapped back
    to the raster order (the mask sees block-order tokens, the output comes back in model order)."""
    torch = _torch()
    from tessera.attn_processor import TesseraAttnProcessor
    import sys, os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from bench.model.vsa import cube_token_order, vsa_topk

    torch.manual_seed(1)
    heads, d, grid = 2, 64, (5, 8, 12)
    n = int(np.prod(grid))
    perm = torch.from_numpy(cube_token_order(grid))
    attn = _fake_wan_attention(torch, heads * d, heads).double()
    x = torch.randn(1, n, heads * d, dtype=torch.float64)
    rope = _rope(torch, n, d, 2)
    got = {}

    def mask_fn(q, k):
        counts, idx = vsa_topk(q, k, (64, 64), 0.25)
        got["idx"] = idx
        return ("index_lists", counts, idx, 8)

    with torch.no_grad():
        out = TesseraAttnProcessor(mask_fn, 64, token_order=perm)(attn, x, rotary_emb=rope)
    idx = got["idx"][0]                                       # [H, 8, 2], block order
    blk = torch.zeros(heads, 8, 8, dtype=torch.bool).scatter_(-1, idx.long(), True)
    pos = torch.empty(n, dtype=torch.long)
    pos[perm] = torch.arange(n)                               # raster token -> block-order position
    tok = blk[:, pos // 64][:, :, pos // 64]                  # [H, N, N] in raster order
    with torch.no_grad():
        ref = _sdpa_reference(torch, attn, x, rope, tok)
    assert torch.allclose(out, ref, atol=1e-9, rtol=1e-9)


def test_processor_errors_name_the_argument():
    torch = _torch()
    from tessera.attn_processor import TesseraAttnProcessor

    with pytest.raises(tessera.TesseraError) as e:
        TesseraAttnProcessor("not callable")
    assert e.value.argument == "mask_fn"
    attn = _fake_wan_attention(torch, 128, 2)
    x = torch.randn(1, 64, 128)
    p = TesseraAttnProcessor(lambda q, k: torch.ones(1, 1, 1, 1, dtype=torch.bool), 64)
    with pytest.raises(tessera.TesseraUnsupportedError) as e:
        p(attn, x, encoder_hidden_states=x)
    assert e.value.argument == "encoder_hidden_states"
    with pytest.raises(tessera.TesseraUnsupportedError) as e:
        p(attn, x, attention_mask=torch.ones(64, 64, dtype=torch.bool))
    assert e.value.argument == "attention_mask"
    for bad in ([0, 0, 1], [0, 1, 3], [0.0, 1.0, 2.0]):
        with pytest.raises(tessera.TesseraError) as e:
            TesseraAttnProcessor(lambda q, k: None, 64, token_order=bad).orders(3, torch.device("cpu"))
        assert e.value.argument == "token_order"
    with pytest.raises(tessera.TesseraError) as e:
        TesseraAttnProcessor(lambda q, k: None, 64, token_order=[1, 0]).orders(3, torch.device("cpu"))
    assert e.value.argument == "token_order" and "N = 3" in str(e.value)


def test_lse_merge_torch_matches_numpy():
    torch = _torch()
    rng = np.random.default_rng(3)
    oa, ob = rng.standard_normal((2, 1, 16, 2, 64))
    la, lb = rng.standard_normal((2, 1, 2, 16)) * 3
    la[0, 0, :4] = -np.inf
    o_np, l_np = merge_attention_lse(oa, la, ob, lb)
    o_t, l_t = merge_attention_lse(*(torch.from_numpy(a) for a in (oa, la, ob, lb)))
    assert np.allclose(o_t.numpy(), o_np) and np.allclose(l_t.numpy(), l_np)


def test_tiny_wan_transformer_with_processor_equals_its_own():
    """diffusers' WanTransformer3DModel (tiny config, float32): the processor installed on every self-attention
    module with an all-active mask and the cube order gives the model's own output."""
    torch = _torch()
    pytest.importorskip("diffusers", reason="diffusers is not installed")
    from diffusers.models.transformers.transformer_wan import WanTransformer3DModel
    from tessera.attn_processor import TesseraAttnProcessor, install_self_attention
    import sys, os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from bench.model.vsa import cube_token_order

    torch.manual_seed(0)
    m = WanTransformer3DModel(num_attention_heads=2, attention_head_dim=64, ffn_dim=256, num_layers=2, text_dim=64,
                              freq_dim=32).eval()
    x, t, e = torch.randn(1, 16, 5, 16, 24), torch.tensor([500.0]), torch.randn(1, 16, 64)
    with torch.no_grad():
        ref = m(x, t, e, return_dict=False)[0]
        got = install_self_attention(m, lambda layer, name: TesseraAttnProcessor(
            lambda q, k: torch.ones(1, 1, 8, 8, dtype=torch.bool), 64, token_order=cube_token_order((5, 8, 12))))
        out = m(x, t, e, return_dict=False)[0]
    assert [n for n, _ in got] == ["blocks.0.attn1", "blocks.1.attn1"]
    assert type(m.blocks[0].attn2.processor).__name__ == "WanAttnProcessor"
    err = float((out - ref).norm() / ref.norm())
    assert err < 1e-5, err
