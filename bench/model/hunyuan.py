"""HunyuanVideo text-to-video at 768p with the real Sliding Tile Attention masks (issue 20, the second model): diffusers'
HunyuanVideoTransformer3DModel with random weights, every block's joint (video + text) attention through the run's
backend, the STA mask of (denoising step, layer, head) from FastVideo's table (corpus/data).

Geometry: 768 x 1280 x 117 frames -> latent 30 x 96 x 160 (VAE 4 x 8 x 8) -> 30 x 48 x 80 = 115,200 video tokens after
1 x 2 x 2 patches = 5 x 6 x 10 STA tiles of 6 x 8 x 8 tokens (384); 256 text tokens; 20 dual-stream + 40 single-stream
blocks (the table's 60 layers, in that order), 24 heads x 128.

Joint attention as STA runs it: the video tokens in tile-major order (bench/model/sta.py), the text tokens after them,
and one block mask over the joint sequence with 384-token blocks: video tile q attends video tile j iff j lies in q's
window (the table's rule, bench/peers/workloads.py sta_head_mask), every video tile attends the text block, the text
block attends everything. The last block is the 256 text tokens (a ragged block), so E(M) of that mask is exactly the
model's joint attention restricted by STA; one call per backend computes it (the LSE merge of a separate dense text
part, tessera.attn_processor.merge_attention_lse, gives the same result with two calls). The dense backend runs the
model's own joint SDPA (cuDNN), unmasked, in the model's token order.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from .loop import Context, Recorder, flow_sigmas, timed_attention
from .sta import joint_mask, sta_token_order


@dataclass(frozen=True)
class HunyuanConfig:
    """A HunyuanVideo transformer geometry (diffusers HunyuanVideoTransformer3DModel arguments) at a resolution."""
    name: str
    heads: int
    dual_layers: int
    single_layers: int
    latent: Tuple[int, int, int]      # (frames, height, width) of the VAE latent, 16 channels
    tile: Tuple[int, int, int] = (6, 8, 8)  # STA tile in tokens (after patching)
    window: Optional[Tuple[int, int, int]] = None  # None: the real table's windows; else one window for every head
    head_dim: int = 128
    text_tokens: int = 256
    text_dim: int = 4096
    pooled_dim: int = 768
    refiner_layers: int = 2
    first_step: int = 20              # schedule step of the loop's step 0 (STA keeps steps 0-14 dense)

    @property
    def grid(self) -> Tuple[int, int, int]:  # tokens after 1 x 2 x 2 patches
        return (self.latent[0], self.latent[1] // 2, self.latent[2] // 2)

    @property
    def video_tokens(self) -> int:
        return math.prod(self.grid)

    @property
    def tokens(self) -> int:  # the joint sequence of every attention call
        return self.video_tokens + self.text_tokens

    @property
    def layers(self) -> int:
        return self.dual_layers + self.single_layers

    @property
    def ffn(self) -> int:
        return 4 * self.heads * self.head_dim

    @property
    def block(self) -> int:
        return math.prod(self.tile)

    @property
    def tile_grid(self) -> Tuple[int, int, int]:
        return tuple(g // t for g, t in zip(self.grid, self.tile))

    def model_kwargs(self, layers: int) -> Dict[str, Any]:
        dual = min(layers, self.dual_layers)
        return dict(in_channels=16, out_channels=16, num_attention_heads=self.heads, attention_head_dim=self.head_dim,
                    num_layers=dual, num_single_layers=layers - dual, num_refiner_layers=self.refiner_layers,
                    mlp_ratio=4.0, patch_size=2, patch_size_t=1, qk_norm="rms_norm", guidance_embeds=True,
                    text_embed_dim=self.text_dim, pooled_projection_dim=self.pooled_dim, rope_theta=256.0,
                    rope_axes_dim=(self.head_dim // 8, 7 * self.head_dim // 16, 7 * self.head_dim // 16))


HUNYUAN_CONFIGS = {
    # CPU smoke runs only: 2 x 2 x 2 tiles of 2 x 4 x 4 tokens, one window for every head, head_dim 64
    "tiny-hv": HunyuanConfig("tiny-hv", heads=2, dual_layers=1, single_layers=1, latent=(4, 16, 16), tile=(2, 4, 4),
                             window=(1, 2, 1), head_dim=64, text_tokens=16, text_dim=64, pooled_dim=32,
                             refiner_layers=1),
    "hunyuan-768p": HunyuanConfig("hunyuan-768p", heads=24, dual_layers=20, single_layers=40, latent=(30, 96, 160)),
}


class StaMasks:
    """Index lists (counts [1, H, nb], indices [1, H, nb, K] int32, on the device) of the joint STA mask of every
    (schedule step, layer), built on first use: the real table's windows, or the config's one window."""

    def __init__(self, cfg: HunyuanConfig, device: torch.device):
        from bench.peers.workloads import load_sta_table

        self.cfg, self.device = cfg, device
        self.table = load_sta_table() if cfg.window is None else None
        self.cache: Dict[Tuple[int, int], Tuple[torch.Tensor, torch.Tensor]] = {}

    def windows(self, step: int, layer: int):
        if self.table is None:
            return [self.cfg.window] * self.cfg.heads
        return [tuple(self.table[f"{step}_{layer}_{h}"]) for h in range(self.cfg.heads)]

    def dense(self, step: int, layer: int) -> np.ndarray:
        """[H, nb, nb] bool joint mask (video tiles, then the text block)."""
        return joint_mask(self.windows(step, layer), self.cfg.tile_grid, self.cfg.text_tokens > 0)

    def __call__(self, step: int, layer: int) -> Tuple[torch.Tensor, torch.Tensor]:
        key = (step, layer)
        if key not in self.cache:
            m = torch.from_numpy(self.dense(step, layer))
            counts = m.sum(-1).to(torch.int32)
            k = int(counts.max())
            idx = torch.argsort((~m).to(torch.int8), dim=-1, stable=True)[..., :k].to(torch.int32)
            # rows with fewer than k blocks (edge tiles): repeat their last block (the count says how many are real)
            pos = torch.arange(k).view(1, 1, k)
            last = idx.gather(-1, (counts.long() - 1).clamp(min=0).unsqueeze(-1))
            idx = torch.where(pos < counts.unsqueeze(-1), idx, last)
            self.cache[key] = (counts.unsqueeze(0).to(self.device), idx.unsqueeze(0).contiguous().to(self.device))
        return self.cache[key]


def build_hunyuan(cfg: HunyuanConfig, layers: int, device: torch.device, seed: int = 0):
    """HunyuanVideoTransformer3DModel from its config with random initialisation (diffusers' own), bf16 (float32 on a
    CPU smoke run)."""
    from diffusers.models.transformers.transformer_hunyuan_video import HunyuanVideoTransformer3DModel

    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = HunyuanVideoTransformer3DModel(**cfg.model_kwargs(layers))
    finally:
        torch.set_default_dtype(old)
    return model.eval().requires_grad_(False)


def make_hunyuan_processor_class():
    """The timed joint-attention processor of HunyuanVideo's dual- and single-stream blocks: diffusers'
    HunyuanVideoAttnProcessor2_0 steps (projections, QK norms, RoPE on the video part, the text stream's projections,
    the joint sequence, output projections) with its attention routed through the run's backend on the STA mask."""
    from diffusers.models.embeddings import apply_rotary_emb

    class HunyuanSTAProcessor:
        def __init__(self, layer: int, ctx: Context, masks: StaMasks, orders: Tuple[torch.Tensor, torch.Tensor]):
            self.layer, self.ctx, self.masks, self.orders = layer, ctx, masks, orders
            self._mask_checked = False

        def _check_attention_mask(self, attention_mask) -> None:
            if attention_mask is not None and not self._mask_checked:
                if not bool(attention_mask.all()):
                    raise NotImplementedError("padded text tokens (encoder_attention_mask with zeros) are not "
                                              "supported by this benchmark's processor")
                self._mask_checked = True

        def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                     image_rotary_emb=None):
            self._check_attention_mask(attention_mask)
            if attn.add_q_proj is None and encoder_hidden_states is not None:
                hidden_states = torch.cat([hidden_states, encoder_hidden_states], dim=1)
            q = attn.to_q(hidden_states).unflatten(2, (attn.heads, -1))
            k = attn.to_k(hidden_states).unflatten(2, (attn.heads, -1))
            v = attn.to_v(hidden_states).unflatten(2, (attn.heads, -1))
            if attn.norm_q is not None:
                q = attn.norm_q(q)
            if attn.norm_k is not None:
                k = attn.norm_k(k)
            if image_rotary_emb is not None:
                if attn.add_q_proj is None and encoder_hidden_states is not None:
                    nt = encoder_hidden_states.shape[1]
                    q = torch.cat([apply_rotary_emb(q[:, :-nt], image_rotary_emb, sequence_dim=1), q[:, -nt:]], 1)
                    k = torch.cat([apply_rotary_emb(k[:, :-nt], image_rotary_emb, sequence_dim=1), k[:, -nt:]], 1)
                else:
                    q = apply_rotary_emb(q, image_rotary_emb, sequence_dim=1)
                    k = apply_rotary_emb(k, image_rotary_emb, sequence_dim=1)
            if attn.add_q_proj is not None and encoder_hidden_states is not None:
                eq = attn.add_q_proj(encoder_hidden_states).unflatten(2, (attn.heads, -1))
                ek = attn.add_k_proj(encoder_hidden_states).unflatten(2, (attn.heads, -1))
                ev = attn.add_v_proj(encoder_hidden_states).unflatten(2, (attn.heads, -1))
                if attn.norm_added_q is not None:
                    eq = attn.norm_added_q(eq)
                if attn.norm_added_k is not None:
                    ek = attn.norm_added_k(ek)
                q, k, v = torch.cat([q, eq], 1), torch.cat([k, ek], 1), torch.cat([v, ev], 1)
            o = self.attend(q, k, v)  # [1, N, H, D], model order
            o = o.flatten(2, 3).to(q.dtype)
            if encoder_hidden_states is not None:
                nt = encoder_hidden_states.shape[1]
                o, enc = o[:, :-nt], o[:, -nt:]
                if getattr(attn, "to_out", None) is not None:
                    o = attn.to_out[1](attn.to_out[0](o))
                if getattr(attn, "to_add_out", None) is not None:
                    enc = attn.to_add_out(enc)
                return o, enc
            return o

        def attend(self, q, k, v):
            return timed_attention(self.ctx, self.layer, q, k, v, self.orders,
                                   lambda be, qb, kb: self.masks(self.ctx.step, self.layer))

    return HunyuanSTAProcessor


