#!/usr/bin/env python3
"""The peer scoreboard on the GPU machine: every workload x system, within a time budget, as JSON + charts + Markdown.

    python3 bench/peers/run.py --out $OUT/peers [--seconds 500] [--quick] [--workloads families,sta,...]
                               [--systems tessera,flashinfer,...] [--tessera-module-dir build/gpu/python]

(scripts/gpu_peers.sh installs the staged FlashInfer wheels, sets FlashInfer's JIT environment and runs this.)
Writes OUT/<date>_<revision>.json, OUT/latest.json (same content), OUT/RESULTS.md, OUT/tflops.png and
OUT/speedup.png. The JSON is rewritten after every row, so a run killed by the device's time limit still leaves a
valid file; rows the run did not reach are error rows starting with "not run". Before each row the harness
estimates its cost and writes "not run: time budget ..." instead when it would not fit in --seconds.
Measurement rules: bench/peers/README.md (and the `protocol` field of the JSON).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
import traceback
from typing import Any, Dict, List, Optional

T0 = time.monotonic()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: the `peers` package

from peers import report, schema  # noqa: E402
from peers import corpus_requests  # noqa: E402
from peers.paths import out_dir_error  # noqa: E402
from peers.corpus_requests import CORPUS_FAMILIES  # noqa: E402
from peers.workloads import REPO, STA_CASE, Workload, all_workloads, mask_stats, select  # noqa: E402

ORDER = ("tessera", "flashinfer", "flex", "tessera-best", "cudnn")  # tessera first: the others compare with it


class Stop(BaseException):
    """SIGTERM: write what we have and leave (a BaseException: no `except Exception` of a runner swallows it)."""


def _on_signal(signum, frame):  # noqa: ARG001
    raise Stop(f"signal {signum}")


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seconds", type=float, default=500.0, help="time budget of the whole run (default 500)")
    ap.add_argument("--workloads", default="all", help="comma list of workload names or groups "
                                                       "(families, sta, wan, dense, corpus, all)")
    ap.add_argument("--systems", default=",".join(schema.SYSTEMS), help="comma list of systems")
    ap.add_argument("--quick", action="store_true", help="cheaper screening: 1 Flex configuration, the primary "
                    "FlashInfer form only, a shorter Tessera plan sweep, 3 request repetitions")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10, help="timed kernel repetitions (>= 10)")
    ap.add_argument("--interleave-rounds", type=int, default=10,
                    help="after every system ran on a workload, time their kernels again in this many alternating "
                         "rounds (order shuffled each round) and report those medians as kernel_ms (the first "
                         "measurement stays as kernel_ms_alone); 0 = off (default 10)")
    ap.add_argument("--request-reps", type=int, default=None, help="timed requests (default 5, --quick 3)")
    ap.add_argument("--sweep-seconds", type=float, default=None, help="Tessera plan sweep per workload "
                    "(default 20 s, --quick 8 s)")
    ap.add_argument("--sweep-max-plans", type=int, default=None, help="0 = every eligible plan (default; --quick 8)")
    ap.add_argument("--flex-candidates", type=int, default=None, help="Flex configurations tried (default 2, "
                    "--quick 1)")
    ap.add_argument("--fi-forms", default=None, help="FlashInfer forms: fold, variable, cake, auto (= fold when N "
                    "divides, else variable); default fold,variable,cake (--quick: auto)")
    ap.add_argument("--fi-jit-timeout", type=float, default=300.0, help="bound of FlashInfer's JIT build (s)")
    ap.add_argument("--tessera-module-dir", default=None, help="directory holding tessera/_C*.so (default: the "
                    "first of build/gpu/python, build/ci/python, build/dev/python that has it)")
    ap.add_argument("--sta-case", default=f"{STA_CASE[0]}_{STA_CASE[1]}", help="STA table step_layer (default "
                    "%(default)s)")
    ap.add_argument("--sta-table", default=None)
    ap.add_argument("--corpus-dir", default=None, help="corpus-eval: a directory of whole requests (`tessera masks "
                    "generate --whole-requests ...`); default: the harness writes one into --corpus-gen-dir with "
                    "--tessera-bin")
    ap.add_argument("--corpus-requests", type=int, default=2, help="corpus-eval: whole requests per family "
                    "(default 2; with --corpus-dir at most this many of each family are used)")
    ap.add_argument("--corpus-families", default=",".join(CORPUS_FAMILIES), help="corpus-eval families "
                    "(default all ten)")
    ap.add_argument("--corpus-gen-dir", default="/tmp/peers_corpus_requests", help="where the harness writes the "
                    "whole requests when --corpus-dir is not given (outside $OUT: tens of MB)")
    ap.add_argument("--tessera-bin", default=None, help="the tessera command line (default: build/gpu/bin/tessera, "
                    "else build/ci, build/dev)")
    ap.add_argument("--revision", default=None, help="default: .revision, else git, else tessera._C")
    ap.add_argument("--device", default="cuda", help="cuda (the scoreboard) or cpu (a smoke run of the harness)")
    ap.add_argument("--scale", type=float, default=1.0, help="shrink N and heads (smoke runs only)")
    ap.add_argument("--no-report", action="store_true", help="skip RESULTS.md and the charts")
    a = ap.parse_args(argv)
    q = a.quick
    a.request_reps = a.request_reps or (3 if q else 5)
    a.sweep_seconds = a.sweep_seconds if a.sweep_seconds is not None else (8.0 if q else 20.0)
    a.sweep_max_plans = a.sweep_max_plans if a.sweep_max_plans is not None else (8 if q else 0)
    a.flex_candidates = a.flex_candidates or (1 if q else 2)
    a.fi_forms = [f.strip() for f in (a.fi_forms or ("auto" if q else "fold,variable,cake")).split(",") if f.strip()]
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    for s in a.systems:
        if s not in schema.SYSTEMS:
            ap.error(f"--systems: unknown system {s!r} (known: {', '.join(schema.SYSTEMS)})")
    if a.reps < 10 and a.device == "cuda":
        ap.error("--reps: the protocol needs at least 10 timed repetitions")
    if a.corpus_requests < 1:
        ap.error("--corpus-requests: must be >= 1")
    if a.interleave_rounds < 0:
        ap.error("--interleave-rounds: must be >= 0 (0 = off)")
    for name, value, ok, want in (
            ("--seconds", a.seconds, a.seconds > 0, "> 0"),
            ("--request-reps", a.request_reps, a.request_reps >= 1, ">= 1"),
            ("--warmup", a.warmup, a.warmup >= 0, ">= 0"),
            ("--sweep-seconds", a.sweep_seconds, a.sweep_seconds >= 0, ">= 0"),
            ("--sweep-max-plans", a.sweep_max_plans, a.sweep_max_plans >= 0, ">= 0 (0 = every eligible plan)"),
            ("--flex-candidates", a.flex_candidates, a.flex_candidates >= 1, ">= 1"),
            ("--fi-jit-timeout", a.fi_jit_timeout, a.fi_jit_timeout > 0, "> 0"),
            ("--scale", a.scale, 0 < a.scale <= 1, "in (0, 1]")):
        if not ok:
            ap.error(f"{name}: must be {want}, got {value}")
    if a.device not in ("cuda", "cpu"):
        ap.error(f"--device: 'cuda' (the scoreboard) or 'cpu' (a smoke run), got {a.device!r}")
    for f in a.fi_forms:
        if f not in ("fold", "variable", "cake", "auto"):
            ap.error(f"--fi-forms: unknown form {f!r} (known: fold, variable, cake, auto)")
    a.corpus_families = [f.strip() for f in a.corpus_families.split(",") if f.strip()]
    for f in a.corpus_families:
        if f not in CORPUS_FAMILIES:
            ap.error(f"--corpus-families: unknown family {f!r} (known: {', '.join(CORPUS_FAMILIES)})")
    st, sep, sl = a.sta_case.partition("_")
    if not (sep and st.isdigit() and sl.isdigit()) or not (0 <= int(st) < 50 and 0 <= int(sl) < 60):
        ap.error(f"--sta-case: STEP_LAYER with a denoising step in 0..49 and a layer in 0..59 (the HunyuanVideo "
                 f"table), got {a.sta_case!r}")
    a.sta_case = (int(st), int(sl))
    if not a.workloads.strip():
        ap.error("--workloads: empty (names or groups, comma-separated; 'all' for every workload)")
    for opt, d in (("--corpus-dir", a.corpus_dir), ("--tessera-module-dir", a.tessera_module_dir)):
        if d is not None and not os.path.isdir(d):
            ap.error(f"{opt}: {d!r} is not a directory")
    return a


def find_module_dir(explicit: Optional[str]) -> Optional[str]:
    if explicit:
        return explicit
    for preset in ("gpu", "ci", "dev"):
        d = os.path.join(REPO, "build", preset, "python")
        if os.path.isdir(os.path.join(d, "tessera")) and any(
                f.startswith("_C") for f in os.listdir(os.path.join(d, "tessera"))):
            return d
    return None


def revision(explicit: Optional[str]) -> str:
    if explicit:
        return explicit
    try:
        with open(os.path.join(REPO, ".revision")) as f:
            r = f.read().strip()
            if r:
                return r
    except OSError:
        pass
    try:
        r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                           timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            dirty = subprocess.run(["git", "-C", REPO, "diff", "--quiet", "HEAD"], timeout=10).returncode
            return r.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def estimate_s(system: str, w: Workload, stats: Dict[str, Any], a: argparse.Namespace) -> float:
    """Pessimistic seconds for one row: kernel calls at a low assumed rate plus the system's fixed costs."""
    pairs = stats["active_pairs"]
    small = min(w.block_q, w.block_kv) < 64
    rate = {"tessera": 100e12, "tessera-best": 100e12, "flex": 30e12 if small else 120e12,
            "flashinfer": 40e12 if small else 150e12, "cudnn": 400e12}[system]
    call = 4.0 * w.head_dim * pairs / rate
    if system == "tessera":
        return 1.0 + call * (3 + a.request_reps + a.warmup + a.reps + 2)
    if system == "tessera-best":  # the sweep: ~60 eligible plans x (6 calls + launch preparation), capped
        plans = 60 if a.sweep_max_plans <= 0 else a.sweep_max_plans
        return min(a.sweep_seconds, plans * (0.05 + 6 * call)) + 2.0 + call * (10 + a.request_reps + a.warmup + a.reps)
    if system == "flex":
        return a.flex_candidates * (5.0 + 6 * call) + call * (a.request_reps + a.warmup + a.reps + 2) + 1.0
    if system == "flashinfer":
        forms = 1 if a.fi_forms == ["auto"] else 2
        cake = 25.0 if ("cake" in a.fi_forms and (w.block_q, w.block_kv) == (64, 64) and w.n % 64 == 0
                        and stats.get("row_blocks_max", 65) <= 64) else 0.0  # its host planner: seconds a call
        return forms * (1.0 + 0.05 * (a.request_reps + 2) + call * (a.request_reps + a.warmup + a.reps + 3)) + cake
    return 1.0 + call * (a.request_reps + a.warmup + a.reps + 3)


