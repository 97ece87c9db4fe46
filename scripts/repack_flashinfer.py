#!/usr/bin/env python3
"""Trims a flashinfer-python wheel to what the peer scoreboard needs and writes a valid wheel (fresh RECORD).

Kept: every Python file and every non-CUDA file (so `import flashinfer` and its lazy imports work), and the CUDA
sources and headers that the JIT build of the FA3 batch-prefill module and the Cake SM90 VSA kernels use:
data/include, data/cutlass, data/cccl, data/spdlog, cake_vsa_sm90_backend/, and the top level of data/csrc
(templates, headers and the attention .cu sources). Dropped: the CUDA sources of every other feature's JIT kernels
(MoE, GEMM, communication, ...). 0.7.4: 101 MB -> about 38 MiB. The output keeps the input's file name (pip
refuses a wheel whose name does not follow the wheel naming convention).

Usage: repack_flashinfer.py IN.whl OUT_DIR [--deps DEPS_LIST]
  DEPS_LIST: headers a JIT build included (one path per line, e.g. from `ninja -t deps`); paths under
  .../flashinfer/ are kept even outside the kept zones.
"""
import argparse
import base64
import hashlib
import os
import re
import sys
import zipfile

CUDA_EXT = (".cu", ".cuh", ".h", ".hpp", ".cubin", ".ptx", ".cc", ".cpp", ".c", ".inc", ".fatbin")
KEEP_ZONES = ("flashinfer/data/include/", "flashinfer/data/cutlass/", "flashinfer/data/cccl/",
              "flashinfer/data/spdlog/", "flashinfer/cake_vsa_sm90_backend/")
CSRC = "flashinfer/data/csrc/"
CSRC_CU_KEEP = re.compile(r"^(batch_prefill|batch_decode|single_prefill|single_decode|batch_attention|pod|"
                          r"cascade|page|quantization|flashinfer_ops|tvm_ffi)[^/]*\.cu$")


def keep(name: str, deps: set) -> bool:
    if name in deps or name.startswith(KEEP_ZONES):
        return True
    if name.startswith(CSRC):
        rest = name[len(CSRC):]
        if "/" not in rest:  # top-level csrc: templates, headers, the attention .cu sources
            return not rest.endswith(".cu") or bool(CSRC_CU_KEEP.match(rest))
        return not rest.endswith(CUDA_EXT)  # subdirectories: keep python/json, drop CUDA sources
    if name.startswith("flashinfer/") and name.endswith(CUDA_EXT):
        return False  # CUDA sources of other features' JIT kernels
    return True


def read_deps(path):
    deps = set()
    if path:
        with open(path) as f:
            for line in f:
                i = line.strip().find("/flashinfer/")
                if i >= 0:
                    deps.add("flashinfer/" + line.strip()[i + len("/flashinfer/"):])
    return deps


def repack(src: str, out_dir: str, deps: set, keep_fn=None, tool: str = "repack_flashinfer") -> str:
    """Writes OUT_DIR/<input name>: the files of `src` for which keep_fn(name, deps) (default: keep) is true, with a
    fresh RECORD. Other trimmed wheels (scripts/repack_diffusers.py) pass their own keep_fn."""
    keep_fn = keep if keep_fn is None else keep_fn
    dst = os.path.join(out_dir, os.path.basename(src))
    if os.path.abspath(dst) == os.path.abspath(src):
        raise SystemExit(f"{tool}: OUT_DIR must differ from the input's directory")
    zin = zipfile.ZipFile(src)
    dist_info = next(n.split("/")[0] for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
    record_name = f"{dist_info}/RECORD"
    rows, kept, dropped, dropped_bytes = [], 0, 0, 0
    with zipfile.ZipFile(dst + ".tmp", "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info in zin.infolist():
            if info.filename == record_name or info.is_dir():
                continue
            if not keep_fn(info.filename, deps):
                dropped += 1
                dropped_bytes += info.file_size
                continue
            data = zin.read(info.filename)
            zi = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            zi.external_attr = info.external_attr
            zi.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(zi, data, compresslevel=9)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{info.filename},sha256={digest},{len(data)}")
            kept += 1
        rows.append(f"{record_name},,")
        zout.writestr(record_name, "\n".join(rows) + "\n")
    os.replace(dst + ".tmp", dst)
    print(f"{tool}: kept {kept} files, dropped {dropped} ({dropped_bytes / 2**20:.1f} MiB raw); "
          f"{os.path.getsize(src) / 2**20:.1f} -> {os.path.getsize(dst) / 2**20:.1f} MiB: {dst}")
    return dst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wheel")
    ap.add_argument("out_dir")
    ap.add_argument("--deps", help="header list of a JIT build (kept in addition)")
    a = ap.parse_args(argv)
    os.makedirs(a.out_dir, exist_ok=True)
    repack(a.wheel, a.out_dir, read_deps(a.deps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
