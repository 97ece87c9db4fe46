"""tessera.block_sparse_attention and tessera.explain.

The call computes E(M) (DESIGN.md section 1): for query token i of batch b and head h,
O[b,i,h] = sum_{j in S(i)} softmax_j(scale * q_i . k_j) v_j over the kv tokens j whose logical block is active in
M[b, h, i // B_Q, j // B_KV]; LSE[b,h,i] = ln sum_{j in S(i)} exp(scale * q_i . k_j). A query token with no active
block gets O = 0 and LSE = -inf.

- CUDA torch tensors run the GPU runtime on the caller's current CUDA stream (torch.cuda.current_stream()).
- CPU tensors (numpy arrays or torch CPU tensors) run the CPU plan executor (float64, exact; slow).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Optional

import numpy as np

from . import _arrays, plan_tables
from .converters import KIND_CODES, MaskSpec, _pair, to_mask_spec  # noqa: F401 (MaskSpec used by ops)
from .errors import TesseraError, TesseraUnsupportedError

__all__ = ["block_sparse_attention", "explain", "last_dispatch"]

_CPU_ARCH = "sm90a"
_last_cpu: Optional[Dict[str, Any]] = None
_last_device: Optional[int] = None  # CUDA device of the last GPU call, None when the last call ran on the CPU
_native = None
_ops = None  # tessera.ops once torch is in use (registers torch.ops.tessera.block_sparse_attention)


def _load_ops():
    global _ops
    from . import ops

    _ops = ops
    return ops


def _C():
    """The native module, imported on first use (so that `import tessera` works for converters alone)."""
    global _native
    if _native is None:
        try:
            from . import _C as native
        except ImportError as e:
            raise TesseraUnsupportedError("", f"the native module tessera._C is not built or not on the path ({e}); "
                                              "see docs/python.md") from e
        _native = native
    return _native


_dlpack_fn = None
_raw_stream_fn = None


def _to_dlpack():
    global _dlpack_fn
    if _dlpack_fn is None:
        from torch.utils.dlpack import to_dlpack

        _dlpack_fn = to_dlpack
    return _dlpack_fn


def _current_stream(device: int) -> int:
    """The caller's current CUDA stream on `device` as an integer (cudaStream_t)."""
    global _raw_stream_fn
    if _raw_stream_fn is None:
        torch = _arrays.torch_module()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Inductor's generated code uses
        _raw_stream_fn = raw if raw is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)
    return _raw_stream_fn(device)


def _check_block_size_range(bq, bkv):
    """Python ints that do not fit the native int (2**40, 2**63) would leak a TypeError from the binding."""
    for x in (bq, bkv):
        if not -2**31 <= x < 2**31:
            raise TesseraError("block_size", f"{x} is out of range: B_Q and B_KV are multiples of 16 in [16, 1024]")


def _block_sizes(block_size, spec: MaskSpec):
    if type(block_size) is int and spec.block_size is None:
        if not -2**31 <= block_size < 2**31:
            _check_block_size_range(block_size, block_size)
        return block_size, block_size  # range checked by the native validation (geometry.block_q / block_kv)
    if block_size is None:
        if spec.block_size is None:
            raise TesseraError("block_size", "required (the mask does not carry its block size)")
        return spec.block_size
    bq, bkv = _pair(block_size, "block_size")
    _check_block_size_range(bq, bkv)
    if spec.block_size is not None and (bq, bkv) != tuple(spec.block_size):
        raise TesseraError("block_size", f"({bq}, {bkv}) differs from the block size {tuple(spec.block_size)} the "
                                         "mask was built for")
    return bq, bkv