def corpus_source(a: argparse.Namespace, log=print) -> Dict[str, Any]:
    """all_workloads()'s corpus arguments: the whole-request directory (given, or written now with the tessera
    command line when the corpus group is selected), or the reason why there is none (its error rows)."""
    kw: Dict[str, Any] = {"corpus_per_family": a.corpus_requests, "corpus_families": a.corpus_families}
    if a.corpus_dir:
        return {**kw, "corpus_dir": a.corpus_dir}
    if not any(w.group == "corpus" for w in select(all_workloads(1.0, a.sta_case, a.sta_table), a.workloads)):
        return kw
    tessera = corpus_requests.find_tessera_bin(REPO, a.tessera_bin)
    if not tessera:
        return {**kw, "corpus_error": f"{schema.NOT_RUN}: no tessera command line (build/gpu/bin/tessera; "
                                      f"--tessera-bin) to write the whole requests, and no --corpus-dir"}
    t = time.monotonic()
    try:
        d = corpus_requests.generate(tessera, a.corpus_gen_dir, a.corpus_families, a.corpus_requests,
                                     timeout_s=max(30.0, 0.4 * a.seconds))
    except (RuntimeError, OSError, subprocess.SubprocessError) as ex:
        return {**kw, "corpus_error": f"{schema.NOT_RUN}: writing the whole requests failed: {str(ex)[:400]}"}
    log(f"peers: whole requests in {d} ({time.monotonic() - t:.1f} s)", flush=True)
    return {**kw, "corpus_dir": d}


