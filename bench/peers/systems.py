"""The systems of the scoreboard, each called the way its users call it (torch; FlashInfer and Tessera optional).

Every system starts a request from the same input: the per-head dense block mask [H, n_qb, n_kvb] (bool, on the
GPU), as a sparsifier hands it over, and q, k, v in the layout the system takes (Tessera: [1, N, H, D], its
documented default; FlexAttention and cuDNN: [1, H, N, D]; FlashInfer: [H, N, D], or the fold view [H * N, 1, D]).
Each runner returns one row (schema.row) or raises; run.py turns an exception into an error row.
"""
from __future__ import annotations

import itertools
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import schema
from .gpu import Reference, Timer, rel_l2_full
from .metrics import BF16_TOLERANCE, tflops
from .workloads import Workload

_VERSIONS = itertools.count(1)  # Tessera mask_version values, unique within the process


@dataclass
class Case:
    """One workload's inputs, shared by every system."""
    w: Workload
    mask: torch.Tensor                  # [H, n_qb, n_kvb] bool on the device
    stats: Dict[str, Any]               # workloads.mask_stats
    hnd: Tuple[torch.Tensor, ...]       # q, k, v [H, N, D] bf16 contiguous
    ref: Reference
    _bshd: Optional[Tuple[torch.Tensor, ...]] = None
    tessera_out: Optional[torch.Tensor] = None   # Tessera's (selected plan) O as an [H, N, D] view
    tessera_plan: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    def bshd(self) -> Tuple[torch.Tensor, ...]:
        if self._bshd is None:
            self._bshd = tuple(x.permute(1, 0, 2).contiguous().unsqueeze(0) for x in self.hnd)
        return self._bshd

    def bhsd(self) -> Tuple[torch.Tensor, ...]:
        return tuple(x.unsqueeze(0) for x in self.hnd)

    @property
    def pairs(self) -> int:
        return self.stats["active_pairs"]


def finish(case: Case, r: Dict[str, Any], o_hnd: Optional[torch.Tensor], notes: List[str]) -> Dict[str, Any]:
    """Fills tflops, the correctness checks and the note of a measured row."""
    r["tflops"] = tflops(case.pairs, case.w.head_dim, r.get("kernel_ms"))
    if o_hnd is not None:
        r["rel_l2"] = case.ref.rel_l2(o_hnd)
        if r["rel_l2"] is None:
            notes.append("non-finite output")
        elif r["rel_l2"] > BF16_TOLERANCE:
            notes.append(f"FAILS the bf16 check: rel_l2 {r['rel_l2']:.2e} > {BF16_TOLERANCE:g}")
        if case.tessera_out is not None and o_hnd is not case.tessera_out:
            r["rel_l2_vs_tessera"] = rel_l2_full(o_hnd, case.tessera_out)
    r["note"] = "; ".join(n for n in notes if n) or None
    return r


