"""Reads Tessera mask files with safetensors + numpy alone and checks the documented bit order.

Usage: python3 test_mask_files.py TESSERA_BINARY WORK_DIR
Generates a small corpus (STA-real and Q64K64-HD) with `tessera masks generate --small`, then for every file:
unpacks the mask with numpy.unpackbits (big-endian bits along the kv-block axis), checks shape and metadata,
compares the density with the manifest, and, for the native STA cases, rebuilds every head's mask from its window
with the clamped STA rule and requires bit-exact equality. Exit code 77 (CTest skip) if numpy/safetensors are absent.
"""
import json
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
    from safetensors import safe_open
except ImportError as e:  # pragma: no cover
    print(f"skipping: {e}")
    sys.exit(77)

from sta_rule import sta_window_mask  # noqa: E402  (the STA rule as loops, this directory; outside the skip above)


def main():
    tessera, work = sys.argv[1], sys.argv[2]
    out = os.path.join(work, "py_corpus")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([tessera, "masks", "generate", "--small", "--families", "STA-real", "Q64K64-HD", "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    assert len(manifest["cases"]) > 0
    checked_sta = 0
    for entry in manifest["cases"]:
        path = os.path.join(out, entry["file"])
        tensors = load_file(path)
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata()
        packed = tensors["mask"]
        assert packed.dtype == np.uint8
        heads, n_qb, n_kvb = int(meta["heads"]), int(meta["n_qb"]), int(meta["n_kvb"])
        assert packed.shape == (1, heads, n_qb, (n_kvb + 7) // 8), packed.shape
        assert n_qb == -(-int(meta["n_q"]) // int(meta["block_q"]))
        dense = np.unpackbits(packed, axis=-1, count=n_kvb)
        assert dense.shape == (1, heads, n_qb, n_kvb)
        assert abs(dense.mean() - entry["density"]) < 1e-9, (path, dense.mean(), entry["density"])
        assert meta["family"] == entry["family"] and meta["split"] == entry["split"]
        if meta["family"] == "STA-real" and meta["block_q"] == "384":
            windows = [tuple(int(x) for x in re.findall(r"\d+", n)) for n in json.loads(meta["notes"])]
            assert len(windows) == heads
            cache = {}
            for h, w in enumerate(windows):
                if w not in cache:
                    cache[w] = sta_window_mask(w)
                assert np.array_equal(dense[0, h], cache[w]), (path, h, w)
            checked_sta += 1
    assert checked_sta > 0
    shutil.rmtree(out, ignore_errors=True)
    generic = check_generic_masks(tessera, os.path.join(work, "py_generic"))
    print(f"ok: {len(manifest['cases'])} files, {checked_sta} STA cases bit-exact; {generic} generic mask files")


def check_generic_masks(tessera, out):
    """bench/generic_masks.py's files (written by numpy alone) are read by the C++ mask-file reader as the cases the
    embedded table's profile lists: `tessera profile --masks DIR --list` names each with its split and request."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import generic_masks  # noqa: E402

    shutil.rmtree(out, ignore_errors=True)
    assert generic_masks.main(["--out", out, "--families", "Q128K64"]) == 0
    listed = subprocess.run([tessera, "profile", "--masks", out, "--list", "--splits", "profiling", "evaluation"],
                            check=True, capture_output=True, text=True).stdout.split("\n")
    listed = [line.split() for line in listed if line.strip()]
    want = {(f"Q128K64/generic-{r}/{k}", split) for r in generic_masks.RECIPES
            for k, (split, *_rest) in enumerate(generic_masks.REQUESTS)}
    assert {(f[0], f[1]) for f in listed} == want, listed
    shutil.rmtree(out, ignore_errors=True)
    return len(listed)


if __name__ == "__main__":
    main()
