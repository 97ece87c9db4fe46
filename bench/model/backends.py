"""The four attention backends of the model-level loop, behind one interface (torch; FlashInfer and Tessera optional).

Every sparse backend starts from the same input, VSA's index lists (counts [1, H, n_qb], indices [1, H, n_qb, K]
int32 on the GPU, bench/model/vsa.py), and q, k, v in the block token order, and does what its users do with them:

- tessera: `tessera.block_sparse_attention(q, k, v, ("index_lists", counts, indices, n_kvb), (64, 64))`, q [1, N, H, D]
  (the model's own layout after the head split), a new mask each call (mask_version 0: mu(M), selection, launch
  preparation and the kernels are all inside the call).
- flex: `torch.compile(flex_attention)` (one compiled function, dynamo's limits raised and a cache-limit hit made an
  error: bench/peers/systems.py `Flex`), q [1, H, N, D] views, a BlockMask built per call with
  `BlockMask.from_kv_blocks` from the index lists as full blocks (no mask_mod inside blocks), kv_indices padded to
  n_kvb columns, seq_lengths = (N, N) for the ragged tail, compute_q_blocks=False (forward only).
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

    def info(self) -> Dict[str, Any]:
        return {"kernel_options": self.kernel_options or "default", "form": f"{self.form} blocks",
                "form_note": self.form_note, "torch": torch.__version__}

    def gather(self, x, perm):
        return x.index_select(1, perm).transpose(1, 2)  # [1, H, N, D] view of a [1, N, H, D] gather

    def as_bshd(self, x):
        return x.transpose(1, 2)

    def block_mask(self, counts, idx, n: int):
        nb = -(-n // self.block)
        kv = torch.zeros(*idx.shape[:-1], nb, dtype=torch.int32, device=idx.device)
        kv[..., :idx.shape[-1]] = torch.sort(idx, dim=-1).values
        if self.form == "full":
            return self.flex.BlockMask.from_kv_blocks(torch.zeros_like(counts), kv, counts, kv,
                                                      BLOCK_SIZE=(self.block, self.block), seq_lengths=(n, n),
                                                      compute_q_blocks=False)
        return self.flex.BlockMask.from_kv_blocks(counts, kv, BLOCK_SIZE=(self.block, self.block), seq_lengths=(n, n),
                                                  compute_q_blocks=False)

    def attend(self, q, k, v, counts, idx, mark):
        self.calls += 1
        bm = self.block_mask(counts, idx, q.shape[2])
        mark("kernel")
        try:
            return self.fn(q, k, v, bm).transpose(1, 2)  # [1, N, H, D] view
        except Exception as ex:
            # Only the very first call may switch to partial blocks (the noop mask_mod applied inside them: the
            # same result, a little more work); recorded in info() and the JSON, never silent.
            if self.calls > 1 or self.form != "full":
                raise
            self.form = "partial"
            self.form_note = f"full blocks failed on the first call ({type(ex).__name__}: {str(ex)[:160]})"
            bm = self.block_mask(counts, idx, q.shape[2])
            return self.fn(q, k, v, bm).transpose(1, 2)


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