class Run:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.deadline = T0 + a.seconds
        self.rev = revision(a.revision)
        now = _dt.datetime.now(_dt.timezone.utc)
        self.date = now.strftime("%Y-%m-%d")
        self.workloads = select(all_workloads(a.scale, a.sta_case, a.sta_table, **corpus_source(a)), a.workloads)
        err = out_dir_error(a.out)  # after the workloads: a bad --workloads leaves no directory behind
        if err:
            raise ValueError(err)
        self.path = os.path.join(a.out, f"{self.date}_{self.rev}.json")
        self.doc: Dict[str, Any] = {
            "schema": schema.SCHEMA, "revision": self.rev, "gpu": None, "date": self.date,
            "timestamp": now.isoformat(timespec="seconds"),
            "command": " ".join(shlex.quote(x) for x in [os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
            "env": {"python": platform.python_version()}, "protocol": {},
            "workloads": [w.describe() for w in self.workloads], "rows": []}
        self.rows: Dict[Any, Dict[str, Any]] = {}
        for w in self.workloads:
            for s in schema.SYSTEMS:
                why = (f"{schema.NOT_RUN}: excluded by --systems" if s not in a.systems else
                       f"{schema.NOT_RUN}: the run ended before this row (time budget or interrupted)")
                self.rows[(w.name, s)] = schema.error_row(w.name, s, why)
        self.write()

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def write(self) -> None:
        self.doc["rows"] = [self.rows[(w.name, s)] for w in self.workloads for s in schema.SYSTEMS]
        self.doc["elapsed_s"] = round(time.monotonic() - T0, 1)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, default=str)
        os.replace(tmp, self.path)
        tmp = os.path.join(self.a.out, "latest.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, default=str)
        os.replace(tmp, os.path.join(self.a.out, "latest.json"))

    def put(self, r: Dict[str, Any]) -> None:
        r.setdefault("revision", self.rev)
        self.rows[(r["workload"], r["system"])] = r
        self.write()
        msg = r.get("error") or (f"kernel {r['kernel_ms']:.3f} ms ({r['tflops']:.0f} TF/s), request "
                                 f"{(r.get('request_ms') or float('nan')):.2f} ms, rel_l2 {r.get('rel_l2')}, "
                                 f"{r.get('plan') or r.get('form') or ''}")
        print(f"[{time.monotonic() - T0:6.1f} s] {r['workload']:15s} {r['system']:12s} {msg}", flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    a = parse(argv)
    if a.device == "cuda":  # before anything is written: a run without its GPU must not replace earlier results
        import torch
        if not torch.cuda.is_available():
            print("peers: error: --device cuda: no CUDA device visible (use --device cpu for a smoke run); nothing "
                  "written", file=sys.stderr)
            return 1
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        run = Run(a)
    except ValueError as ex:  # --workloads naming no workload (select), a bad --out; before the skeleton is written
        print(f"peers: error: {ex}", file=sys.stderr)
        return 2
    print(f"peers: {len(run.workloads)} workloads x {len(a.systems)} systems, budget {a.seconds:.0f} s, "
          f"output {run.path}", flush=True)
    try:
        _measure(run, a)
    except Stop as ex:
        print(f"peers: stopped ({ex}); writing what was measured", flush=True)
        run.doc["stopped"] = str(ex)
    finally:
        run.write()
    if not a.no_report:
        try:
            report.generate(run.doc, os.path.join(a.out, "RESULTS.md"), a.out, os.path.basename(run.path))
        except Exception as ex:  # the JSON is what matters; report.py can redo this anywhere
            print(f"peers: report failed: {ex!r}", flush=True)
    problems = schema.validate(run.doc)
    print(f"peers: done in {time.monotonic() - T0:.0f} s; {len(problems)} schema problems; {run.path}", flush=True)
    for p in problems[:10]:
        print("  " + p)
    return 0


def _measure(run: Run, a: argparse.Namespace) -> None:
    import torch

    from peers import gpu, systems

    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("peers: no CUDA device visible (use --device cpu for a smoke run)")
    torch.backends.cuda.matmul.allow_tf32 = False
    env = run.doc["env"]
    env.update({"torch": torch.__version__, "torch_cuda": torch.version.cuda})
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        pass
    if cuda:
        p = torch.cuda.get_device_properties(dev)
        run.doc["gpu"] = torch.cuda.get_device_name(dev)
        env.update({"sms": p.multi_processor_count, "capability": list(torch.cuda.get_device_capability(dev))})
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            env["driver"], env["clocks_sm_now_max"] = smi.stdout.strip().split(", ", 1)
        except Exception:
            pass
    else:
        run.doc["gpu"] = f"cpu ({platform.processor() or platform.machine()}): smoke run, not a measurement"
    timer = gpu.Timer(dev, warm=a.warmup, reps=a.reps, req_reps=a.request_reps)
    ref_desc = None
    run.doc["protocol"] = {
        **timer.describe(),
        **({"kernel_ms": f"interleaved: after every system ran on a workload, its kernel is timed again in "
                         f"{a.interleave_rounds} rounds that time each system once (L2 flushed, CUDA events) in an "
                         f"order shuffled every round (seeded by the round); kernel_ms = the median over the rounds (Tessera rows re-prime "
                         f"their exact-repeat cache untimed before each); kernel_ms_alone = "
                         f"{timer.describe()['kernel_ms']}"} if a.interleave_rounds > 0 else {}),
        "first_call_ms": "one synchronised call on the workload's first use: Flex = torch.compile + run of the "
                         "chosen configuration; FlashInfer = new wrapper + conversion + plan() + run() (its module "
                         "JIT-compiled or loaded beforehand, timed as jit_ms); Tessera = the first request with "
                         "this mask and shape (runtime creation is timed once, env.tessera_init_ms)",
        "tflops": "4 * head_dim * active (query, key) token pairs / kernel time; a partial last block counts its "
                  "real tokens only",
        "tessera": "tessera.block_sparse_attention(q [1, N, H, D], ..., dense bool mask [1, H, n_qb, n_kvb]); "
                   "kernel = exact repeats (mask_version), request = mask_version 0; tessera-best = the fastest "
                   "plan of a sweep over eligible plans (forced with plan_id)",
        "flashinfer": "fold form (BlockSparseAttentionWrapper, heads folded into rows) and "
                      "VariableBlockSparseAttentionWrapper; the row is the faster correct form; plan() (and the "
                      "mask -> BSR conversion) inside the request",
        "flex": "torch.compile(flex_attention), one compiled function per configuration, dynamo limits raised; "
                "BlockMask.from_kv_blocks(..., seq_lengths=(N, N)) built inside the request; an N that is not a "
                "multiple of lcm(B_Q, B_KV, 128) also screens the padded form (q, k, v zero-padded to N', "
                "seq_lengths=(N', N'), the tail "
                "block partial with mask_mod kv_idx < N; the copy inside the request)",
        "cudnn": "SDPA with SDPBackend.CUDNN_ATTENTION only, dense workload only",
        "inputs": "q, k, v ~ N(0, 1) bf16 from torch.Generator(device).manual_seed(qkv_seed), [H, N, D]; per-head "
                  "masks from numpy PCG64(mask_seed) (bench/peers/workloads.py)",
        "settings": f"quick={a.quick}, warmup={a.warmup}, reps={a.reps}, interleave_rounds={a.interleave_rounds}, "
                    f"request_reps={a.request_reps}, "
                    f"sweep_seconds={a.sweep_seconds}, sweep_max_plans={a.sweep_max_plans}, "
                    f"flex_candidates={a.flex_candidates}, fi_forms={','.join(a.fi_forms)}, budget={a.seconds:.0f}s",
    }

    # ---- systems (each may be unavailable: its rows then carry the reason)
    live: Dict[str, Any] = {}
    broken: Dict[str, str] = {}

    def start(name: str, make) -> None:
        try:
            live[name] = make()
        except Exception as ex:
            msg = str(ex)
            broken[name] = msg if msg.startswith(schema.NOT_RUN) else f"{type(ex).__name__}: {msg[:400]}"
            print(f"peers: {name} unavailable: {broken[name]}", flush=True)
            traceback.print_exc(limit=3)

    want = set(a.systems)
    runnable = [w for w in run.workloads if not w.unsupported]
    if want & {"tessera", "tessera-best"}:
        mdir = find_module_dir(a.tessera_module_dir)
        env["tessera_module_dir"] = mdir
        start("tessera", lambda: systems.Tessera(mdir, dev, timer))
        if "tessera" in live:
            t = live["tessera"]
            env.update({"tessera_module": t.module_file, "tessera_version": t.version,
                        "tessera_git_revision": t.git_revision, "tessera_init_ms": round(t.init_ms, 1)})
    if "flex" in want:
        start("flex", lambda: systems.Flex(timer))
    if "cudnn" in want:
        start("cudnn", lambda: systems.Cudnn(timer))
    if "flashinfer" in want and runnable:
        if not cuda:
            broken["flashinfer"] = "FlashInfer needs a CUDA GPU"
        else:  # the JIT build (~104 s on the H200 when not cached) may use the budget less 30 s
            start("flashinfer", lambda: systems.FlashInfer(dev, timer, 128, min(a.fi_jit_timeout, run.left() - 30)))
            if isinstance(broken.get("flashinfer"), str) and "No module named 'flashinfer'" in broken["flashinfer"]:
                broken["flashinfer"] += " (stage it with scripts/stage_peer_wheels.sh, carry .whl, run scripts/gpu_peers.sh)"
            if "flashinfer" in live:
                fi = live["flashinfer"]
                env.update({"flashinfer": fi.version, "flashinfer_jit": fi.jit,
                            "flashinfer_workspace_base": os.environ.get("FLASHINFER_WORKSPACE_BASE")})
                print(f"peers: FlashInfer {fi.version}: {fi.jit}", flush=True)
    run.write()

    qkv_cache: Dict[Any, Any] = {}
    for w in run.workloads:
        if w.unsupported:
            for s in schema.SYSTEMS:
                run.put(schema.error_row(w.name, s, w.unsupported))
            continue
        if run.left() < 10:
            print(f"peers: {w.name}: not run (time budget)", flush=True)
            for s in a.systems:
                run.put(schema.error_row(w.name, s, f"{schema.NOT_RUN}: time budget ({run.left():.0f} s left)"))
            continue
        t_prep = time.monotonic()
        mask_np = w.mask()
        stats = mask_stats(mask_np, w.n, w.block_q, w.block_kv)
        for d in run.doc["workloads"]:
            if d["name"] == w.name:
                d.update(stats)
        key = (w.n, w.heads, w.head_dim, w.qkv_seed)
        if key not in qkv_cache:
            qkv_cache.clear()
            if cuda:
                torch.cuda.empty_cache()
            qkv_cache[key] = gpu.make_qkv(w.n, w.heads, w.head_dim, w.qkv_seed, dev)
        hnd = qkv_cache[key]
        mask = torch.from_numpy(mask_np).to(dev)
        del mask_np
        ref = gpu.Reference(*hnd, mask, w.block_q, w.block_kv, heads=(0, w.heads - 1))
        ref_desc = ref_desc or ref.describe()
        run.doc["protocol"]["rel_l2"] = ref_desc
        run.doc["protocol"]["rel_l2_vs_tessera"] = ("||O - O_tessera|| / ||O_tessera|| over the whole output, "
                                                    "against Tessera's selected plan")
        case = systems.Case(w, mask, stats, hnd, ref)
        print(f"[{time.monotonic() - T0:6.1f} s] {w.name}: N={w.n} H={w.heads} B={w.block_q}x{w.block_kv} "
              f"density {stats['density']:.4f}, {stats['active_pairs']:.3e} pairs (prepared in "
              f"{time.monotonic() - t_prep:.1f} s)", flush=True)
        fns: Dict[str, Any] = {}  # system -> (kernel callable, prime callable or None), for interleave()
        for s in ORDER:
            if s not in want:
                continue
            owner = "tessera" if s == "tessera-best" else s
            if owner in broken:
                msg = broken[owner]
                run.put(schema.error_row(w.name, s, msg if msg.startswith(schema.NOT_RUN) else
                                         f"{owner} unavailable: {msg}"))
                continue
            if s == "cudnn" and w.group != "dense":
                run.put(live["cudnn"].run(case))
                continue
            if s == "tessera-best" and not cuda:  # the sweep forces plans through the GPU runtime's eligibility
                run.put(schema.error_row(w.name, s, "not applicable: the plan sweep needs the GPU runtime "
                                                    "(--device cuda)"))
                continue
            est = estimate_s(s, w, stats, a)
            if run.left() < est:
                run.put(schema.error_row(w.name, s, f"{schema.NOT_RUN}: time budget ({run.left():.0f} s left, this "
                                                    f"row needs about {est:.0f} s)"))
                continue
            t_row = time.monotonic()
            try:
                if s == "tessera":
                    r = live["tessera"].selected(case)
                elif s == "tessera-best":
                    r = live["tessera"].best(case, a.sweep_seconds, a.sweep_max_plans)
                elif s == "flex":
                    r = live["flex"].run(case, a.flex_candidates)
                elif s == "flashinfer":
                    r = live["flashinfer"].run(case, a.fi_forms)
                else:
                    r = live["cudnn"].run(case)
                r["wall_s"] = round(time.monotonic() - t_row, 1)
            except Stop:
                raise
            except Exception as ex:
                traceback.print_exc(limit=4)
                r = schema.error_row(w.name, s, f"{type(ex).__name__}: {str(ex)[:500]}",
                                     wall_s=round(time.monotonic() - t_row, 1))
                if cuda:
                    torch.cuda.synchronize()
            fn, prime = r.pop("_kernel_fn", None), r.pop("_prime_fn", None)
            if fn is not None and not r.get("error"):
                fns[s] = (fn, prime)
            run.put(r)
            if cuda:
                torch.cuda.empty_cache()
        if a.interleave_rounds > 0 and len(fns) >= 2:
            interleave(run, w, stats, timer, fns, a.interleave_rounds)
        del case, mask, ref, fns
        if cuda:
            torch.cuda.empty_cache()


def interleave(run: Run, w: Workload, stats: Dict[str, Any], timer, fns: Dict[str, Any], rounds: int) -> None:
    """Times the workload's measured kernels again in alternation (gpu.Timer.interleaved_ms): a system measured alone
    a minute after another can see other clocks or temperatures, and single medians of the same plan moved by up to
    10 % within one run (bench/NOTES.md, session 16). The rows keep their first measurement as kernel_ms_alone and get
    the interleaved median as kernel_ms (and tflops from it). Skipped, with a note, when the budget cannot cover it."""
    from peers.metrics import tflops
    systems = list(fns)
    rows = [run.rows[(w.name, s)] for s in systems]
    # per round and system: the timed call and its flush, ~0.5 ms of overhead, and a primed system's prime (a Tessera
    # call or a FlashInfer plan(), bounded by its request time)
    est_s = 1e-3 * rounds * sum(2 * r["kernel_ms"] + 0.5 + (r.get("request_ms") or r["kernel_ms"]
                                                            if fns[s][1] is not None else 0.0)
                                for s, r in zip(systems, rows)) + 2
    if run.left() < est_s + 5:
        for r in rows:
            r["note"] = "; ".join(x for x in (r.get("note"), "not interleaved (time budget)") if x)
        run.write()
        return
    ms = timer.interleaved_ms([fns[s][0] for s in systems], rounds, primes=[fns[s][1] for s in systems])
    for r, m in zip(rows, ms):
        r["kernel_ms_alone"] = r["kernel_ms"]
        r["kernel_ms"] = m
        r["tflops"] = tflops(stats["active_pairs"], w.head_dim, m)
        run.put(r)


if __name__ == "__main__":
    sys.exit(main())
