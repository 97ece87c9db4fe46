"""Measurement helpers of the scoreboard (torch): timers, inputs, the fp32 reference rows, output comparisons.

Kernel time: CUDA events around one call, median of `reps` after `warm` warm-ups; before every timed call a
256 MiB buffer is zeroed (outside the events), which evicts the H200's 50 MB L2, so no system runs from a cache
that the previous repetition warmed. Complete-request time: host clock from a synchronised GPU to the synchronised
end of the call, median of `req_reps` after `req_warm`. On a CPU device (smoke runs only) both are host clocks.
"""
from __future__ import annotations

import math
import random
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .metrics import median


class Timer:
    def __init__(self, device: torch.device, warm: int = 3, reps: int = 10, req_warm: int = 1, req_reps: int = 5,
                 flush_mib: int = 256):
        self.device = device
        self.cuda = device.type == "cuda"
        self.warm, self.reps, self.req_warm, self.req_reps = warm, reps, req_warm, req_reps
        self.flush_mib = flush_mib
        self._flush = torch.empty(flush_mib << 20, dtype=torch.uint8, device=device) if self.cuda else None

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def flush(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def once(self, fn: Callable[[], object]) -> Tuple[float, object]:
        """Host ms of one synchronised call, and its result (first calls: compile, JIT, plan)."""
        self.sync()
        t0 = time.perf_counter()
        out = fn()
        self.sync()
        return (time.perf_counter() - t0) * 1e3, out

    def _timed(self, fn: Callable[[], object]) -> float:
        """ms of one call after the L2 flush: CUDA events (host clock on a CPU device)."""
        self.flush()
        if self.cuda:
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            return s.elapsed_time(e)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    def kernel_ms(self, fn: Callable[[], object], warm: Optional[int] = None, reps: Optional[int] = None) -> float:
        warm = self.warm if warm is None else warm
        reps = self.reps if reps is None else reps
        for _ in range(warm):
            fn()
        self.sync()
        return median([self._timed(fn) for _ in range(reps)])

    def interleaved_ms(self, fns: Sequence[Callable[[], object]], rounds: int,
                       primes: Optional[Sequence[Optional[Callable[[], object]]]] = None) -> List[float]:
        """Kernel ms of several callables measured in alternation: one warm-up call each, then `rounds` rounds that
        time every callable once (flushed, as kernel_ms) in a new order each round (a shuffle seeded by the round
        number, so runs repeat), so that drift within the run (clocks, temperature) and the heat of the call just
        before fall on every callable alike; the median per callable, in fns' order. (A rotation by one place kept
        each callable's predecessor fixed: on the H200 the row timed after the dense cuDNN kernel read up to 7 %
        slower than the same plan timed after another row, bench/NOTES.md, session 18.)
        primes[i], when given, is called untimed before each timed call of fns[i] (before the flush): e.g. to restore
        a cache that another callable's calls evicted."""
        primes = list(primes) if primes is not None else [None] * len(fns)
        if len(primes) != len(fns):
            raise ValueError(f"primes: {len(primes)} entries for {len(fns)} callables")
        for prime, fn in zip(primes, fns):  # warm-up, primed as the timed calls are
            if prime is not None:
                prime()
            fn()
        self.sync()
        ts: List[List[float]] = [[] for _ in fns]
        for r in range(rounds):
            order = list(range(len(fns)))
            random.Random(r).shuffle(order)
            for i in order:
                if primes[i] is not None:
                    primes[i]()
                ts[i].append(self._timed(fns[i]))
        return [median(t) for t in ts]

    def host_ms(self, fn: Callable[[], object], warm: Optional[int] = None, reps: Optional[int] = None) -> float:
        warm = self.req_warm if warm is None else warm
        reps = self.req_reps if reps is None else reps
        for _ in range(warm):
            fn()
        ts: List[float] = []
        for _ in range(reps):
            self.flush()
            self.sync()
            t0 = time.perf_counter()
            fn()
            self.sync()
            ts.append((time.perf_counter() - t0) * 1e3)
        return median(ts)

    def describe(self) -> Dict[str, str]:
        ev = "CUDA events around one call" if self.cuda else "host clock around one call (CPU smoke run)"
        return {
            "kernel_ms": f"{ev}, median of {self.reps} after {self.warm} warm-ups; a {self.flush_mib} MiB buffer is "
                         "zeroed before every timed call, outside the events (evicts L2)",
            "request_ms": f"host clock between synchronisations, median of {self.req_reps} after {self.req_warm} "
                          "warm-up(s), from the dense block mask on the GPU to the finished output: the mask "
                          "conversion, planning or BlockMask building and the call",
        }


def make_qkv(n: int, heads: int, d: int, seed: int, device: torch.device) -> Tuple[torch.Tensor, ...]:
    """q, k, v ~ N(0, 1), bf16, [H, N, D] contiguous, from one torch.Generator seeded with `seed`."""
    g = torch.Generator(device=device).manual_seed(seed)
    return tuple(torch.randn(heads, n, d, generator=g, device=device, dtype=torch.bfloat16) for _ in range(3))


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    nb = float(b.norm())
    d = float((a - b).norm())
    return d / nb if nb > 0 else d


def ref_rows(qh, kh, vh, mask, bq: int, bk: int, h: int, rows: torch.Tensor, scale: float) -> torch.Tensor:
    """fp32 E(M) of query rows `rows` of head h. qh/kh/vh [H, N, D] bf16; mask [H, n_qb, n_kvb] bool."""
    n = kh.shape[1]
    keep = mask[h].index_select(0, rows // bq).repeat_interleave(bk, dim=1)[:, :n]
    s = (qh[h].index_select(0, rows).float() @ kh[h].float().T) * scale
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[:, None].clamp_min(-1e30))
    p = torch.where(keep, p, torch.zeros_like(p))
    o = p @ vh[h].float()
    o[~keep.any(-1)] = 0
    return o


class Reference:
    """fp32 reference of sampled query rows: `nrows` random rows plus the last `ntail` (the ragged tail), on the
    heads `heads`. rel_l2(o) is the largest relative L2 error over those heads."""

    def __init__(self, qh, kh, vh, mask, bq: int, bk: int, heads: Sequence[int], nrows: int = 96, ntail: int = 32,
                 seed: int = 123):
        H, N, D = qh.shape
        g = torch.Generator(device="cpu").manual_seed(seed)
        rows = torch.randint(0, N, (nrows,), generator=g)
        rows = torch.unique(torch.cat([rows, torch.arange(max(0, N - ntail), N)]))
        self.rows = rows.to(qh.device)
        self.heads = [h for h in dict.fromkeys(heads) if 0 <= h < H]
        scale = 1.0 / math.sqrt(D)
        self.ref = {h: ref_rows(qh, kh, vh, mask, bq, bk, h, self.rows, scale) for h in self.heads}

    def rel_l2(self, o_hnd: torch.Tensor) -> Optional[float]:
        errs = [_rel(o_hnd[h].index_select(0, self.rows), self.ref[h]) for h in self.heads]
        return finite(max(errs)) if errs else None

    def describe(self) -> str:
        return (f"fp32 E(M) from the bf16 inputs on {len(self.rows)} query rows (random + the last 32: the ragged "
                f"tail) of heads {self.heads}; rel_l2 = max over those heads of ||O - O_ref|| / ||O_ref||")


def rel_l2_full(a_hnd: torch.Tensor, b_hnd: torch.Tensor) -> Optional[float]:
    """||a - b|| / ||b|| over whole [H, N, D] outputs (any strides), accumulated per head in fp32."""
    num = den = 0.0
    for h in range(a_hnd.shape[0]):
        x, y = a_hnd[h].float(), b_hnd[h].float()
        num += float((x - y).pow(2).sum())
        den += float(y.pow(2).sum())
    return finite(math.sqrt(num / den)) if den > 0 else finite(math.sqrt(num))


def finite(x: Optional[float]) -> Optional[float]:
    """JSON has no NaN: a non-finite result becomes None (the caller notes it)."""
    return float(x) if x is not None and math.isfinite(x) else None


def release() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