# ------------------------------------------------------------------------------------------------ Tessera
class Tessera:
    """tessera.block_sparse_attention (docs/python.md): the dense block mask as given, the plan the runtime selects.
    kernel_ms: exact repeats (mask_version, same tensors and mask: the runtime only launches the attention and
    merge kernels). request_ms: mask_version = 0 (mu(M), selection, launch preparation, launch). tessera-best: the
    best plan of a sweep over the request's eligible plans (tessera._C.eligible_plans_cuda), forced with plan_id."""

    def __init__(self, module_dir: Optional[str], device: torch.device, timer: Timer):
        self.device, self.timer = device, timer
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for p in (module_dir, os.path.join(repo, "python")):
            if p and p not in sys.path:
                sys.path.insert(0, p)
        import tessera  # noqa: E402

        self.t = tessera
        from tessera import api

        self.api = api
        native = api._C()
        if device.type == "cuda" and not native.has_cuda():
            raise RuntimeError(f"tessera._C at {native.__file__} was built without the GPU runtime")
        self.module_file = native.__file__
        self.version = getattr(native, "version", lambda: "?")()
        self.git_revision = getattr(native, "git_revision", lambda: "?")()
        # Runtime creation (plan table, catalog) on a tiny request, so that no workload's first call pays for it.
        x = torch.zeros(1, 64, 1, 128, dtype=torch.bfloat16, device=device)
        m = torch.ones(1, 1, 1, 1, dtype=torch.bool, device=device)
        self.init_ms, _ = timer.once(lambda: tessera.block_sparse_attention(x, x, x, m, 64))

    def _call(self, case: Case, version: int = 0, plan: Optional[str] = None):
        q, k, v = case.bshd()
        return self.t.block_sparse_attention(q, k, v, case.mask.unsqueeze(0), (case.w.block_q, case.w.block_kv),
                                             mask_version=version, plan_id=plan)

    def _dispatch(self) -> Dict[str, Any]:
        return self.t.last_dispatch()

    def _measure(self, case: Case, plan: Optional[str]) -> Tuple[Dict[str, Any], torch.Tensor, List[str]]:
        tm = self.timer
        r: Dict[str, Any] = {}
        notes: List[str] = []
        r["first_call_ms"], _ = tm.once(lambda: self._call(case, 0, plan))
        r["request_ms"] = tm.host_ms(lambda: self._call(case, 0, plan))
        d = self._dispatch()
        r["plan"] = d.get("plan_id")
        for k in ("regime", "source", "host_dispatch_us", "host_select_us", "host_prepare_us"):
            if k in d:
                r[k] = d[k]
        ver = next(_VERSIONS)
        self._call(case, ver, plan)           # primes the exact-repeat cache
        def kernel_fn():
            return self._call(case, ver, plan)
        r["kernel_ms"] = tm.kernel_ms(kernel_fn)
        # for the interleaved re-timing (run.py): the exact-repeat cache holds the previous call only, so another
        # Tessera row's calls in between need one untimed call to prime it again
        r["_kernel_fn"] = r["_prime_fn"] = kernel_fn
        if not self._dispatch().get("cache_hit", False):
            notes.append("exact-repeat cache missed: kernel_ms includes mask state and preparation")
        o = self._call(case, 0, plan)
        return r, o[0].permute(1, 0, 2), notes

    def selected(self, case: Case) -> Dict[str, Any]:
        r, o_hnd, notes = self._measure(case, None)
        case.tessera_out, case.tessera_plan = o_hnd, r["plan"]
        notes.insert(0, "kernel: exact repeats (mask_version); request: new mask each call")
        return finish(case, schema.row(case.w.name, "tessera", **r), o_hnd, notes)

    def eligible_plans(self, case: Case) -> List[str]:
        api = self.api
        native = api._C()
        fn = getattr(native, "eligible_plans_cuda", None)
        if fn is None:
            raise RuntimeError("this tessera._C has no eligible_plans_cuda: no plan sweep through the Python module")
        from torch.utils.dlpack import to_dlpack

        q, k, v = case.bshd()
        spec = api.to_mask_spec(case.mask.unsqueeze(0))
        mb, mh, nqb, nkvb = api._resolve_extents(spec, q.shape[1], k.shape[1], case.w.block_q, case.w.block_kv)
        o = torch.empty_like(q)
        m1 = None if spec.m1 is None else to_dlpack(spec.m1)

        def ask(lse):
            return list(fn(to_dlpack(q), to_dlpack(k), to_dlpack(v), to_dlpack(o), lse, case.w.block_q,
                           case.w.block_kv, api.KIND_CODES[spec.kind], to_dlpack(spec.m0), m1, mb, mh, nqb, nkvb))

        try:
            return ask(None)  # as the measured calls (no LSE)
        except TypeError:  # an older nanobind refuses None for an unannotated std::optional: pass an LSE
            lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
            return ask(to_dlpack(lse))

    def best(self, case: Case, sweep_seconds: float, max_plans: int) -> Dict[str, Any]:
        """Screens every eligible plan (forced; 1 warm-up + 3 exact repeats), then measures the fastest with the
        full protocol. The sweep stops after sweep_seconds (the note says how many plans it screened)."""
        if self.device.type != "cuda":
            raise RuntimeError("the plan sweep needs the GPU runtime (eligible_plans_cuda)")
        plans = self.eligible_plans(case)
        if case.tessera_plan in plans:
            plans.remove(case.tessera_plan)
            plans.insert(0, case.tessera_plan)
        if max_plans > 0:
            plans_run = plans[:max_plans]
        else:
            plans_run = plans
        tm = self.timer
        t_end = time.monotonic() + sweep_seconds
        screened: List[Tuple[float, str, float]] = []
        failed: List[str] = []
        for pid in plans_run:
            if time.monotonic() > t_end and screened:
                break
            try:
                first, _ = tm.once(lambda: self._call(case, 0, pid))
                ver = next(_VERSIONS)
                self._call(case, ver, pid)
                ms = tm.kernel_ms(lambda: self._call(case, ver, pid), warm=1, reps=3)
                screened.append((ms, pid, first))
            except Exception as ex:  # an ineligible or failing plan: counted, not fatal
                failed.append(f"{pid}: {type(ex).__name__}")
        if not screened:
            raise RuntimeError(f"no eligible plan ran ({len(plans)} eligible; failures: {failed[:3]})")
        screened.sort()
        _, pid, first = screened[0]
        r, o_hnd, notes = self._measure(case, pid)
        r["first_call_ms"] = first
        rank = [p for _, p, _ in screened].index(case.tessera_plan) + 1 if case.tessera_plan in \
            [p for _, p, _ in screened] else None
        notes.insert(0, f"best of {len(screened)} screened / {len(plans)} eligible plans (screen: 3 exact repeats "
                        f"each, then the full protocol); the selected plan ranks {rank or '?'} in the screen")
        if failed:
            notes.append(f"{len(failed)} plans failed to run")
        r["sweep"] = [{"plan": p, "screen_kernel_ms": round(ms, 4)} for ms, p, _ in screened[:8]]
        return finish(case, schema.row(case.w.name, "tessera-best", **r), o_hnd, notes)