class HunyuanLoop:
    """The HunyuanVideo model, its inputs and schedule (the interface of loop.Loop that bench/model/run.py uses)."""

    def __init__(self, cfg: HunyuanConfig, layers: int, device: torch.device, block: int, density: float,
                 schedule_steps: int = 50, seed: int = 0):
        if block != cfg.block:
            raise ValueError(f"block: STA's tile is {cfg.block} tokens for {cfg.name}, not {block}")
        self.cfg, self.layers, self.device, self.block = cfg, layers, device, block
        t0 = time.perf_counter()
        self.model = build_hunyuan(cfg, layers, device, seed)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.build_s = time.perf_counter() - t0
        dtype = next(self.model.parameters()).dtype
        g = torch.Generator(device=device).manual_seed(seed + 1)
        f, hh, ww = cfg.latent
        self.x0 = torch.randn(1, 16, f, hh, ww, generator=g, device=device, dtype=dtype)
        self.text = torch.randn(1, cfg.text_tokens, cfg.text_dim, generator=g, device=device, dtype=dtype)
        self.text_mask = torch.ones(1, cfg.text_tokens, dtype=torch.bool, device=device)
        self.pooled = torch.randn(1, cfg.pooled_dim, generator=g, device=device, dtype=dtype)
        self.guidance = torch.tensor([6.0 * 1000.0], device=device, dtype=dtype)
        self.sigmas = flow_sigmas(schedule_steps, shift=7.0)
        perm = sta_token_order(cfg.grid, cfg.tile)
        joint = np.concatenate([perm, np.arange(cfg.video_tokens, cfg.tokens)])
        inv = np.empty_like(joint)
        inv[joint] = np.arange(joint.size)
        self.order = (torch.from_numpy(joint).to(device), torch.from_numpy(inv).to(device))
        self.ctx = Context(backend=None, block=block, density=0.0)  # type: ignore[arg-type]
        self.masks = StaMasks(cfg, device)
        cls = make_hunyuan_processor_class()
        blocks = list(self.model.transformer_blocks) + list(self.model.single_transformer_blocks)
        self.processors = []
        for layer, blk in enumerate(blocks):
            p = cls(layer, self.ctx, self.masks, self.order)
            blk.attn.set_processor(p)
            self.processors.append(p)

    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def schedule_step(self, i: int) -> int:
        return self.cfg.first_step + i

    def prepare_masks(self, steps: int) -> float:
        """Builds the STA index lists of loop steps 0..steps for every layer before any backend is timed, and returns
        the seconds it took. STA's windows are fixed per (schedule step, layer), so a deployment builds them ahead;
        built on first use instead, they were charged to whichever backend ran first (Tessera's "mask" interval: 180
        ms a step in the session-13 HunyuanVideo run, 0.1 ms for the backends after it)."""
        t0 = time.perf_counter()
        for i in range(steps + 1):
            for layer in range(len(self.processors)):
                self.masks(self.schedule_step(i), layer)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - t0

    @torch.no_grad()
    def step(self, x: torch.Tensor, i: int, recorder: Optional[Recorder]) -> Tuple[torch.Tensor, torch.Tensor]:
        """Euler step i (schedule step first_step + i; the STA masks of that step) from latent x."""
        s = self.schedule_step(i)
        self.ctx.recorder, self.ctx.step = recorder, s
        if recorder is not None:
            recorder.step["start"] = recorder.event()
        t = torch.tensor([self.sigmas[s] * 1000.0], device=self.device, dtype=x.dtype)
        pred = self.model(x, t, self.text, self.text_mask, self.pooled, guidance=self.guidance, return_dict=False)[0]
        x_next = (x.float() + (self.sigmas[s + 1] - self.sigmas[s]) * pred.float()).to(x.dtype)
        if recorder is not None:
            recorder.step["end"] = recorder.event()
        return pred, x_next
