"""CPU tests of the HunyuanVideo + Sliding Tile Attention model loop's processor (bench/model/hunyuan.py) on a tiny
diffusers HunyuanVideoTransformer3DModel (float32): the processor with the model's own attention (the dense backend)
gives the model's own output; through Tessera (CPU path) with a window covering every tile it gives the model's
output too (the STA token order and the joint mask's text block are exact); with a real window it equals a token-level
masked SDPA of the same joint mask. Skips without torch or diffusers."""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers", reason="diffusers is not installed")

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, REPO)

from bench.model.backends import Backend, DenseBackend, TesseraBackend  # noqa: E402
from bench.model.hunyuan import HUNYUAN_CONFIGS, HunyuanLoop  # noqa: E402
from bench.model.vsa import index_lists_to_dense  # noqa: E402


class MaskedSdpa(Backend):
    """A token-level reference: SDPA (math) with the block mask of the index lists expanded to tokens."""
    name = "masked-sdpa"

    def __init__(self, block):
        self.block = block

    def attend(self, q, k, v, counts, idx, mark):
        n = q.shape[1]
        nb = -(-n // self.block)
        blocks = index_lists_to_dense(idx[0], nb)  # [H, nb, nb]
        tok = torch.arange(n) // self.block
        allowed = blocks[:, tok][:, :, tok]  # [H, N, N]
        o = torch.nn.functional.scaled_dot_product_attention(
            *(x.transpose(1, 2).double() for x in (q, k, v)), attn_mask=allowed.unsqueeze(0))
        return o.transpose(1, 2).to(q.dtype)


def _loop(window):
    import dataclasses

    cfg = dataclasses.replace(HUNYUAN_CONFIGS["tiny-hv"], window=window)
    return cfg, HunyuanLoop(cfg, cfg.layers, torch.device("cpu"), cfg.block, 0.0, 50, seed=3)


def _predict(loop, backend):
    loop.ctx.backend = backend
    pred, _ = loop.step(loop.x0, 0, None)
    return pred


def _own_output(loop):
    from diffusers.models.transformers.transformer_hunyuan_video import HunyuanVideoAttnProcessor2_0

    blocks = list(loop.model.transformer_blocks) + list(loop.model.single_transformer_blocks)
    mine = [b.attn.processor for b in blocks]
    for b in blocks:
        b.attn.set_processor(HunyuanVideoAttnProcessor2_0())
    try:
        pred, _ = loop.step(loop.x0, 0, None)
    finally:
        for b, p in zip(blocks, mine):
            b.attn.set_processor(p)
    return pred


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_processor_dense_and_full_window_equal_the_models_own_attention():
    from bench.model.sta import sta_token_order

    cfg, loop = _loop((2, 2, 2))  # the whole 2 x 2 x 2 tile grid: every block active
    perm, inv = (x.numpy() for x in loop.order)  # video tokens in STA tile order, then the text tokens as they are
    assert np.array_equal(perm[:cfg.video_tokens], sta_token_order(cfg.grid, cfg.tile))
    assert np.array_equal(perm[cfg.video_tokens:], np.arange(cfg.video_tokens, cfg.tokens))
    assert np.array_equal(perm[inv], np.arange(cfg.tokens))
    assert [type(b.attn.processor).__name__ for b in loop.model.transformer_blocks] == ["HunyuanSTAProcessor"]
    assert type(loop.model.context_embedder.token_refiner.refiner_blocks[0].attn.processor).__name__ != \
        "HunyuanSTAProcessor"  # the text refiner keeps its own attention
    ref = _own_output(loop)
    assert _rel(_predict(loop, DenseBackend(torch.device("cpu"))), ref) < 1e-6
    sys.path.insert(0, os.path.join(REPO, "python"))
    got = _predict(loop, TesseraBackend(cfg.block, torch.device("cpu")))
    assert _rel(got, ref) < 1e-5


def test_processor_with_a_sta_window_equals_token_level_masked_attention():
    cfg, loop = _loop((1, 2, 1))
    counts, idx = loop.masks(cfg.first_step, 0)
    assert 0.3 < float(counts.sum()) / (cfg.heads * counts.shape[-1] ** 2) < 0.5  # sparse, text block included
    ref = _predict(loop, MaskedSdpa(cfg.block))
    got = _predict(loop, TesseraBackend(cfg.block, torch.device("cpu")))
    assert _rel(got, ref) < 1e-5
    assert _rel(got, _own_output(loop)) > 1e-3  # and the mask did change the model's output


def test_prepare_masks_builds_every_layer_of_the_measured_steps():
    _, loop = _loop((1, 2, 1))
    assert not loop.masks.cache
    secs = loop.prepare_masks(2)
    assert secs >= 0.0
    want = {(loop.schedule_step(i), layer) for i in range(3) for layer in range(len(loop.processors))}
    assert set(loop.masks.cache) == want
    counts, idx = loop.masks(loop.schedule_step(1), 0)  # a cache hit: the same tensors
    assert counts is loop.masks.cache[(loop.schedule_step(1), 0)][0] and idx.shape[-1] >= 1


def test_padded_text_is_refused():
    cfg, loop = _loop((2, 2, 2))
    loop.text_mask[0, -3:] = False
    with pytest.raises(NotImplementedError, match="padded text"):
        _predict(loop, DenseBackend(torch.device("cpu")))


def test_flex_backend_equals_token_level_masked_attention():
    """FlexAttention (CPU inductor) through the processor: tiny-hv's 272 tokens are 8 tiles of 32 + 16 text tokens,
    a ragged last block, padded to 288 by the backend with the padded keys masked out."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    from bench.model.backends import FlexBackend

    cfg, loop = _loop((1, 2, 1))
    ref = _predict(loop, MaskedSdpa(cfg.block))
    fb = FlexBackend(cfg.block)
    try:
        got = _predict(loop, fb)
    except Exception as ex:  # no C++ toolchain for inductor here
        if "Compile" in type(ex).__name__ or "Inductor" in type(ex).__name__:
            pytest.skip(f"FlexAttention does not compile on this CPU: {type(ex).__name__}")
        raise
    assert _rel(got, ref) < 1e-5
    assert "padded to 288" in fb.info()["ragged_tail"]
