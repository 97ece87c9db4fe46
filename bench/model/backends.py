"""The four attention backends of the model-level loop, behind one interface (torch; FlashInfer and Tessera optional).

Every sparse backend starts from the same input, VSA's index lists (counts [1, H, n_qb], indices [1, H, n_qb, K]
int32 on the GPU, bench/model/vsa.py), and q, k, v in the block token order, and does what its users do with them:

- tessera: `tessera.block_sparse_attention(q, k, v, ("index_lists", counts, indices, n_kvb), (64, 64))`, q [1, N, H, D]
  (the model's own layout after the head split), a new mask each call (mask_version 0: mu(M), selection, launch
  preparation and the kernels are all inside the call).
- flex: `torch.compile(flex_attention)` (one compiled function, dynamo's limits raised and a cache-limit hit made an
  error: bench/peers/systems.py `Flex`), q [1, H, N', D] views, a BlockMask built per call with
  `BlockMask.from_kv_blocks` from the index lists as full blocks (no mask_mod inside blocks), kv_indices padded to
  n_kvb columns, compute_q_blocks=False (forward only). A ragged N (not a whole number of blocks) is padded to
  N' = n_kvb * block rows in the gather (no extra copy) and the ragged last block is listed as a partial block whose
  mask_mod drops the padded keys: FlexAttention's Triton kernel walks every tile of every listed block, and torch
  releases that decide "no bounds checks" from N % 128 alone (before `can_skip_boundary_checks`; the GPU image's 2.11
  by the evidence of its run) read past the tensors' end when a block is larger than the kernel tile and N is a
  multiple of 128 but not of the block (HunyuanVideo 768p: N = 115,456 = 902 x 128 = 300 x 384 + 256). See
  FlexBackend.
- flashinfer: `VariableBlockSparseAttentionWrapper`, plan() per call from the dense [H, n_qb, n_kvb] block mask
  (the index lists scattered) with 64-token rows and columns and a short last block, run() on q [H, N, D].
- dense: `scaled_dot_product_attention` with only `SDPBackend.CUDNN_ATTENTION`, on [1, H, N, D] views in the model's
  raster order: no mask, no token permutation.

`attend(q, k, v, counts, idx, mark)` returns O [1, N, H, D] in the block order (any strides); `mark(name)` records a
CUDA event at the boundary between the backend's mask conversion / planning and its kernel ("kernel").
`gather(x, perm)` puts q, k or v [1, N, H, D] (model order) into the layout the backend takes, in the block order;
`scatter(o, inv)` returns O [1, N, H, D] in the model order.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, Optional

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

Mark = Callable[[str], None]
BACKENDS = ("tessera", "flex", "flashinfer", "dense")


class Backend:
    name = "?"
    sparse = True
    layout = "bshd"  # what gather() produces: "bshd" [1, N, H, D] or "hnd" [H, N, D]

    def info(self) -> Dict[str, Any]:
        return {}

    def gather(self, x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
        return x.index_select(1, perm)

    def scatter(self, o: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
        return o.index_select(1, inv)

    def as_bshd(self, x: torch.Tensor) -> torch.Tensor:
        """A [1, N, H, D] view of a tensor in this backend's layout (for the mask rule)."""
        return x

    def as_hnd(self, x: torch.Tensor) -> torch.Tensor:
        """An [H, N, D] view of a tensor in this backend's layout (for the reference check)."""
        return self.as_bshd(x)[0].transpose(0, 1)

    def attend(self, q, k, v, counts, idx, mark: Mark) -> torch.Tensor:
        raise NotImplementedError