def _check_qkv(q, k, v, layout: str):
    if layout != "bshd" and layout != "bhsd":
        raise TesseraError("layout", f"expected 'bshd' ([B, N, H, D]) or 'bhsd' ([B, H, N, D]), got {layout!r}")
    t = _arrays._torch
    if t is not None and isinstance(q, t.Tensor) and isinstance(k, t.Tensor) and isinstance(v, t.Tensor) \
            and q.dim() == 4 and k.dim() == 4 and v.dim() == 4:
        return True  # the common torch case, kept cheap; anything else gets the detailed checks below
    torch_in = _arrays.is_torch(q)
    if not torch_in and not _arrays.is_numpy(q):
        raise TesseraError("q", f"expected a torch tensor or numpy array, got {type(q).__name__}")
    for name, x in (("k", k), ("v", v)):
        if _arrays.is_torch(x) != torch_in or not _arrays.is_array(x):
            raise TesseraError(name, f"must be the same kind of array as q ({type(q).__name__}), got {type(x).__name__}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not torch_in and not x.dtype.isnative:
            raise TesseraError(name, f"byte order of dtype {x.dtype.str} is not the machine's: convert with "
                                     f".astype(x.dtype.newbyteorder('='))")
        if x.ndim != 4:
            dims = "[B, N, H, D]" if layout == "bshd" else "[B, H, N, D]"
            raise TesseraError(name, f"expected rank 4 {dims} (layout '{layout}'), got shape {tuple(x.shape)}")
    return torch_in


_CPU_NUMPY_DTYPES = ("float16", "float32", "float64")
_CPU_TORCH_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _check_cpu_dtypes(q, k, v, torch_in: bool):
    """Device and dtype checks before the native call: meta (and other non-CPU, non-CUDA) torch tensors have no data
    to read; the CPU path accepts numpy f16/f32/f64 and torch f16/bf16/f32/f64 (the GPU path checks its own)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if torch_in:
            _check_torch_storage(x, name)
            if x.device.type == "cpu" and _arrays.dtype_name(x) not in _CPU_TORCH_DTYPES:
                raise TesseraError(name, f"dtype {_arrays.dtype_name(x)} is not supported on the CPU path: expected "
                                         "float16, bfloat16, float32 or float64")
        elif x.dtype.name not in _CPU_NUMPY_DTYPES:
            raise TesseraError(name, f"dtype {x.dtype.name} is not supported for numpy arrays (CPU path): expected "
                                     "float16, float32 or float64")


def _check_torch_storage(x, argument: str):
    """A torch tensor Tessera reads must be dense (strided) and on the CPU or a CUDA device (meta tensors carry no
    data). Raises TesseraError(argument)."""
    if x.layout is not _arrays._torch.strided:
        raise TesseraError(argument, f"sparse tensors ({x.layout}) are not supported: pass a dense (strided) tensor")
    if x.device.type not in ("cpu", "cuda"):
        raise TesseraError(argument, f"tensors on device '{x.device.type}' are not supported (CPU or CUDA only); "
                                     "meta tensors carry no data")


def _check_mask_arrays(spec: MaskSpec):
    """The mask's torch tensors: as _check_torch_storage (argument "block_mask"); whether their device matches q's
    is checked by the native call."""
    for x in (spec.m0, spec.m1):
        if _arrays.is_torch(x):
            _check_torch_storage(x, "block_mask")


def _to_bnhd(x, torch_in: bool):
    """[B, H, N, D] -> [B, N, H, D] view (no copy)."""
    return x.transpose(1, 2) if torch_in else np.swapaxes(x, 1, 2)


def _scale_value(scale) -> float:
    """scale as a float: Python/numpy reals (numbers.Real: int, float, Fraction, numpy scalars), 0-d numpy arrays and
    0-d CPU torch float tensors; not bool or str."""
    ok = isinstance(scale, (numbers.Real, np.integer, np.floating)) and not isinstance(scale, (bool, np.bool_))
    ok = ok or (_arrays.is_numpy(scale) and scale.shape == () and scale.dtype.kind in "fiu")
    ok = ok or (_arrays.is_torch(scale) and scale.dim() == 0 and not scale.is_cuda and scale.dtype.is_floating_point)
    if not ok:
        shape = f" of shape {tuple(scale.shape)}" if _arrays.is_array(scale) else ""
        raise TesseraError("scale", f"expected a real number or None, got {type(scale).__name__}{shape}: "
                                    f"{scale!r}"[:200])
    try:
        return float(scale)
    except OverflowError:
        what = f"an integer of {len(str(abs(scale)))} digits" if isinstance(scale, int) else repr(scale)[:80]
        raise TesseraError("scale", f"must be finite, got {what}") from None


MAX_SCALE = 1e4
"""Largest accepted softmax scale: with bf16/fp16 inputs |q.k| stays far below float32's range after scaling."""


def _check_scale(scale: float) -> float:
    """0 < scale <= MAX_SCALE (finite and positive). Raises TesseraError("scale")."""
    if not math.isfinite(scale):
        raise TesseraError("scale", f"must be finite, got {scale}")
    if not 0 < scale <= MAX_SCALE:
        raise TesseraError("scale", f"must satisfy 0 < scale <= {MAX_SCALE:g} (a positive softmax scale; larger values "
                                    f"could overflow float32 in scale * q.k), got {scale}")
    return scale


def _check_options(return_lse, mask_version, plan_id):
    """return_lse, mask_version and plan_id, checked the same way in eager mode and under torch.compile.
    Returns mask_version as an int."""
    if type(return_lse) is not bool:
        raise TesseraError("return_lse", f"expected True or False (a Python bool), got {type(return_lse).__name__} "
                                         f"{return_lse!r}"[:200])
    if type(mask_version) is not int or not 0 <= mask_version < 2**64:
        if not (_arrays.is_int(mask_version) and 0 <= int(mask_version) < 2**64):
            raise TesseraError("mask_version", f"expected an integer in [0, 2^64), got {mask_version!r}")
        mask_version = int(mask_version)
    if plan_id is not None:
        if not isinstance(plan_id, str):
            raise TesseraError("plan_id", f"expected a plan id string or None, got {type(plan_id).__name__}")
        if plan_id == "":
            raise TesseraError("plan_id", "empty plan id; pass None to select a plan")
    return mask_version


def _prepare(q, k, v, block_mask, block_size, scale, layout, cache=True):
    """Shared argument handling of the eager call and the custom op (cache=False while torch.compile traces).
    Returns (torch_in, spec, B_Q, B_KV, scale)."""
    torch_in = _check_qkv(q, k, v, layout)
    spec = to_mask_spec(block_mask, cache)
    bq, bkv = _block_sizes(block_size, spec)
    if scale is not None:
        scale = _check_scale(_scale_value(scale))
    return torch_in, spec, bq, bkv, scale


def _resolve_extents(spec: MaskSpec, n_q: int, n_kv: int, bq: int, bkv: int):
    mb, mh, nqb, nkvb = spec.extents
    if nkvb is None:
        nkvb = -(-n_kv // bkv) if bkv > 0 else 0
    if spec.seq_lengths is not None and tuple(spec.seq_lengths) != (int(n_q), int(n_kv)):
        raise TesseraError("block_mask", f"the mask was built for sequence lengths {tuple(spec.seq_lengths)} but "
                                         f"q/k have (N_q, N_kv) = ({n_q}, {n_kv})")
    return mb, mh, nqb, nkvb


def _run(q, k, v, spec: MaskSpec, bq: int, bkv: int, scale, layout: str, return_lse: bool, torch_in: bool,
         mask_version: int, plan_id: Optional[str]):
    """Allocates O (in the caller's layout) and LSE, and calls the native CPU or GPU path. Returns (O, LSE|None)."""
    bhsd = layout == "bhsd"
    if bhsd:
        qv, kv, vv = _to_bnhd(q, torch_in), _to_bnhd(k, torch_in), _to_bnhd(v, torch_in)
    else:
        qv, kv, vv = q, k, v
    b, n_q, h_q, _ = qv.shape
    mb, mh, nqb, nkvb = _resolve_extents(spec, n_q, kv.shape[1], bq, bkv)
    kind = KIND_CODES[spec.kind]
    if torch_in:
        torch = _arrays.torch_module()
        o = torch.empty_like(q, memory_format=torch.contiguous_format)  # cheaper than torch.empty(shape, ...)
        lse = torch.empty((b, h_q, n_q), dtype=torch.float32, device=q.device) if return_lse else None
    else:
        o = np.empty(q.shape, dtype=q.dtype)
        lse = np.empty((b, h_q, n_q), dtype=np.float32) if return_lse else None
    ov = _to_bnhd(o, torch_in) if bhsd else o
    global _last_cpu, _last_device
    m0, m1 = spec.m0, spec.m1
    if torch_in:
        # DLPack capsules from torch's C++ exporter: ~10x cheaper than Tensor.__dlpack__ (a Python method).
        td = _dlpack_fn if _dlpack_fn is not None else _to_dlpack()
        tensor = _arrays._torch.Tensor
        qv, kv, vv, ov = td(qv), td(kv), td(vv), td(ov)
        lse_arg = None if lse is None else td(lse)
        m0 = td(m0) if isinstance(m0, tensor) else m0  # a numpy mask with CPU torch tensors stays numpy
        m1 = td(m1) if isinstance(m1, tensor) else m1
    else:
        lse_arg = lse
    if torch_in and q.is_cuda:
        native = _C()
        if not native.has_cuda():
            raise TesseraUnsupportedError("q", "this build of tessera._C has no GPU runtime (CPU path only)")
        device = q.get_device()
        native.run_cuda(qv, kv, vv, ov, lse_arg, bq, bkv, kind, m0, m1, mb, mh, nqb, nkvb, scale, _current_stream(device),
                        mask_version, plan_id or "")
        _last_device = device
    else:
        user = plan_tables._active  # a user table (load_plan_table): select as on its arch
        arch, table_path = (user["arch"], user["path"]) if user is not None else (_CPU_ARCH, "")
        _last_cpu = _C().run_cpu(qv, kv, vv, ov, lse_arg, bq, bkv, kind, m0, m1, mb, mh, nqb, nkvb, scale, arch,
                                 plan_id or "", True, table_path)
        _last_cpu["device"] = "cpu"
        _last_device = None
    return o, lse


if _arrays._torch is not None:  # torch already imported by the caller: register the custom op now
    _load_ops()


def block_sparse_attention(q, k, v, block_mask, block_size=None, *, scale: Optional[float] = None,
                           layout: str = "bshd", return_lse: bool = False, mask_version: int = 0,
                           plan_id: Optional[str] = None):
    """Block-sparse attention E(M) (forward only).

    Args:
      q: [B, N_q, H_q, D] (layout "bshd") or [B, H_q, N_q, D] (layout "bhsd"); torch bf16/fp16 on CUDA; on the
        CPU torch f16/bf16/f32/f64 or numpy f16/f32/f64. Any strides on the first three dims, head dim contiguous.
      k, v: [B, N_kv, H_kv, D] / [B, H_kv, N_kv, D], same kind, device and dtype as q; H_q % H_kv == 0 (GQA/MQA).
      block_mask: the logical block mask: a bool/uint8 array [B_m, H_m, n_qb, n_kvb]; ("csr", row_offsets,
        col_indices, (B_m, H_m, n_qb, n_kvb)); ("index_lists", counts, indices, n_kvb); a FlexAttention
        BlockMask; or a MaskSpec from tessera.from_flashinfer_bsr / from_flex_block_mask. Same device as q.
        n_qb = ceil(N_q / B_Q), n_kvb = ceil(N_kv / B_KV); B_m in {1, B}, H_m in {1, H_q}.
      block_size: B_Q = B_KV (int) or (B_Q, B_KV) in tokens, multiples of 16 in [16, 1024]. May be None when the mask
        carries it (FlexAttention BlockMask.BLOCK_SIZE, FlashInfer (R, C)).
      scale: softmax scale, 0 < scale <= 1e4 (MAX_SCALE: keeps scale * q.k far from float32 overflow); default
        1/sqrt(D). NaN, infinities, zero, negative values and values above 1e4 raise TesseraError("scale").
      layout: "bshd" or "bhsd" (FlexAttention / SDPA order); O is returned in the same layout.
      return_lse: exactly True or False (a Python bool; np.True_ raises TesseraError("return_lse")): also return
        LSE [B, H_q, N_q] float32 (natural log; -inf for query tokens with no active block).
      mask_version: exact-repeat cache (GPU): non-zero and equal to the previous call's value with the same tensors
        and mask arrays promises unchanged mask contents, so mask state and launch metadata are reused (needed for
        CUDA-graph capture). 0 = always rebuild. Ignored on the CPU.
      plan_id: run this plan instead of selecting one (must be eligible); None selects. '' raises
        TesseraError("plan_id") ("empty plan id; pass None to select a plan").

    Returns O (shape and dtype of q; numpy f16 -> f16), or (O, LSE) when return_lse.
    Plans are selected with the embedded plan table, or the user table of :func:`tessera.load_plan_table`.
    Raises TesseraError (ValueError) naming the argument for invalid input, TesseraUnsupportedError
    (NotImplementedError) for valid but unsupported requests, TesseraRuntimeError for CUDA failures (and, on a
    CUDA device, "plan_table_path" when the loaded user table was profiled for another architecture). Nothing is
    written to any output on error. Under torch.compile the call goes through the custom op
    ``torch.ops.tessera.block_sparse_attention`` (fake implementation for shape propagation).
    """
    mask_version = _check_options(return_lse, mask_version, plan_id)
    if _arrays.is_torch(q):
        ops = _ops if _ops is not None else _load_ops()
        if _arrays._torch.compiler.is_compiling():
            return ops.call_op(q, k, v, block_mask, block_size, scale, layout, return_lse, mask_version, plan_id)
    torch_in, spec, bq, bkv, scale = _prepare(q, k, v, block_mask, block_size, scale, layout)
    _check_cpu_dtypes(q, k, v, torch_in)
    _check_mask_arrays(spec)
    if torch_in and (q.requires_grad or k.requires_grad or v.requires_grad) and _arrays._torch.is_grad_enabled():
        raise TesseraUnsupportedError("q", "backward is not supported (forward only): call under torch.no_grad() / "
                                           "torch.inference_mode(), or detach q, k and v")
    o, lse = _run(q, k, v, spec, bq, bkv, scale, layout, return_lse, torch_in, mask_version, plan_id)
    return (o, lse) if return_lse else o


def last_dispatch(device: Optional[int] = None) -> Dict[str, Any]:
    """What the last call did: plan_id, regime ("<key>/leaf<N>", "<key>/default", "<key>/forced"), source ("table",
    "base", "default", "forced"), table_status (which plan table selected it), ranks_skipped, cache_hit, prepare_speculated / prepare_speculation_hit (GPU: the
    launch preparation was enqueued before the mask statistics were read / and kept), mask statistics (mask_shape, active_blocks, runs, density,
    run_coverage, mean_run_length, mean_row_active, max_row_active, row_imbalance, empty_rows, coarsen_cost2/4/8:
    NaN on the GPU where the request's plan-table tree does not read them, docs/selection.md) and host timings
    (host_mask_state_us, host_select_us, host_prepare_us, host_launch_us, host_dispatch_us in microseconds,
    total_ms; docs/python.md says what each counts on the GPU and on the CPU). `device`: a CUDA ordinal, or None for the last call wherever it
    ran. Raises TesseraError("device") when nothing has run there yet."""
    native = _C()
    if device is not None and (isinstance(device, (bool, np.bool_)) or not _arrays.is_int(device) or int(device) < 0):
        raise TesseraError("device", f"expected a CUDA device ordinal (an int >= 0) or None, got {device!r}"[:200])
    if device is None:
        device = _last_device
        if device is None:
            if _last_cpu is None:
                raise TesseraError("device", "no call has run yet")
            return dict(_last_cpu)
    if not native.has_cuda():
        raise TesseraUnsupportedError("device", "this build of tessera._C has no GPU runtime")
    d = native.last_dispatch_cuda(int(device))
    d["device"] = f"cuda:{int(device)}"
    d.update(native.runtime_info(int(device)))
    return d


def explain(q, k, v, block_mask, block_size=None, *, scale: Optional[float] = None, layout: str = "bshd",
            plan_id: Optional[str] = None) -> Dict[str, Any]:
    """The plan and regime Tessera chooses for this request, with the mask statistics s(M) it selected on.

    There is no dry run: the request is executed (output discarded) and the dispatch record returned, see
    :func:`last_dispatch` for the keys ("table_status": which plan table selected the plan, or why none did; on the
    GPU the dict also has "arch"). On the CPU the selection mimics sm90a (H100/H200) with its embedded plan table,
    or the arch of the user table loaded with :func:`tessera.load_plan_table`.
    Same arguments and errors as :func:`block_sparse_attention`.
    """
    block_sparse_attention(q, k, v, block_mask, block_size, scale=scale, layout=layout, plan_id=plan_id)
    return last_dispatch()
