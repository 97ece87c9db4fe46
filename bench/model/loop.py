"""The denoising loop: diffusers' WanTransformer3DModel with random weights, a timed attention processor per
self-attention layer, flow-matching Euler steps, and the agreement check (torch, on the GPU).

Timing (CUDA events on the current stream, read after each step's synchronisation), per self-attention call:
  layout    = gathering q, k, v into the block token order + scattering O back (sparse backends only)
  mask      = VSA's selection on the live q, k (pooling, block scores, top-k)
  convert   = the backend's own mask conversion / planning (Flex: BlockMask; FlashInfer: dense map + plan())
  kernel    = the backend's attention call after that (Tessera: the whole block_sparse_attention call)
  attention = convert + kernel
and per step the whole transformer forward plus the Euler update (step). rest = step - attention - mask - layout
(projections, RoPE, FFN, cross-attention, norms, AdaLN).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .backends import Backend
from .vsa import cube_token_order, index_lists_to_dense, vsa_topk


@dataclass(frozen=True)
class WanConfig:
    """A Wan2.1 text-to-video transformer geometry (diffusers WanTransformer3DModel arguments) at a resolution."""
    name: str
    heads: int
    ffn: int
    layers: int
    latent: Tuple[int, int, int]      # (frames, height, width) of the VAE latent, 16 channels
    head_dim: int = 128
    text_tokens: int = 512
    text_dim: int = 4096

    @property
    def grid(self) -> Tuple[int, int, int]:  # tokens after 1 x 2 x 2 patches
        return (self.latent[0], self.latent[1] // 2, self.latent[2] // 2)

    @property
    def tokens(self) -> int:
        return math.prod(self.grid)

    def model_kwargs(self, layers: int) -> Dict[str, Any]:
        return dict(patch_size=(1, 2, 2), num_attention_heads=self.heads, attention_head_dim=self.head_dim,
                    in_channels=16, out_channels=16, text_dim=self.text_dim, freq_dim=256, ffn_dim=self.ffn,
                    num_layers=layers, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6)


# Wan2.1 T2V: 14B (dim 5120) and 1.3B (dim 1536) configs of the released checkpoints; 720p = 1280 x 720 x 81 frames
# -> latent 21 x 90 x 160 (VAE 4 x 8 x 8) -> 21 x 45 x 80 = 75,600 tokens.
CONFIGS = {
    # CPU smoke runs of the harness only (head_dim 64: the CPU path supports Tessera's GPU head dims)
    "tiny": WanConfig("tiny", heads=2, ffn=256, layers=2, latent=(5, 16, 24), head_dim=64, text_tokens=16,
                      text_dim=64),
    "wan14b-720p": WanConfig("wan14b-720p", heads=40, ffn=13824, layers=40, latent=(21, 90, 160)),
    "wan1.3b-720p": WanConfig("wan1.3b-720p", heads=12, ffn=8960, layers=30, latent=(21, 90, 160)),
    "wan1.3b-480p": WanConfig("wan1.3b-480p", heads=12, ffn=8960, layers=30, latent=(21, 60, 104)),
}


def build_model(cfg: WanConfig, layers: int, device: torch.device, seed: int = 0):
    """WanTransformer3DModel from its config with random initialisation (diffusers' own init), bf16, parameters of
    the model's _keep_in_fp32_modules in float32 (as from_pretrained with torch_dtype=bfloat16 keeps them)."""
    from diffusers.models.transformers.transformer_wan import WanTransformer3DModel

    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = WanTransformer3DModel(**cfg.model_kwargs(layers))
    finally:
        torch.set_default_dtype(old)
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or [])
    for name, p in model.named_parameters():
        if keep & set(name.split(".")):
            p.data = p.data.float()
    return model.eval().requires_grad_(False)


def flow_sigmas(steps: int, shift: float = 5.0) -> List[float]:
    """Flow-matching sigmas of a `steps`-step schedule with Wan's shift (5.0 at 720p), from 1 towards 0, plus 0."""
    s = [1.0 - i / steps for i in range(steps)]
    return [shift * x / (1.0 + (shift - 1.0) * x) for x in s] + [0.0]