class TesseraBackend(Backend):
    name = "tessera"

    def __init__(self, block: int, device: torch.device, module_dir: Optional[str] = None):
        for p in (module_dir, os.path.join(REPO, "python")):
            if p and p not in sys.path:
                sys.path.insert(0, p)
        import tessera
        from tessera import api

        native = api._C()
        if device.type == "cuda" and not native.has_cuda():
            raise RuntimeError(f"tessera._C at {native.__file__} was built without the GPU runtime")
        self.t, self.block = tessera, block
        self._info = {"module": native.__file__, "version": getattr(native, "version", lambda: "?")(),
                      "git_revision": getattr(native, "git_revision", lambda: "?")()}
        self.plans: Dict[str, int] = {}

    def info(self) -> Dict[str, Any]:
        return dict(self._info, plans=dict(self.plans))

    def attend(self, q, k, v, counts, idx, mark):
        mark("kernel")
        o = self.t.block_sparse_attention(q, k, v, ("index_lists", counts, idx, int(self.n_kvb(k))),
                                          (self.block, self.block))
        return o

    def note_plan(self) -> None:
        pid = self.t.last_dispatch().get("plan_id", "?")
        self.plans[pid] = self.plans.get(pid, 0) + 1

    def n_kvb(self, k) -> int:
        return -(-k.shape[1] // self.block)


class FlexBackend(Backend):
    """FlexAttention on the index lists. Ragged sequences: gather() pads the block order with n_pad - N rows (copies
    of a real token, so finite) up to a whole number of blocks; block_mask() lists the last block (the only one that
    holds padded keys) as a partial block with mask_mod kv_idx < N, every other listed block as full; attend() drops
    the padded query rows. Without the padding, a 384-token block over a kernel tile of 128 and N = 902 x 128 (not a
    multiple of 384) let the kernel skip its bounds checks (IS_DIVISIBLE from N % 128 == 0 in torch's lowering
    before can_skip_boundary_checks) and read the last block's third tile, 128 rows past the end of k and v, into
    every row that lists the text block: the HunyuanVideo 768p run's (torch 2.11) 3.5x larger layer-0 error and
    non-finite layer-59 check (bench/model/README.md)."""
    name = "flex"

    def __init__(self, block: int):
        from bench.peers.systems import Flex

        self.flex = Flex(timer=None)  # dynamo's cache / recompile limits raised, a limit hit is an error
        self.block = block
        # the kernel's tiles: the block itself up to 128 tokens; larger blocks (STA's 384) with the default tiles,
        # which divide them (as bench/peers runs the STA workloads)
        self.kernel_options = {"BLOCK_M": block, "BLOCK_N": block} if block <= 128 else {}
        self.fn = self.flex.compiled(self.kernel_options)
        self.form = "full"            # blocks listed as full (no mask_mod inside them), as bench/peers does
        self.form_note: Optional[str] = None
        self.calls = 0
        self.n: Optional[int] = None  # real tokens of the last gather (its tensors hold padded_len(n) rows)
        self._perm: Optional[tuple] = None  # (perm, padded perm) of the last gather

    def padded_len(self, n: int) -> int:
        return -(-n // self.block) * self.block

    def info(self) -> Dict[str, Any]:
        pad = None
        if self.n is not None and self.padded_len(self.n) != self.n:
            pad = (f"N = {self.n} padded to {self.padded_len(self.n)} (whole {self.block}-token blocks); the last "
                   f"block partial with mask_mod kv_idx < {self.n}")
        return {"kernel_options": self.kernel_options or "default", "form": f"{self.form} blocks",
                "form_note": self.form_note, "ragged_tail": pad, "torch": torch.__version__}

    def gather(self, x, perm):
        """[1, H, n_pad, D] view of a [1, n_pad, H, D] gather: the block order, then the padding rows."""
        n = perm.numel()
        self.n = n
        if self.padded_len(n) != n:
            if self._perm is None or self._perm[0] is not perm:
                fill = perm[:1].expand(self.padded_len(n) - n)  # any real token: finite, masked out as a key
                self._perm = (perm, torch.cat([perm, fill]))
            perm = self._perm[1]
        return x.index_select(1, perm).transpose(1, 2)

    def real_len(self, x) -> int:
        """Rows of x that are real tokens: the last gather's N when x has that gather's padded length, else all."""
        rows = x.shape[2]
        if self.n is not None and rows != self.n and rows == self.padded_len(self.n):
            return self.n
        return rows

    def as_bshd(self, x):
        return x[:, :, :self.real_len(x)].transpose(1, 2)

    def block_mask(self, counts, idx, n: int):
        """BlockMask of the index lists for n real tokens (tensors of padded_len(n) rows)."""
        nb, k = -(-n // self.block), idx.shape[-1]
        n_pad = nb * self.block
        # each row's listed blocks ascending (entries past the count sort last, whatever block they repeat), so a row
        # that lists the last block has it at position count - 1
        real = torch.arange(k, device=idx.device) < counts.unsqueeze(-1)
        srt = torch.sort(torch.where(real, idx, torch.full_like(idx, nb)), dim=-1).values.clamp_(max=nb - 1)
        kv = torch.zeros(*idx.shape[:-1], nb, dtype=torch.int32, device=idx.device)
        kv[..., :k] = srt
        bs = (self.block, self.block)
        if n_pad == n:
            if self.form == "full":
                return self.flex.BlockMask.from_kv_blocks(torch.zeros_like(counts), kv, counts, kv, BLOCK_SIZE=bs,
                                                          seq_lengths=(n, n), compute_q_blocks=False)
            return self.flex.BlockMask.from_kv_blocks(counts, kv, BLOCK_SIZE=bs, seq_lengths=(n, n),
                                                      compute_q_blocks=False)
        mm = self.flex.kv_below(n)  # one function per N (a new closure every call would be a new guard)
        if self.form == "full":
            at = (counts.long() - 1).clamp(min=0).unsqueeze(-1)
            has_last = ((kv.gather(-1, at).squeeze(-1) == nb - 1) & (counts > 0)).to(torch.int32)
            part = torch.zeros_like(kv)
            part[..., 0] = nb - 1
            return self.flex.BlockMask.from_kv_blocks(has_last, part, counts - has_last, kv, BLOCK_SIZE=bs,
                                                      mask_mod=mm, seq_lengths=(n_pad, n_pad), compute_q_blocks=False)
        return self.flex.BlockMask.from_kv_blocks(counts, kv, BLOCK_SIZE=bs, mask_mod=mm, seq_lengths=(n_pad, n_pad),
                                                  compute_q_blocks=False)

    def attend(self, q, k, v, counts, idx, mark):
        self.calls += 1
        n = self.real_len(q)
        if q.shape[2] != self.padded_len(n):  # not from gather(): pad here (a copy; zeros, masked out as keys)
            q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, self.padded_len(n) - n)) for x in (q, k, v))
        bm = self.block_mask(counts, idx, n)
        mark("kernel")
        try:
            return self.fn(q, k, v, bm)[:, :, :n].transpose(1, 2)  # [1, N, H, D] view
        except Exception as ex:
            # Only the very first call may switch to partial blocks (the mask_mod applied inside every block: the
            # same result, a little more work); recorded in info() and the JSON, never silent.
            if self.calls > 1 or self.form != "full":
                raise
            self.form = "partial"
            self.form_note = f"full blocks failed on the first call ({type(ex).__name__}: {str(ex)[:160]})"
            bm = self.block_mask(counts, idx, n)
            return self.fn(q, k, v, bm)[:, :, :n].transpose(1, 2)