# ------------------------------------------------------------------------------------------------ FlexAttention
class Flex:
    """torch.compile(flex_attention), one compiled function per (workload, kernel options, BlockMask form), dynamo's
    cache and recompile limits raised (a silent eager fallback would time the wrong code). The BlockMask is built
    from the dense mask with kv_num_blocks = row counts and kv_indices = a stable argsort, seq_lengths = (N, N)
    (needed for a ragged N). Candidates: the kernel options of h200_baselines.md (BLOCK_M = B_Q, BLOCK_N = B_KV
    below 128, the defaults at 128 and above) and alternatives; each is compiled and screened (3 calls), the
    fastest measured with the full protocol.

    Forms: "full" (every listed block full: no mask_mod inside blocks), "partial" (every listed block partial, the
    default noop mask_mod) and, for N not a multiple of L = lcm(B_Q, B_KV, 128) only, "padded": q, k, v
    zero-padded to N' = ceil(N / L) * L rows (whole blocks and 128-row tiles), seq_lengths = (N', N'), the listed blocks
    full except the kv block holding the ragged tail (N // B_KV, when N % B_KV != 0), which is partial with mask_mod
    kv_idx < N; the output is sliced back to N rows. With seq_lengths = (N, N) and N % 128 != 0 the Triton kernel
    checks bounds on every tile (IS_DIVISIBLE false): in the model loop (Wan 720p, N = 75,600 -> 75,648; its
    FlexBackend pads the same way) Flex's attention fell from 2,470 to 1,891 ms a step once padded (bench/NOTES.md).
    The screen picks between the two; the padded form's request includes the padding copy, its kernel runs on the
    padded tensors (padded once, outside the timed calls)."""

    def __init__(self, timer: Timer):
        import torch._dynamo as dynamo
        from torch.nn.attention.flex_attention import BlockMask, flex_attention

        for name, val in (("cache_size_limit", 1024), ("recompile_limit", 1024),
                          ("accumulated_cache_size_limit", 8192), ("accumulated_recompile_limit", 8192)):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, val)
        for name in ("fail_on_cache_limit_hit", "fail_on_recompile_limit_hit"):
            if hasattr(dynamo.config, name):  # an eager fallback becomes an error instead of silently wrong timing
                setattr(dynamo.config, name, True)
        self.BlockMask, self.flex_attention, self.timer = BlockMask, flex_attention, timer
        self._mask_mods: Dict[int, Callable] = {}

    @staticmethod
    def padded_len(bq: int, bk: int, n: int) -> int:
        """N' of the padded form: n tokens rounded up to a multiple of lcm(bq, bk, 128): whole blocks on both sides
        and whole 128-row kernel tiles (torch 2.11 drops the bounds checks when N' % 128 == 0, later versions when
        N' is also a multiple of the block size)."""
        whole = math.lcm(bq, bk, 128)
        return -(-n // whole) * whole

    @staticmethod
    def candidates(bq: int, bk: int, n: int) -> List[Tuple[Dict[str, int], str]]:
        """(kernel options, BlockMask form) in screening order. An n that is not a multiple of lcm(bq, bk, 128) gets
        the padded form second, so that --flex-candidates 2 (the default) screens it against the unpadded full
        form."""
        base: Dict[str, int] = {} if (bq >= 128 and bk >= 128) else {"BLOCK_M": min(bq, 128), "BLOCK_N": min(bk, 128)}
        out = [(base, "full")]
        if Flex.padded_len(bq, bk, n) != n:
            out.append((base, "padded"))
        if bq >= 128 and bk >= 128:
            out.append(({"BLOCK_M": 128, "BLOCK_N": 128}, "full"))
            out.append(({"BLOCK_M": 128, "BLOCK_N": 64}, "full"))
        elif bk >= 32:
            out.append(({"BLOCK_M": min(bq, 128), "BLOCK_N": bk // 2}, "full"))
        out.append((base, "partial"))
        return out

    def kv_below(self, n: int) -> Callable:
        """mask_mod kv_idx < n, one function per n (a new closure every call would be a new dynamo guard: a
        recompile per request)."""
        if n not in self._mask_mods:
            def kv_below(b, h, q_idx, kv_idx):
                return kv_idx < n

            self._mask_mods[n] = kv_below
        return self._mask_mods[n]

    @staticmethod
    def index_lists(m: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """kv_num_blocks (int32 [1, H, n_qb]) and kv_indices (int32 [1, H, n_qb, n_kvb]: each row's active blocks
        first, ascending, by a stable argsort) of a dense block mask m [1, H, n_qb, n_kvb] bool."""
        counts = m.sum(-1, dtype=torch.int32)
        idx = torch.argsort(m.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
        return counts, idx

    def padded_block_mask(self, mask: torch.Tensor, bq: int, bk: int, n: int):
        """The padded form's BlockMask for n real tokens of N' = padded_len(bq, bk, n): mask [H, n_qb, n_kvb] bool
        widened with empty query-block rows and kv-block columns to [H, N' / bq, N' / bk]; every listed block full
        except the ragged kv block n // bk (n % bk != 0 only), partial with mask_mod kv_idx < n in every row that
        lists it; seq_lengths = (N', N')."""
        n_pad = self.padded_len(bq, bk, n)
        h, nq, nk = mask.shape
        m = mask
        if (n_pad // bq, n_pad // bk) != (nq, nk):  # the padding's blocks: never listed
            m = mask.new_zeros(h, n_pad // bq, n_pad // bk)
            m[:, :nq, :nk] = mask
        m = m.unsqueeze(0)
        counts, idx = self.index_lists(m)
        bs, lens = (bq, bk), (n_pad, n_pad)
        if n % bk == 0:  # no kv block holds padded keys (only query rows are padded): all full
            return self.BlockMask.from_kv_blocks(torch.zeros_like(counts), idx, counts, idx, BLOCK_SIZE=bs,
                                                 seq_lengths=lens)
        tail = n // bk
        # the ragged block is the largest listed index, so it sorts last of each row's list: the first counts - 1
        # entries of idx are the row's full blocks
        has_tail = m[..., tail].to(torch.int32)
        part = torch.full_like(idx, tail)
        return self.BlockMask.from_kv_blocks(has_tail, part, counts - has_tail, idx, BLOCK_SIZE=bs,
                                             mask_mod=self.kv_below(n), seq_lengths=lens)

    def block_mask(self, mask: torch.Tensor, bq: int, bk: int, n: int, form: str):
        """BlockMask of the dense mask [H, n_qb, n_kvb] in a form: "full", "partial" (seq_lengths (n, n)) or
        "padded" (padded_block_mask)."""
        if form == "padded":
            return self.padded_block_mask(mask, bq, bk, n)
        counts, idx = self.index_lists(mask.unsqueeze(0))
        if form == "full":  # every listed block is complete: no mask_mod inside blocks
            return self.BlockMask.from_kv_blocks(torch.zeros_like(counts), idx, counts, idx, BLOCK_SIZE=(bq, bk),
                                                 seq_lengths=(n, n))
        return self.BlockMask.from_kv_blocks(counts, idx, BLOCK_SIZE=(bq, bk), seq_lengths=(n, n))

    def compiled(self, opts: Dict[str, int]):
        fa = self.flex_attention
        opts = dict(opts)

        def attend(q, k, v, bm):
            return fa(q, k, v, block_mask=bm, kernel_options=opts)

        return torch.compile(attend, dynamic=False)

    def inputs(self, case: Case, form: str) -> Tuple[torch.Tensor, ...]:
        """q, k, v [1, H, N', D] for a form: case.bhsd()'s views (N' = N), or for "padded" new tensors with
        N' = padded_len rows, the rows past N zeros (the keys masked out, the query rows sliced off)."""
        x = case.bhsd()
        if form != "padded":
            return x
        w = case.w
        extra = self.padded_len(w.block_q, w.block_kv, w.n) - w.n
        return tuple(torch.nn.functional.pad(t, (0, 0, 0, extra)) for t in x)

    def describe(self, form: str, bq: int, bk: int, n: int) -> str:
        """The row's words for a BlockMask form."""
        if form != "padded":
            return f"{form} blocks"
        tail = (f"the tail kv block {n // bk} partial with mask_mod kv_idx < N" if n % bk else
                "no partial block (N % B_KV = 0: only query rows padded)")
        return f"full blocks, N = {n:,} padded to {self.padded_len(bq, bk, n):,} tokens (zero rows); {tail}"

    def run(self, case: Case, max_candidates: int) -> Dict[str, Any]:
        w, tm = case.w, self.timer
        n = w.n
        cands = self.candidates(w.block_q, w.block_kv, n)[:max(1, max_candidates)]
        tried: List[Dict[str, Any]] = []
        best = None
        for opts, form in cands:
            ent: Dict[str, Any] = {"kernel_options": opts, "form": form}
            bm = xs = None
            try:
                fn = self.compiled(opts)
                xs = self.inputs(case, form)  # the padded form: copied once, outside the timed calls
                bm = self.block_mask(case.mask, w.block_q, w.block_kv, n, form)
                ent["first_call_ms"], _ = tm.once(lambda: fn(*xs, bm))
                ent["screen_kernel_ms"] = tm.kernel_ms(lambda: fn(*xs, bm), warm=1, reps=3) \
                    if len(cands) > 1 else None
                if best is None or (ent["screen_kernel_ms"] or 0) < (best[0]["screen_kernel_ms"] or 0):
                    best = (ent, fn, xs)
            except Exception as ex:
                ent["error"] = f"{type(ex).__name__}: {str(ex)[:200]}"
            tried.append(ent)
            del bm, xs
        if best is None:
            raise RuntimeError("no FlexAttention configuration compiled: " +
                               "; ".join(f"{t['kernel_options']} {t['form']}: {t.get('error')}" for t in tried))
        ent, fn, xs = best
        opts, form = ent["kernel_options"], ent["form"]
        r: Dict[str, Any] = {"first_call_ms": ent["first_call_ms"]}

        def request():  # the padded form's copy, the BlockMask and the call; O sliced to the N real rows
            return fn(*self.inputs(case, form), self.block_mask(case.mask, w.block_q, w.block_kv, n, form))[:, :, :n]

        r["request_ms"] = tm.host_ms(request)
        bm = self.block_mask(case.mask, w.block_q, w.block_kv, n, form)
        r["_kernel_fn"] = lambda: fn(*xs, bm)  # also for the interleaved re-timing (run.py)
        r["kernel_ms"] = tm.kernel_ms(r["_kernel_fn"])
        o = fn(*xs, bm)
        spell = ", ".join(f"{a}={b}" for a, b in opts.items()) or "default kernel options"
        words = self.describe(form, w.block_q, w.block_kv, n)
        r["form"] = f"{spell}; {words}"
        r["candidates"] = tried
        notes = [f"{spell}, {words} (best of {len(tried)} tried); first call = compile + run"]
        return finish(case, schema.row(w.name, "flex", **r), o[0, :, :n], notes)


# ------------------------------------------------------------------------------------------------ FlashInfer
_FI_JIT = textwrap.dedent("""
    import sys, time, torch
    from flashinfer.prefill import get_batch_prefill_module
    d = int(sys.argv[1])
    args = (torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, d, d, 0, False, False, False)
    t = time.perf_counter(); get_batch_prefill_module("fa3", *args)
    print("jit_s", time.perf_counter() - t, flush=True)
""")


class FlashInfer:
    """flashinfer.sparse: BlockSparseAttentionWrapper with the heads folded into the rows (q, k, v viewed as
    [H * N, 1, D]; block (h, i, j) is BSR row h * n_qb + i, column h * n_kvb + j; exact, needs N % B_Q = N % B_KV =
    0) and VariableBlockSparseAttentionWrapper ([H, n_qb, n_kvb] mask, per-head block sizes, a short last block for
    a ragged N); the row reports the faster correct one, the others go to `alternatives`. backend "cake"
    (64 x 64 blocks, <= 64 per row, no ragged tail) is an alternative only (its host planner takes seconds).
    plan() is inside the complete request (and the mask -> BSR conversion for the fold form); the FA3 batch-prefill
    module's JIT build is timed on its own, once per machine (FlashInfer caches it in FLASHINFER_WORKSPACE_BASE)."""

    def __init__(self, device: torch.device, timer: Timer, head_dim: int = 128, jit_timeout_s: float = 300.0):
        import flashinfer
        from flashinfer.sparse import BlockSparseAttentionWrapper, VariableBlockSparseAttentionWrapper

        self.fi, self.device, self.timer = flashinfer, device, timer
        self.BSR, self.VAR = BlockSparseAttentionWrapper, VariableBlockSparseAttentionWrapper
        self.version = flashinfer.__version__
        self.jit: Dict[str, Any] = self._prepare(head_dim, jit_timeout_s)
        self.float_ws = torch.empty(256 << 20, dtype=torch.uint8, device=device)
        self.int_ws = torch.empty(64 << 20, dtype=torch.uint8, device=device)

    def _prepare(self, d: int, timeout_s: float) -> Dict[str, Any]:
        """JIT-builds the FA3 batch-prefill module in a child process (bounded by timeout_s) unless it is cached,
        then loads it here. Returns {cached, jit_ms, load_ms, module}."""
        from flashinfer.jit import gen_batch_prefill_module
        from flashinfer.prefill import get_batch_prefill_module

        args = (torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, d, d, 0, False, False, False)
        spec = gen_batch_prefill_module("fa3", *args)
        c = getattr(spec, "is_compiled", False)
        cached = bool(c() if callable(c) else c)
        info: Dict[str, Any] = {"module": getattr(spec, "name", "?"), "cached": cached, "jit_ms": None}
        if not cached:
            t0 = time.perf_counter()
            # its own session, so that a timeout also ends the build's ninja and nvcc processes
            p = subprocess.Popen([sys.executable, "-c", _FI_JIT, str(d)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                _, err = p.communicate(timeout=max(1.0, timeout_s))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
                raise RuntimeError(f"{schema.NOT_RUN}: FlashInfer's JIT build of {info['module']} did not finish "
                                   f"within {timeout_s:.0f} s (time budget)")
            info["jit_ms"] = (time.perf_counter() - t0) * 1e3
            if p.returncode != 0:
                raise RuntimeError(f"FlashInfer JIT build failed (rc {p.returncode}): {err[-600:]}")
        t0 = time.perf_counter()
        get_batch_prefill_module("fa3", *args)
        info["load_ms"] = (time.perf_counter() - t0) * 1e3
        return info

    def _wrapper(self, cls, backend: str = "auto"):
        w = cls(self.float_ws, backend=backend)
        if backend != "cake":  # roomier int workspace and kv-length buffer (H * n_qb requests; 0.6.x fixes 32768)
            w.reset_workspace_buffer(self.float_ws, self.int_ws)
            kvl = getattr(w, "_kv_lens_buffer", None)
            if kvl is not None and kvl.numel() < (1 << 20):
                w._kv_lens_buffer = torch.empty(1 << 20, dtype=torch.int32, device=self.device)
        return w

    @staticmethod
    def cake_refusal(case: Case) -> Optional[str]:
        w = case.w
        cnt = case.mask.sum(-1)
        why = []
        if (w.block_q, w.block_kv) != (64, 64):
            why.append("blocks must be 64 x 64")
        if w.n % 64:
            why.append("N must be a multiple of 64")
        if w.head_dim != 128:
            why.append("head_dim must be 128")
        if int(cnt.max()) > 64:
            why.append(f"{int(cnt.max())} > 64 kv blocks in a row")
        if int(cnt.min()) < 1:
            why.append("an empty row")
        if torch.cuda.get_device_capability(case.mask.device) != (9, 0):
            why.append("needs SM90")
        return "; ".join(why) or None

    def _form(self, case: Case, form: str) -> Tuple[Dict[str, Any], torch.Tensor]:
        w, tm = case.w, self.timer
        H, N, D = case.hnd[0].shape
        nq, nk = w.n_qb, w.n_kvb
        mask = case.mask
        dt = torch.bfloat16
        st: Dict[str, Any] = {}
        if form == "fold":
            qf, kf, vf = (x.view(H * N, 1, D) for x in case.hnd)
            run_with = lambda wr: (lambda: wr.run(qf, kf, vf))  # noqa: E731  (the planned wrapper wr)

            def plan_with(wr):
                counts = mask.sum(-1).flatten()
                indptr = torch.zeros(H * nq + 1, dtype=torch.int32, device=mask.device)
                indptr[1:] = torch.cumsum(counts, 0)
                h, _, c = mask.nonzero(as_tuple=True)  # row-major: sorted by (h, i, j)
                wr.plan(indptr, (h * nk + c).to(torch.int32), H * N, H * N, w.block_q, w.block_kv, 1, 1, D,
                        q_data_type=dt, kv_data_type=dt, o_data_type=dt)

            def fresh():
                st["w"] = self._wrapper(self.BSR)
                return request()
        else:
            backend = "cake" if form == "cake" else "auto"
            qh, kh, vh = case.hnd
            run_with = lambda wr: (lambda: wr.run(qh, kh, vh))  # noqa: E731

            def plan_with(wr):
                row = torch.full((H, nq), w.block_q, dtype=torch.int32, device=mask.device)
                row[:, -1] = N - w.block_q * (nq - 1)
                col = torch.full((H, nk), w.block_kv, dtype=torch.int32, device=mask.device)
                col[:, -1] = N - w.block_kv * (nk - 1)
                wr.plan(mask, row, col, H, H, D, q_data_type=dt, kv_data_type=dt)

            def fresh():
                st["w"] = self._wrapper(self.VAR, backend)
                return request()

        def request():  # the complete request on the current wrapper: plan, then run
            plan_with(st["w"])
            return run_with(st["w"])()

        r: Dict[str, Any] = {"form": form}
        r["first_call_ms"], _ = tm.once(fresh)
        slow = r["first_call_ms"] > 1500  # cake's planner: seconds per call
        r["request_ms"] = tm.host_ms(request, warm=0 if slow else None, reps=2 if slow else None)
        request()  # the plan the kernel timing runs
        run = run_with(st["w"])  # keeps the planned wrapper once st is cleared (the interleaved re-timing, run.py)
        r["kernel_ms"] = tm.kernel_ms(run)
        o = run()
        if form == "fold":
            o = o.view(H, N, D)
        r["backend"] = getattr(st.get("w"), "_backend", None)
        r["_kernel_fn"] = run
        # Every form's wrapper plans into the same workspace buffers (self.float_ws / self.int_ws), so a later form's
        # plan() overwrites this one's scheduling metadata: run() after it reads another plan's indices (an illegal
        # address on the H200, session 17). The interleaved re-timing (run.py) therefore plans again, untimed,
        # before each timed run of this form.
        wr = st["w"]
        r["_prime_fn"] = lambda: plan_with(wr)
        st.clear()
        return r, o

    def run(self, case: Case, forms: List[str]) -> Dict[str, Any]:
        w = case.w
        divisible = w.n % w.block_q == 0 and w.n % w.block_kv == 0
        todo: List[str] = []
        skipped: Dict[str, str] = {}
        for f in forms:
            if f == "auto":
                todo.append("fold" if divisible else "variable")
            elif f == "fold" and not divisible:
                skipped["fold"] = f"N = {w.n} is not a multiple of B_Q = {w.block_q} and B_KV = {w.block_kv}"
            elif f == "cake":
                why = self.cake_refusal(case)
                if why:
                    skipped["cake"] = why
                else:
                    todo.append("cake")
            elif f in ("fold", "variable"):
                todo.append(f)
        todo = list(dict.fromkeys(todo))
        results: List[Dict[str, Any]] = []
        outs: Dict[str, torch.Tensor] = {}
        for f in todo:
            try:
                r, o = self._form(case, f)
                r["tflops"] = tflops(case.pairs, w.head_dim, r["kernel_ms"])
                r["rel_l2"] = case.ref.rel_l2(o)
                outs[f] = o
            except Exception as ex:
                r = {"form": f, "error": f"{type(ex).__name__}: {str(ex)[:300]}"}
            results.append(r)
            torch.cuda.empty_cache()
        main = [r for r in results if "error" not in r and r["form"] != "cake"]
        good = [r for r in main if r.get("rel_l2") is not None and r["rel_l2"] <= BF16_TOLERANCE]
        pick = min(good or main, key=lambda r: r["kernel_ms"]) if (good or main) else None
        if pick is None:
            errs = "; ".join(f"{r['form']}: {r.get('error')}" for r in results) or "no form applies"
            raise RuntimeError(f"no FlashInfer form ran ({errs})")
        kernel_fn = prime_fn = None
        for r in results:  # only the pick's callables are kept (the interleaved re-timing, run.py)
            fn, prime = r.pop("_kernel_fn", None), r.pop("_prime_fn", None)
            if r is pick:
                kernel_fn, prime_fn = fn, prime
        alts = [{k: v for k, v in r.items()} for r in results if r is not pick]
        for f, why in skipped.items():
            alts.append({"form": f, "error": f"not applicable: {why}"})
        row = schema.row(w.name, "flashinfer", kernel_ms=pick["kernel_ms"], request_ms=pick["request_ms"],
                         first_call_ms=pick["first_call_ms"], form=pick["form"], backend=pick.get("backend"),
                         jit_ms=self.jit.get("jit_ms"), alternatives=alts, _kernel_fn=kernel_fn,
                         _prime_fn=prime_fn)
        label = {"fold": "BlockSparseAttentionWrapper, heads folded into rows",
                 "variable": "VariableBlockSparseAttentionWrapper"}[pick["form"]]
        notes = [f"{label} (backend {pick.get('backend')}), the fastest correct of {len(main)} form(s)"]
        for a in alts:
            if "kernel_ms" in a:
                notes.append(f"{a['form']}: kernel {a['kernel_ms']:.3f} ms, request {a['request_ms']:.1f} ms")
        return finish(case, row, outs[pick["form"]], notes)


# ------------------------------------------------------------------------------------------------ cuDNN
class Cudnn:
    """torch.nn.functional.scaled_dot_product_attention with only the cuDNN backend allowed (dense attention)."""

    def __init__(self, timer: Timer):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        self.SDPBackend, self.sdpa_kernel, self.timer = SDPBackend, sdpa_kernel, timer

    def run(self, case: Case) -> Dict[str, Any]:
        if case.w.group != "dense" or not bool(case.mask.all()):
            return schema.error_row(case.w.name, "cudnn", "not applicable: cuDNN through SDPA computes dense "
                                                          "attention only (no block mask); see the dense row")
        q, k, v = case.bhsd()
        tm = self.timer
        sdpa = torch.nn.functional.scaled_dot_product_attention
        with self.sdpa_kernel([self.SDPBackend.CUDNN_ATTENTION]):
            r: Dict[str, Any] = {}
            r["first_call_ms"], _ = tm.once(lambda: sdpa(q, k, v))
            r["request_ms"] = tm.host_ms(lambda: sdpa(q, k, v))
            r["kernel_ms"] = tm.kernel_ms(lambda: sdpa(q, k, v))
            o = sdpa(q, k, v)

        def kernel_fn():
            with self.sdpa_kernel([self.SDPBackend.CUDNN_ATTENTION]):
                return sdpa(q, k, v)
        r["_kernel_fn"] = kernel_fn
        r["form"] = "SDPA, SDPBackend.CUDNN_ATTENTION only"
        return finish(case, schema.row(case.w.name, "cudnn", **r), o[0], ["dense; request = the SDPA call"])


__all__ = ["Case", "Tessera", "Flex", "FlashInfer", "Cudnn", "finish"]