class _HostEvent:
    """A host-clock stand-in for a CUDA event (CPU smoke runs only: not a measurement)."""

    def __init__(self):
        self.t = time.perf_counter()

    def elapsed_time(self, other: "_HostEvent") -> float:
        return (other.t - self.t) * 1e3


class Recorder:
    """Events of one step: per attention call a dict name -> event, plus the step's start and end. CUDA events on
    the current stream (host clocks on a CPU device)."""

    def __init__(self, cuda: bool = True):
        self.cuda = cuda
        self.calls: List[Dict[str, Any]] = []
        self.step: Dict[str, Any] = {}

    def event(self):
        if not self.cuda:
            return _HostEvent()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def summary(self) -> Dict[str, float]:
        """Milliseconds summed over the step's calls (call after a synchronisation)."""
        def ms(c, a, b):
            return c[a].elapsed_time(c[b]) if a in c and b in c else 0.0

        out = {"layout_ms": 0.0, "mask_ms": 0.0, "convert_ms": 0.0, "kernel_ms": 0.0}
        for c in self.calls:
            out["layout_ms"] += ms(c, "start", "layout") + ms(c, "attention", "end")
            out["mask_ms"] += ms(c, "layout", "mask")
            out["convert_ms"] += ms(c, "mask", "kernel")
            out["kernel_ms"] += ms(c, "kernel", "attention")
        out["attention_ms"] = out["convert_ms"] + out["kernel_ms"]
        out["step_ms"] = self.step["start"].elapsed_time(self.step["end"])
        out["rest_ms"] = out["step_ms"] - out["attention_ms"] - out["mask_ms"] - out["layout_ms"]
        out["calls"] = len(self.calls)
        out["attention_ms_per_call"] = [round(ms(c, "mask", "attention"), 3) for c in self.calls]  # layer order
        return out


@dataclass
class Context:
    """What every layer's processor shares: the backend, the mask rule's settings, the recorder, the mask
    record/replay store and the reference checks to run."""
    backend: Backend
    block: int
    density: float
    recorder: Optional[Recorder] = None
    record: bool = False
    replay: bool = False
    masks: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # recorded this step
    replay_store: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # replayed
    check_layers: Sequence[int] = ()
    checks: List[Dict[str, Any]] = field(default_factory=list)
    step: int = 0


def timed_attention(ctx: Context, layer: int, q, k, v, orders, live_mask: Callable[[Backend, Any, Any], Any]):
    """One self-attention call through the run's backend, timed into ctx.recorder (events start, layout, mask, kernel,
    attention, end), with the masks recorded, replayed or computed live (`live_mask(backend, q_blocks, k_blocks)` ->
    (counts, indices)) and the fp32 check of the layers in ctx.check_layers. q, k, v [1, N, H, D] in the model's token
    order; orders = (perm, inverse) of the block token order; returns O [1, N, H, D] in the model's order."""
    be, rec = ctx.backend, ctx.recorder
    ev: Dict[str, Any] = {}

    def mark(name):
        if rec is not None:
            ev[name] = rec.event()

    mark("start")
    if be.sparse:
        qb, kb, vb = (be.gather(x, orders[0]) for x in (q, k, v))
        mark("layout")
        counts, idx = ctx.replay_store[layer] if ctx.replay else live_mask(be, qb, kb)
        if ctx.record:
            ctx.masks[layer] = (counts, idx)
        mark("mask")
        o = be.attend(qb, kb, vb, counts, idx, mark)
        mark("attention")
        if layer in ctx.check_layers:
            check_attention(ctx, layer, be.as_hnd(qb), be.as_hnd(kb), be.as_hnd(vb), o, idx)
        o = be.scatter(o, orders[1])
    else:
        mark("layout")
        mark("mask")
        o = be.attend(q, k, v, None, None, mark)
        mark("attention")
        if layer in ctx.check_layers:
            check_attention(ctx, layer, q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1), o, None)
    mark("end")
    if rec is not None:
        rec.calls.append(ev)
    if hasattr(be, "note_plan"):  # after the last event: host work outside the call's intervals
        be.note_plan()
    return o