class FlashInferBackend(Backend):
    name = "flashinfer"
    layout = "hnd"

    def __init__(self, block: int, device: torch.device, jit_timeout_s: float):
        from bench.peers.systems import FlashInfer

        self.fi = FlashInfer(device, timer=None, head_dim=128, jit_timeout_s=jit_timeout_s)
        self.w = self.fi._wrapper(self.fi.VAR)
        self.block = block
        self._sizes: Dict[Any, Any] = {}

    def info(self) -> Dict[str, Any]:
        return {"version": self.fi.version, "jit": self.fi.jit, "wrapper": "VariableBlockSparseAttentionWrapper",
                "backend": getattr(self.w, "_backend", None)}

    def gather(self, x, perm):
        return torch.index_select(x[0].transpose(0, 1), 1, perm)  # [H, N, D] contiguous

    def as_bshd(self, x):
        return x.transpose(0, 1).unsqueeze(0)

    def sizes(self, h: int, n: int, device):
        key = (h, n, device)
        if key not in self._sizes:
            nb = -(-n // self.block)
            row = torch.full((h, nb), self.block, dtype=torch.int32, device=device)
            row[:, -1] = n - self.block * (nb - 1)
            self._sizes[key] = row
        return self._sizes[key]

    def attend(self, q, k, v, counts, idx, mark):
        from .vsa import index_lists_to_dense

        h, n, d = q.shape
        sz = self.sizes(h, n, q.device)
        dense = index_lists_to_dense(idx[0], sz.shape[1])
        self.w.plan(dense, sz, sz, h, h, d, q_data_type=q.dtype, kv_data_type=k.dtype)
        mark("kernel")
        return self.w.run(q, k, v).transpose(0, 1).unsqueeze(0)  # [1, N, H, D] view


class DenseBackend(Backend):
    name = "dense"
    sparse = False

    def __init__(self, device: torch.device):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        # cuDNN only on the GPU; a CPU smoke run has no cuDNN and says so in info()
        self.which = SDPBackend.CUDNN_ATTENTION if device.type == "cuda" else SDPBackend.MATH
        self.ctx = lambda: sdpa_kernel([self.which])

        self.copies: Optional[str] = None  # why the inputs are copied (cuDNN refused the strided views)

    def info(self) -> Dict[str, Any]:
        return {"sdpa_backend": f"{self.which.name} only",
                "inputs": f"contiguous [1, H, N, D] copies: {self.copies}" if self.copies else
                          "[1, H, N, D] views of the model's [1, N, H, D] (as diffusers passes them)"}

    def attend(self, q, k, v, counts, idx, mark):
        sdpa = torch.nn.functional.scaled_dot_product_attention
        args = [x.transpose(1, 2) for x in (q, k, v)]
        if self.copies:
            args = [x.contiguous() for x in args]
        mark("kernel")
        with self.ctx():
            try:
                o = sdpa(*args)
            except RuntimeError as ex:  # said in info() and in the JSON, never silent
                if self.copies:
                    raise
                self.copies = f"{type(ex).__name__}: {str(ex)[:160]}"
                o = sdpa(*[x.contiguous() for x in args])
        return o.transpose(1, 2)


def make_backend(name: str, block: int, device: torch.device, jit_timeout_s: float = 300.0,
                 tessera_module_dir: Optional[str] = None) -> Backend:
    if name == "tessera":
        return TesseraBackend(block, device, tessera_module_dir)
    if name == "flex":
        return FlexBackend(block)
    if name == "flashinfer":
        return FlashInferBackend(block, device, jit_timeout_s)
    if name == "dense":
        return DenseBackend(device)
    raise ValueError(f"backend: unknown {name!r} (one of {', '.join(BACKENDS)})")