def check_attention(ctx: Context, layer: int, qh, kh, vh, o, idx) -> None:
    """fp32 E(M) of sampled query rows of the first and last head against this call's output (idx None: every
    block active), appended to ctx.checks."""
    from bench.peers.gpu import Reference

    h, n = qh.shape[0], qh.shape[1]
    nb = -(-n // ctx.block)
    if idx is None:
        mask = torch.ones(h, nb, nb, dtype=torch.bool, device=qh.device)
    else:
        mask = index_lists_to_dense(idx[0], nb)
    ref = Reference(qh, kh, vh, mask, ctx.block, ctx.block, heads=[0, h - 1])
    err = ref.rel_l2(o[0].transpose(0, 1))
    ctx.checks.append({"step": ctx.step, "layer": layer, "rel_l2": err, "reference": ref.describe(),
                       "density": float(mask.float().mean())})


def make_processor_class():
    """The timed processor: tessera.attn_processor.TesseraAttnProcessor (the user-facing class: projections, RoPE,
    token order, output projection) with its attend() routed through the run's backend and timed, the masks VSA's
    top-k on the live q and k."""
    from tessera.attn_processor import TesseraAttnProcessor

    class BenchProcessor(TesseraAttnProcessor):
        def __init__(self, layer: int, ctx: Context, token_order):
            super().__init__(self._unused_mask_fn, ctx.block, token_order=token_order)
            self.layer, self.ctx = layer, ctx

        @staticmethod
        def _unused_mask_fn(q, k):
            raise AssertionError("BenchProcessor computes its masks in attend()")

        def attend(self, q, k, v):
            ctx = self.ctx
            orders = self.orders(q.shape[1], q.device) if ctx.backend.sparse else None
            return timed_attention(ctx, self.layer, q, k, v, orders, lambda be, qb, kb: vsa_topk(
                be.as_bshd(qb), be.as_bshd(kb), (ctx.block, ctx.block), ctx.density))

    return BenchProcessor


class Loop:
    """One model, its inputs and schedule; runs steps with a given backend."""

    def __init__(self, cfg: WanConfig, layers: int, device: torch.device, block: int, density: float,
                 schedule_steps: int = 50, seed: int = 0):
        from tessera.attn_processor import install_self_attention

        self.cfg, self.layers, self.device, self.block, self.density = cfg, layers, device, block, density
        t0 = time.perf_counter()
        self.model = build_model(cfg, layers, device, seed)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.build_s = time.perf_counter() - t0
        g = torch.Generator(device=device).manual_seed(seed + 1)
        f, hh, ww = cfg.latent
        self.x0 = torch.randn(1, 16, f, hh, ww, generator=g, device=device, dtype=torch.bfloat16)
        self.text = torch.randn(1, cfg.text_tokens, cfg.text_dim, generator=g, device=device, dtype=torch.bfloat16)
        self.sigmas = flow_sigmas(schedule_steps)
        self.order = torch.from_numpy(cube_token_order(cfg.grid))
        self.ctx = Context(backend=None, block=block, density=density)  # type: ignore[arg-type]
        cls = make_processor_class()
        self.processors = install_self_attention(self.model, lambda layer, name: cls(layer, self.ctx, self.order))

    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @torch.no_grad()
    def step(self, x: torch.Tensor, i: int, recorder: Optional[Recorder]) -> Tuple[torch.Tensor, torch.Tensor]:
        """Euler step i from latent x: returns (the model's prediction, the next latent)."""
        self.ctx.recorder, self.ctx.step = recorder, i
        if recorder is not None:
            recorder.step["start"] = recorder.event()
        t = torch.tensor([self.sigmas[i] * 1000.0], device=self.device)
        pred = self.model(x, t, self.text, return_dict=False)[0]
        x_next = (x.float() + (self.sigmas[i + 1] - self.sigmas[i]) * pred.float()).to(x.dtype)
        if recorder is not None:
            recorder.step["end"] = recorder.event()
        return pred, x_next
