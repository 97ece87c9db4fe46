"""Error paths of the `tessera` command line: every bad input gives a non-zero exit and a message naming the option or
file, and nothing is reported as written that was not.

Usage: python3 test_cli_errors.py TESSERA_BINARY WORK_DIR
Covers: checked output files (run --json, compile-table --out, --out = --in refused), compile-table record checks (case ids
included), compile-table --eval-report (rows, header alone, refused when it is --out however spelled, --in or empty), profile-refeature (records of an older schema re-featured and compiled; features that disagree with the
regenerated mask; bad case ids: one message naming --in and the line; a missing --sta-table named as such), run argument checks
(--families, the CPU path's notices for --cases-per-family, --no-regret and --no-check, --plan-table: missing, used, no tree
for the CPU default's head_dim-64 keys, another format version), mask files (padding bits, errors naming the path, directories,
crafted headers: overflowing sizes, bad integers and types), masks generate/stats and profile --list argument checks
(--seed, a non-empty --out, an STA table that is a directory; --whole-requests with --split / --cases-per-family),
profile --sources (one source's cases; an unknown or repeated source, a family with none named), profile-refeature
--masks (cases read from files; an output that is one of them; a case found nowhere; a missing file named with --masks), profile --masks (the user's mask files: --list lines with case id, split, request and path; missing files, directories
without masks or with masks only in subdirectories, repeated files or case ids, malformed files, one file of another
split, options it excludes), profile --case-ids (the named cases' --list lines, whole requests included, a leading
UTF-8 BOM skipped; a missing file, an empty path, a bad line named: several ids on it, '#' after an id, control bytes
escaped, a huge line cut; options it excludes), --list and --list-features exclusive, --out refused with either, profile --list-features
(one JSON object a line with every feature, for chosen cases and --case-ids; bench/pick_cases.py on its output gives
ids --case-ids takes), outputs refused before any work (an
output that is
an input: masks render, profile-refeature --case-stats, run --json over the STA table; --out = --case-stats; a repeated
profile --splits; paths on /proc or /sys, devices such as /dev/full, a directory as profile --out),
inspect catalog / inspect plan (errors naming plan_id), unknown or missing subcommands.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import zlib

FAILURES = []
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(tessera, *args):
    p = subprocess.run([tessera, *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, out=""):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}\n{out}")


def record(key, plan, latency=10.0, valid=True, split="profile", role=None, case="F/s0/0", source=None):
    """One profile record; `source` defaults to the source component of the case id "<family>/<source>/<index>"."""
    if source is None:
        source = case.split("/")[1] if case.count("/") >= 2 else "s0"
    r = {"case": case, "source": source, "split": split, "key": key,
         "features": {"batch_heads": 2, "seq_len": 1024, "density": 0.1, "run_coverage": 0.5,
                      "mean_run_length": 2, "mean_row_active": 4, "row_imbalance": 1.5,
                      "grid_rows": 256, "active_blocks": 1024,
                      "coarsen_cost2": 1.2, "coarsen_cost4": 1.3, "coarsen_cost8": 1.4},
         "plan": plan, "latency_us": latency, "valid": valid}
    if role:
        r["role"] = role
    return json.dumps(r)


def write(path, lines):
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))


def compile_table(tessera, work):
    key = "sm90a.bf16.d64.q16.kv16"
    plan = "sm90a.mma.bf16.d64.q16d.kv16d.g1.tasc.split1.s2.w4"
    good = [record(key, plan, case="F/s0/0", role="default"),
            record(key, plan, case="F/s0/1", split="eval", role="default")]
    path = os.path.join(work, "good.jsonl")
    write(path, good)
    out = os.path.join(work, "t.json")
    rc, so, se = run(tessera, "compile-table", "--in", path, "--out", out, "--min-leaf", "1")
    check(rc == 0 and os.path.exists(out), "compile-table on good records", so + se)
    check("no record has \"role\": \"direct\"" in so and "over 0 cases" not in so, "no-direct summary", so)
    check("note:" not in se, "compile-table: no note when every key has a default-role record", se)
    no_default = os.path.join(work, "no_default.jsonl")
    write(no_default, [record(key, plan, case="F/s0/0"), record(key, plan, case="F/s0/1", split="eval")])
    rc, so, se = run(tessera, "compile-table", "--in", no_default, "--out", os.path.join(work, "nd.json"), "--min-leaf", "1")
    check(rc == 0 and f"no record of key {key} has \"role\": \"default\"" in se and plan in se,
          "compile-table says which base plan it took for a key without a default-role record", so + se)
    with open(out) as f:
        table_plain = json.load(f)
    gz = os.path.join(work, "good.jsonl.gz")  # the committed record sets are gzip-compressed
    with open(path, "rb") as src, gzip.open(gz, "wb") as dst:
        dst.write(src.read())
    out_gz = os.path.join(work, "t_gz.json")
    rc, so, se = run(tessera, "compile-table", "--in", gz, "--out", out_gz, "--min-leaf", "1")
    with open(out_gz) as f:
        table_gz = json.load(f) if rc == 0 else None
    check(rc == 0 and table_gz == table_plain, "compile-table reads gzip-compressed records (same table)", so + se)
    truncated = os.path.join(work, "truncated.jsonl.gz")
    with open(gz, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    rc, so, se = run(tessera, "compile-table", "--in", truncated, "--out", out_gz, "--min-leaf", "1")
    check(rc == 2 and "--in" in se and "tessera:" in se, "compile-table on a truncated gzip file: an error naming --in",
          so + se)
    # cut right after a flushed whole line: what is left decompresses to whole records, and only zlib's end-of-stream
    # check tells that the file is cut (session 24: such a file compiled from part of its records, exit 0)
    cut_clean = os.path.join(work, "cut_clean.jsonl.gz")
    with open(cut_clean, "wb") as raw:
        z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip wrapper
        raw.write(z.compress((json.dumps(good[0]) + "\n").encode()) + z.flush(zlib.Z_SYNC_FLUSH))
    before_out = read_bytes(out_gz)
    rc, so, se = run(tessera, "compile-table", "--in", cut_clean, "--out", out_gz, "--min-leaf", "1")
    check(rc == 2 and "--in" in se and "truncated" in se and read_bytes(out_gz) == before_out,
          "compile-table on a gzip file cut at a line boundary: an io error, --out kept", so + se)
    # a write that fails (a file-size limit here, a full disk in life) leaves the existing table whole and no
    # temporary file behind
    def small_files():
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
    p = subprocess.run([tessera, "compile-table", "--in", path, "--out", out_gz, "--min-leaf", "1"],
                       capture_output=True, text=True, timeout=600, preexec_fn=small_files)
    leftovers = [f for f in os.listdir(work) if "tessera-tmp" in f]
    check(p.returncode == 2 and "--out" in p.stderr and read_bytes(out_gz) == before_out and not leftovers,
          "compile-table whose write fails keeps the old --out and leaves no temporary file", p.stdout + p.stderr)
    profile_only = os.path.join(work, "profile_only.jsonl")  # no evaluation-split record: no figures to print
    write(profile_only, [record(key, plan, case="F/s0/0", role="default,direct")])
    rc, so, se = run(tessera, "compile-table", "--in", profile_only, "--out", out, "--min-leaf", "1")
    check(rc == 0 and "not computed: the records hold no evaluation-split case" in so and "geomean" not in so,
          "compile-table without evaluation cases prints no regret or speedup", so + se)
    with open(path) as f:
        before = f.read()
    rc, so, se = run(tessera, "compile-table", "--in", path, "--out", path, "--min-leaf", "1")
    with open(path) as f:
        after = f.read()
    check(rc != 0 and "--out" in se and after == before, "compile-table --out = --in refused, records kept", so + se)
    rc, so, se = run(tessera, "compile-table", "--in", path, "--out", "/nonexistent/dir/t.json", "--min-leaf", "1")
    check(rc != 0 and "--out" in se and "/nonexistent/dir/t.json" in se, "compile-table bad --out", so + se)
    bad_cases = {
        "latency0": ([good[0], record(key, plan, latency=0, case="F/s0/2")], "line 2"),
        "case_malformed": ([record(key, plan, case="c0")], "case id 'c0' is not"),
        "case_index_zero_padded": ([good[0], record(key, plan, case="STA-real/x/021")], "line 2: field 'case': case id "
                                                                                      "'STA-real/x/021' has index '021'"),
        "case_source_mismatch": ([record(key, plan, case="F/s1/0", source="s0")], "differs from the source 's1'"),
        "latency_neg": ([record(key, plan, latency=-3)], "latency_us"),
        "plan_bad": ([record(key, "sm90a.mma.nonsense")], "'plan'"),
        "key_mismatch": ([record("sm90a.bf16.d128.q16.kv16", plan)], "'key'"),
        "role_bad": ([record(key, plan, role="base")], "'role'"),
        "split_bad": ([record(key, plan, split="profiling")], "split"),
        "empty": ([], "no profile record"),
        "none_valid": ([record(key, plan, valid=False)], "valid"),
        # JSON of the wrong type or a missing field: the error names the field (was a raw JSON library message)
        "valid_number": ([record(key, plan).replace('"valid": true', '"valid": 1')], "field 'valid' must be true or false"),
        "case_missing": ([record(key, plan).replace('"case": "F/s0/0", ', '')], "field 'case' missing"),
        "features_number": ([json.dumps({**json.loads(record(key, plan)), "features": 5})],
                            "field 'features' must be an object"),
        "plan_number": ([json.dumps({**json.loads(record(key, plan)), "plan": 3})], "field 'plan' must be a string"),
        "not_object": (["[1, 2]"], "a record is a JSON object"),
    }
    for name, (lines, needle) in bad_cases.items():
        p = os.path.join(work, name + ".jsonl")
        write(p, lines)
        rc, so, se = run(tessera, "compile-table", "--in", p, "--out", os.path.join(work, name + ".json"))
        check(rc != 0 and needle in se and "--in" in se, f"compile-table rejects {name}", so + se)
        check(not os.path.exists(os.path.join(work, name + ".json")), f"compile-table {name}: no file written")
    eval_report(tessera, work, path, profile_only)
    rc, so, se = run(tessera, "compile-table", "--in", path, "--out", out, "--arch", "sm100")
    check(rc != 0 and "--arch" in se, "compile-table unknown --arch", so + se)
    rc, so, se = run(tessera, "compile-table", "--in", path, "--out", out, "--arch", "sm80")
    check(rc != 0 and "--arch" in se and "line 1" in se, "compile-table --arch differs from the records", so + se)


def eval_report(tessera, work, records, profile_only):
    """compile-table --eval-report: one CSV row per scored evaluation case; a header alone when none is scored; never
    the --out file however spelled (./t.json, a symbolic link), never --in, never an empty path."""
    out, rep = os.path.join(work, "er.json"), os.path.join(work, "er.csv")
    rc, so, se = run(tessera, "compile-table", "--in", records, "--out", out, "--min-leaf", "1", "--eval-report", rep)
    rows = open(rep).read().splitlines() if os.path.exists(rep) else []
    check(rc == 0 and len(rows) == 2 and rows[0].startswith("case,key,source,selected_plan") and
          rows[1].startswith("F/s0/1,") and "per-case regret (1 cases) -> " + rep in so,
          "compile-table --eval-report writes one row per evaluation case", so + se + str(rows))
    os.remove(rep)
    rc, so, se = run(tessera, "compile-table", "--in", profile_only, "--out", out, "--min-leaf", "1",
                     "--eval-report", rep)
    rows = open(rep).read().splitlines() if os.path.exists(rep) else []
    check(rc == 0 and len(rows) == 1 and "per-case regret (0 cases)" in so,
          "compile-table --eval-report without evaluation cases writes the header alone", so + se + str(rows))
    link = os.path.join(work, "er_link.json")
    os.symlink(out, link)
    with open(out) as f:
        table = f.read()
    for same in (out, os.path.join(work, ".", "er.json"), link):
        rc, so, se = run(tessera, "compile-table", "--in", records, "--out", out, "--min-leaf", "1",
                         "--eval-report", same)
        with open(out) as f:
            kept = f.read() == table
        check(rc == 2 and "--eval-report" in se and "--out" in se and so == "" and kept,
              f"compile-table --out {out} --eval-report {same} refused, table kept", so + se)
    rc, so, se = run(tessera, "compile-table", "--in", records, "--out", out, "--eval-report", records)
    check(rc == 2 and "--eval-report" in se and "--in" in se, "compile-table --eval-report = --in refused", so + se)
    for bad, needle in (("", "empty"), (work, "directory"), ("/nonexistent/dir/r.csv", "does not exist"),
                        ("/dev/full", "not a regular file")):
        rc, so, se = run(tessera, "compile-table", "--in", records, "--out", out, "--eval-report", bad)
        check(rc == 2 and "--eval-report: " in se and needle in se and so == "",
              f"compile-table --eval-report {bad!r} refused before any work", so + se)


def featureless_record(tessera):
    """(record, case id): a profile record of a real Q64K64 corpus case with no features (an older schema)."""
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64", "--cases-per-split", "1")
    check(rc == 0 and so, "profile --list", so + se)
    case = so.split()[0]  # <family>/<source>/<index>
    key = "sm90a.bf16.d128.q64.kv64"
    plan = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4"
    old = json.loads(record(key, plan, case=case, source=case.split("/")[1], role="default"))
    old["features"] = {}  # a schema older than every feature of today's: all are filled in
    return old, case


def profile_refeature(tessera, work):
    old, case = featureless_record(tessera)
    path, out = os.path.join(work, "old.jsonl"), os.path.join(work, "new.jsonl")
    write(path, [json.dumps(old)])
    rc, so, se = run(tessera, "compile-table", "--in", path, "--out", os.path.join(work, "old.json"))
    check(rc == 2 and "--in" in se and "lacks 'batch_heads'" in se and "profile-refeature" in se
          and not os.path.exists(os.path.join(work, "old.json")),
          "compile-table on records of an older schema names the feature and profile-refeature", so + se)
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out, "--case-stats", "")
    check(rc == 2 and "--case-stats: " in se and "empty" in se and not os.path.exists(out),
          "profile-refeature --case-stats '' refused", so + se)
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out, "--case-stats",
                     os.path.join(work, "stats.jsonl"))
    check(rc == 0 and "1 records of 1 cases" in so, "profile-refeature of a record with no features", so + se)
    new = json.loads(open(out).read()) if rc == 0 else {"features": {}}
    check(new["features"].get("mean_row_active", 0) > 0 and new["features"].get("density", 0) > 0
          and new["features"].get("row_imbalance", 0) >= 1 and new["features"].get("grid_rows", 0) >= 1
          and new["features"].get("active_blocks", 0) >= new["features"].get("grid_rows", 0),
          "profile-refeature fills every feature", str(new))
    rc, so, se = run(tessera, "compile-table", "--in", out, "--out", os.path.join(work, "rt.json"), "--min-leaf", "1")
    check(rc == 0, "compile-table reads re-featured records", so + se)
    old["features"] = dict(new["features"], density=new["features"].get("density", 0) * 1.5)
    write(path, [json.dumps(old)])
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "2")
    check(rc != 0 and case in se and "density" in se and not os.path.exists(out + "2"),
          "profile-refeature: a recorded feature differs from the regenerated mask", so + se)
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "2")
    check(rc != 0 and "--in" in se and path in se and se.count("tessera:") == 1,
          "profile-refeature: a feature mismatch is one message naming --in", so + se)
    for bad_case, needle in ((case.rsplit("/", 1)[0] + "/0" + case.rsplit("/", 1)[1], "is not a canonical decimal"),
                             ("", "case id '' is not")):
        old["case"] = bad_case
        write(path, [json.dumps(old)])
        rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "3")
        check(rc != 0 and se.count("tessera:") == 1 and "--in: " + path + " line 1: field 'case': case id '" + bad_case + "'" in se
              and needle in se and not os.path.exists(out + "3"), f"profile-refeature: bad case id {bad_case!r}", so + se)
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", "/nonexistent/dir/x.jsonl")
    check(rc != 0 and "--out" in se, "profile-refeature bad --out", so + se)
    old["case"] = case
    write(path, [json.dumps(old)])
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "4", "--sta-table", "/nonexistent.json")
    check(rc != 0 and "io error: --sta-table: " in se and "/nonexistent.json" in se and "--in" not in se
          and se.count("tessera:") == 1 and not os.path.exists(out + "4"),
          "profile-refeature: a missing --sta-table is an io error naming --sta-table", so + se)
    # evaluation records alone are re-featured (nothing is compiled here)
    write(path, [json.dumps(dict(old, split="eval", features={}))])
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "5")
    check(rc == 0 and "1 records of 1 cases" in so, "profile-refeature of evaluation records only", so + se)
    # a key whose blocks are not the case's (a 64x64 case recorded under a 128x128 key)
    wrong = dict(old, key="sm90a.bf16.d128.q128.kv128", plan="sm90a.mma.bf16.d128.q128d.kv128d.g1.tasc.split1.s2.w8",
                 features={})
    write(path, [json.dumps(wrong)])
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "6")
    check(rc == 2 and "has blocks 128x128 but the case's mask has 64x64" in se and not os.path.exists(out + "6"),
          "profile-refeature: a key whose blocks differ from the case's is refused", so + se)


def refeature_masks(tessera, work):
    """profile-refeature --masks: records of mask files (not corpus cases) are counted from the files; an output that
    is one of those files is refused before anything is written; a case found nowhere says where it was looked for."""
    corpus = os.path.join(work, "cli_corpus")  # written by mask_files()
    manifest = json.load(open(os.path.join(corpus, "manifest.json")))
    e = next(e for e in manifest["cases"] if e["family"] == "Q64K64-HD")
    mask = os.path.join(corpus, e["file"])
    with open(mask, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n))["__metadata__"]
    case = f"{meta['family']}/{meta['source_id']}/{meta['index']}"
    rec = {"case": case, "source": meta["source_id"], "split": "profile", "key": "sm90a.bf16.d128.q64.kv64",
           "plan": "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4", "latency_us": 10.0, "valid": True,
           "role": "default,direct", "features": {}}
    path, out = os.path.join(work, "masks_rec.jsonl"), os.path.join(work, "masks_rec_v4.jsonl")
    write(path, [json.dumps(rec)])
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out, "--masks", mask)
    new = json.loads(open(out).read()) if rc == 0 else {"features": {}}
    check(rc == 0 and new["features"].get("coarsen_cost2", 0) >= 1, "profile-refeature --masks FILE", so + se)
    before = open(mask, "rb").read()
    for opt in ("--out", "--case-stats"):
        args = ["--out", mask] if opt == "--out" else ["--out", out + "2", "--case-stats", mask]
        rc, so, se = run(tessera, "profile-refeature", "--in", path, *args, "--masks", mask)
        check(rc == 2 and opt in se and "--masks" in se and open(mask, "rb").read() == before,
              f"profile-refeature {opt} = a --masks file is refused and the file kept", so + se)
    write(path, [json.dumps(dict(rec, case="Nope/src/1", source="src"))])
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "3", "--masks", mask)
    check(rc == 2 and "no --masks file holds this case id" in se, "profile-refeature: a case found nowhere", so + se)
    missing = os.path.join(work, "no_such_refeature_masks.safetensors")
    rc, so, se = run(tessera, "profile-refeature", "--in", path, "--out", out + "4", "--masks", missing)
    check(rc == 2 and f"io error: --masks: '{missing}'" in se and not os.path.exists(out + "4"),
          "profile-refeature --masks: a missing file is an io error naming the option and the file", so + se)


def run_command(tessera, work):
    # --plan-table: a user table, checked before anything runs, used by the selection (CPU default: sm90a's)
    missing = os.path.join(work, "no_table.json")
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q64K64", "--plan-table", missing,
                     "--json", os.path.join(work, "pt.json"))
    check(rc == 2 and "--plan-table" in se and missing in se and "io error" in se and so == ""
          and not os.path.exists(os.path.join(work, "pt.json")), "run --plan-table missing: io error first", so + se)
    table = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "core", "plan_tables", "sm90a.json")
    copy = os.path.join(work, "user_table.json")
    shutil.copy(table, copy)
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q64K64", "--plan-table", copy,
                     "--json", os.path.join(work, "pt.json"))
    rep = json.load(open(os.path.join(work, "pt.json"))) if rc == 0 else {"cases": []}
    check(rc == 0 and rep["cases"] and all(copy in c["table_status"] for c in rep["cases"]),
          "run --plan-table FILE selects with that table", so + se)
    # the table's keys are all head_dim 128, the CPU default's requests head_dim 64: one line says so
    check(rc == 0 and f"--plan-table {copy} has no tree for sm90a.bf16.d64.q64.kv64 (the CPU default's requests are "
          "head_dim 64)" in so and all(c["regime"].endswith("/default") for c in rep["cases"]),
          "run --cpu --plan-table with no tree for the run's keys: a notice", so + se)
    bad = dict(json.load(open(copy)), format_version=3)
    open(copy, "w").write(json.dumps(bad))
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q64K64", "--plan-table", copy,
                     "--json", os.path.join(work, "pt2.json"))
    check(rc == 2 and "--plan-table" in se and "format_version 3" in se and so == "",
          "run --plan-table of another format version: format error naming the option", so + se)
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Bogus", "--json", os.path.join(work, "r.json"))
    check(rc != 0 and "--families" in se and "Bogus" in se and so == "", "run --families Bogus: error before output",
          so + se)
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q16K16", "Q16K16", "--json", os.path.join(work, "r.json"))
    check(rc != 0 and "more than once" in se and so == "", "run --families X X rejected", so + se)
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q16K16", "--json", "/nonexistent/dir/x.json")
    check(rc != 0 and "--json" in se and "wrote" not in so, "run --json into a missing directory", so + se)
    j = os.path.join(work, "r.json")
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q16K16", "--cases-per-family", "3", "--json", j)
    check(rc == 0 and "one evaluation-split case per family" in so and os.path.exists(j), "run --cpu cases note",
          so + se)
    check("apply to the GPU path only" not in so and "has no tree" not in so,
          "run --cpu: no --no-regret/--no-check or --plan-table notice when those options are not given", so)
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q16K16", "--no-regret", "--json", j)
    check(rc == 0 and "--no-regret and --no-check apply to the GPU path only" in so, "run --cpu --no-regret note",
          so + se)
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q16K16,Q32K16", "--no-check", "--json", j)
    check(rc == 0 and "2 case(s)" in so and "apply to the GPU path only" in so, "run --families A,B and the --no-check note",
          so + se)
    rc, so, se = run(tessera, "run", "--cpu", "--families", "Q16K16,Q16K16", "--json", j)
    check(rc != 0 and "more than once" in se and so == "", "run --families X,X rejected", so + se)


def mask_files(tessera, work):
    out = os.path.join(work, "cli_corpus")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([tessera, "masks", "generate", "--small", "--families", "Q16K16", "Q64K64-HD", "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    target = None
    for e in manifest["cases"]:
        path = os.path.join(out, e["file"])
        rc, so, se = run(tessera, "inspect-mask", path)
        check(rc == 0, f"inspect-mask {path}", so + se)
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            meta = json.loads(f.read(n))["__metadata__"]
        if int(meta["n_kvb"]) % 8 != 0:
            target = path
            break
    check(target is not None, "a small-corpus file with n_kvb % 8 != 0")
    if target is None:
        return
    png = os.path.join(work, "head.png")
    rc, so, se = run(tessera, "masks", "render", target, "--head", "999", "--out", png)
    check(rc != 0 and "--head" in se and not os.path.exists(png), "masks render --head out of range names --head", so + se)
    rc, so, se = run(tessera, "masks", "render", target, "--out", work)
    check(rc != 0 and "--out" in se and "directory" in se, "masks render --out DIR names --out", so + se)
    data = bytearray(open(target, "rb").read())
    data[-1] |= 1  # the last byte of the last row: its lowest bit is padding
    bad_dir = os.path.join(work, "bad_masks")
    shutil.rmtree(bad_dir, ignore_errors=True)
    os.makedirs(bad_dir)
    bad = os.path.join(bad_dir, "bad.safetensors")
    open(bad, "wb").write(bytes(data))
    rc, so, se = run(tessera, "inspect-mask", bad)
    check(rc != 0 and bad in se and "padding" in se, "inspect-mask rejects padding bits naming the file", so + se)
    rc, so, se = run(tessera, "masks", "stats", bad_dir)
    check(rc != 0 and bad in se, "masks stats names the bad file", so + se)
    rc, so, se = run(tessera, "inspect-mask", bad_dir)
    check(rc == 2 and bad_dir in se and "io error" in se, "inspect-mask DIR: io error naming the path", so + se)


def lost_stdout(tessera, work):
    """Output that cannot be written (/dev/full) fails the command (exit 1, the reason on stderr)."""
    if not os.path.exists("/dev/full"):
        return
    for args in (["version"], ["inspect", "plan", "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4"]):
        with open("/dev/full", "w") as full:
            p = subprocess.run([tessera, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        check(p.returncode == 1 and "standard output" in p.stderr, f"{' '.join(args)} > /dev/full fails",
              f"rc {p.returncode}\n{p.stderr}")


def profile_masks(tessera, work):
    """`tessera profile --masks`: the user's mask files (corpus format): the case list (--list, no GPU) and its errors."""
    corpus = os.path.join(work, "cli_corpus")  # written by mask_files()
    manifest = json.load(open(os.path.join(corpus, "manifest.json")))
    files = [os.path.join(corpus, e["file"]) for e in manifest["cases"]]
    fam_dir = os.path.dirname(files[0])
    in_dir = sorted(f for f in files if os.path.dirname(f) == fam_dir)
    rc, so, se = run(tessera, "profile", "--list", "--masks", fam_dir)
    lines = so.splitlines()
    check(rc == 0 and len(lines) == len(in_dir), "profile --masks DIR --list: one line per file", so + se)
    for line, path, e in zip(lines, in_dir, [e for e in manifest["cases"] if os.path.join(corpus, e["file"]) in in_dir]):
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            meta = json.loads(f.read(n))["__metadata__"]
        want = (f"{meta['family']}/{meta['source_id']}/{meta['index']} {meta['split']} "
                f"request {meta['source_id']}#{meta['chunk']} {path}")
        check(line == want, f"profile --masks --list line for {path}", f"{line!r} != {want!r}")
    rc, so, se = run(tessera, "profile", "--list", "--masks", in_dir[0], in_dir[1], "--splits", "evaluation")
    want_eval = sum(1 for p in in_dir[:2] if " evaluation " in next(l for l in lines if l.endswith(p)))
    check((rc == 0 and len(so.splitlines()) == want_eval) or (want_eval == 0 and rc == 2 and "--masks" in se),
          "profile --masks FILES --splits evaluation keeps the evaluation files", so + se)
    missing = os.path.join(work, "no_such_masks.safetensors")
    rc, so, se = run(tessera, "profile", "--list", "--masks", missing)
    check(rc == 2 and f"io error: --masks: '{missing}'" in se,
          "profile --masks: a missing file is an io error naming the option and the file", so + se)
    empty_dir = os.path.join(work, "empty_masks")
    shutil.rmtree(empty_dir, ignore_errors=True)
    os.makedirs(empty_dir)
    open(os.path.join(empty_dir, "notes.txt"), "w").write("not a mask")
    rc, so, se = run(tessera, "profile", "--list", "--masks", empty_dir)
    check(rc == 2 and "--masks" in se and empty_dir in se and ".safetensors" in se,
          "profile --masks DIR without .safetensors files names --masks and the directory", so + se)
    # the family directory holds only per-source subdirectories: not searched, the first one holding masks named
    rc, so, se = run(tessera, "profile", "--list", "--masks", corpus)
    first_sub = os.path.join(corpus, sorted(os.listdir(corpus))[0])
    first_sub = os.path.join(first_sub, sorted(os.listdir(first_sub))[0])
    check(rc == 2 and f"--masks: directory '{corpus}' holds no .safetensors file; its subdirectories are not searched"
          in se and f"'{first_sub}' holds some" in se and so == "",
          "profile --masks DIR with masks only in subdirectories: not recursive, a subdirectory named", so + se)
    # one file, not of the splits given: singular
    other = "profiling" if " evaluation " in lines[0] else "evaluation"
    rc, so, se = run(tessera, "profile", "--list", "--masks", in_dir[0], "--splits", other)
    check(rc == 2 and "invalid argument: --masks: the 1 mask file is not in the splits given (--splits)" in se,
          "profile --masks FILE --splits (not the file's): one file, singular", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--masks", in_dir[0], "./" + os.path.relpath(in_dir[0]))
    check(rc == 2 and "--masks" in se and "more than once" in se, "profile --masks: a file given twice", so + se)
    copy_dir = os.path.join(work, "copied_masks")
    shutil.rmtree(copy_dir, ignore_errors=True)
    os.makedirs(copy_dir)
    copy = os.path.join(copy_dir, "copy.safetensors")
    shutil.copy(in_dir[0], copy)
    rc, so, se = run(tessera, "profile", "--list", "--masks", in_dir[0], copy)
    check(rc == 2 and "same case" in se and in_dir[0] in se and copy in se,
          "profile --masks: two files with one case id, both named", so + se)
    bad = os.path.join(work, "bad_masks", "bad.safetensors")  # padding bits set, written by mask_files()
    rc, so, se = run(tessera, "profile", "--list", "--masks", fam_dir, bad)
    check(rc == 2 and bad in se and "padding" in se, "profile --masks: a malformed file is named", so + se)
    # a block size the runtime refuses stops the command before anything is profiled, naming the file and field
    odd = os.path.join(work, "bad_masks", "block15.safetensors")
    crafted_mask(odd, {"block_q": "15", "block_kv": "16", "n_q": "120", "n_kv": "128", "tokens_real": "120"})
    rc, so, se = run(tessera, "profile", "--list", "--masks", fam_dir, odd)
    check(rc == 2 and odd in se and "'block_q' = 15" in se and so == "", "profile --masks: a 15-token block is refused",
          so + se)
    before = read_bytes(in_dir[0])
    rc, so, se = run(tessera, "profile", "--masks", fam_dir, "--out", in_dir[0])
    check(rc == 2 and "invalid argument: --out:" in se and "--masks file" in se and read_bytes(in_dir[0]) == before,
          "profile --out naming one of the --masks files is refused and the file kept", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--masks", fam_dir, "--families", "Q16K16")
    check(100 <= rc <= 115 and "excludes" in (so + se), "profile --masks excludes --families", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--masks", fam_dir, "--cases-per-split", "2")
    check(100 <= rc <= 115 and "excludes" in (so + se), "profile --masks excludes --cases-per-split", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64", "--plans", "(wgmma")
    check(rc == 2 and "--plans" in se and "regular expression" in se, "profile --plans: a bad regex is named", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--masks", fam_dir, "--whole-requests")
    check(100 <= rc <= 115 and "excludes" in (so + se), "profile --masks excludes --whole-requests", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64", "--cases-per-split", "2", "--whole-requests")
    rc0, so0, _ = run(tessera, "profile", "--list", "--families", "Q64K64", "--cases-per-split", "2")
    whole_ids, case_ids = [l.split()[0] for l in so.splitlines()], [l.split()[0] for l in so0.splitlines()]
    check(rc == 0 and rc0 == 0 and len(whole_ids) == 4 and whole_ids == [c + "/whole" for c in case_ids],
          "profile --whole-requests --list: the same cases, ids ending in /whole", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--masks", fam_dir, "--splits", "evaluation", "evaluation")
    check(rc == 2 and "--splits" in se, "profile --masks: a repeated --splits", so + se)
    out_dir = os.path.join(work, "profile_out_dir")
    os.makedirs(out_dir, exist_ok=True)
    rc, so, se = run(tessera, "profile", "--masks", fam_dir, "--out", out_dir)
    check(rc == 2 and "--out" in se, "profile --masks --out DIR fails before any profiling, naming --out", so + se)


FEATURES = ["batch_heads", "seq_len", "density", "run_coverage", "mean_run_length", "mean_row_active", "row_imbalance",
            "grid_rows", "active_blocks", "coarsen_cost2", "coarsen_cost4", "coarsen_cost8"]  # src/core/features.hpp


def feature_lines(so, what):
    """The --list-features objects of stdout, each checked: case, split, key and every feature, nothing else."""
    objs = []
    for line in so.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            check(False, f"{what}: a line that is not JSON", line)
            continue
        check(list(o) == ["case", "split", "key", "features"] and o["split"] in ("profile", "eval")
              and o["key"].startswith("sm90a.bf16.d128.q") and sorted(o["features"]) == sorted(FEATURES)
              and all(isinstance(v, (int, float)) for v in o["features"].values()), f"{what}: the line's fields", line)
        objs.append(o)
    return objs


def profile_case_ids(tessera, work):
    """`tessera profile --case-ids FILE` (exactly the named corpus cases) and `--list-features` (no GPU)."""
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q128K64", "--cases-per-split", "2")
    listed = so.splitlines()
    rc_w, so_w, _ = run(tessera, "profile", "--list", "--families", "Q128K64", "--cases-per-split", "2",
                        "--whole-requests")
    check(rc == 0 and rc_w == 0 and len(listed) == 4, "profile --list for --case-ids", so + se)
    whole = so_w.splitlines()[3]
    ids = os.path.join(work, "case_ids.txt")
    write(ids, ["# chosen by hand", "", "  " + whole.split()[0] + "  ", listed[2].split()[0], listed[0].split()[0]])
    rc, so, se = run(tessera, "profile", "--list", "--case-ids", ids)
    check(rc == 0 and so.splitlines() == [whole, listed[2], listed[0]] and se == "",
          "profile --list --case-ids: the ids' list lines, in file order", so + se)
    missing = os.path.join(work, "no_such_case_ids.txt")
    rc, so, se = run(tessera, "profile", "--list", "--case-ids", missing)
    check(rc == 2 and f"io error: --case-ids: {missing}: cannot be read" in se and so == "",
          "profile --case-ids: a missing file is an io error naming the option and the file", so + se)
    bad = os.path.join(work, "bad_case_ids.txt")
    write(bad, [listed[0].split()[0], "Q128K64/no-such-source/" + listed[0].split()[0].rsplit("/", 1)[1]])
    rc, so, se = run(tessera, "profile", "--list", "--case-ids", bad)
    check(rc == 2 and f"invalid argument: --case-ids: {bad}:2: case id 'Q128K64/no-such-source/" in se
          and listed[0].split()[0].split("/")[1] in se and so == "",
          "profile --case-ids: a case id of the wrong source names the line and the case's source", so + se)
    # a UTF-8 byte-order mark at the start of the file is skipped
    bom = os.path.join(work, "bom_case_ids.txt")
    with open(bom, "wb") as f:
        f.write(b"\xef\xbb\xbf" + (listed[2].split()[0] + "\r\n" + listed[0].split()[0] + "\r\n").encode())
    rc, so, se = run(tessera, "profile", "--list", "--case-ids", bom)
    check(rc == 0 and so.splitlines() == [listed[2], listed[0]], "profile --case-ids: a leading UTF-8 BOM is skipped",
          so + se)
    one, two = listed[0].split()[0], listed[2].split()[0]
    bad_lines = [  # (file text, a fragment of the message after "<file>:<line>: ")
        (f"{one},{two}\n", f"case id '{one},{two}' holds ',': one case id per line"),
        (f"{one}\n{one} {two}\n", f"case id '{one} {two}' holds whitespace: one case id per line"),
        (f"{one}  # profiled first\n",
         f"case id '{one}  # profiled first' holds '#': '#' starts a comment only at the start of a line, not after an id"),
        ("Q128K64\0\x1b[2J/x/1\n",
         "case id 'Q128K64\\x00\\x1b[2J/x/1' holds the byte \\x00: case ids are printable ASCII"),
    ]
    for n, (text, fragment) in enumerate(bad_lines):
        path = os.path.join(work, f"bad_line_{n}.txt")
        open(path, "w").write(text)
        rc, so, se = run(tessera, "profile", "--list", "--case-ids", path)
        line = text.count("\n")
        check(rc == 2 and f"invalid argument: --case-ids: {path}:{line}: {fragment}" in se and so == ""
              and "\0" not in se and "\x1b" not in se, f"profile --case-ids: bad line {text!r}", so + se)
    huge = os.path.join(work, "huge_case_ids.txt")
    open(huge, "w").write("Q128K64/" + "s" * (8 << 20) + "/1\n")  # one 8 MB line: quoted cut, once per mention
    rc, so, se = run(tessera, "profile", "--list", "--case-ids", huge)
    check(rc == 2 and f"{huge}:1: case id 'Q128K64/sss" in se and f"...' ({(8 << 20) + 10} bytes)" in se
          and len(se) < 1000, "profile --case-ids: a huge line is cut in the message", so + se[:2000])
    os.remove(huge)
    rc, so, se = run(tessera, "profile", "--list", "--case-ids", "")
    check(rc == 2 and "invalid argument: --case-ids: empty path" in se, "profile --case-ids ''", so + se)
    # the two listings exclude each other; --out with either is refused (they print to stdout), nothing written
    rc, so, se = run(tessera, "profile", "--list", "--list-features", "--case-ids", ids)
    check(100 <= rc <= 115 and "excludes" in (so + se) and so == "", "profile --list excludes --list-features", so + se)
    unused = os.path.join(work, "listing_out.jsonl")
    for mode in ("--list", "--list-features"):
        rc, so, se = run(tessera, "profile", mode, "--case-ids", ids, "--out", unused)
        check(rc == 2 and "invalid argument: --out: the listing modes print to stdout; --out is for profiling" in se
              and so == "" and not os.path.exists(unused), f"profile {mode} --out is refused", so + se)
    for opt in (["--families", "Q128K64"], ["--whole-requests"], ["--splits", "profiling"], ["--cases-per-split", "2"]):
        rc, so, se = run(tessera, "profile", "--list", "--case-ids", ids, *opt)
        check(100 <= rc <= 115 and "excludes" in (so + se), f"profile --case-ids excludes {opt[0]}", so + se)
    rc, so, se = run(tessera, "profile", "--list-features", "--families", "Q128K64", "--cases-per-split", "1",
                     "--splits", "profiling")
    objs = feature_lines(so, "profile --list-features")
    check(rc == 0 and len(objs) == 1 and objs[0]["case"] == listed[0].split()[0] and objs[0]["split"] == "profile"
          and objs[0]["key"] == "sm90a.bf16.d128.q128.kv64",
          "profile --list-features --families Q128K64 --cases-per-split 1 --splits profiling", so + se)
    rc, so, se = run(tessera, "profile", "--list-features", "--case-ids", ids)
    objs = feature_lines(so, "profile --list-features --case-ids")
    check(rc == 0 and [o["case"] for o in objs] == [line.split()[0] for line in (whole, listed[2], listed[0])]
          and objs[0]["features"]["batch_heads"] > objs[1]["features"]["batch_heads"] and objs[1]["split"] == "eval",
          "profile --list-features --case-ids with a whole request", so + se)
    # bench/pick_cases.py on these lines: every case (no bound), whole requests dropped, a profiled case excluded
    features = os.path.join(work, "features.jsonl")
    write(features, so.splitlines())
    records = os.path.join(work, "profiled.jsonl.gz")
    with gzip.open(records, "wt") as f:
        f.write(json.dumps({"case": objs[2]["case"]}) + "\n")
    p = subprocess.run([sys.executable, os.path.join(REPO, "bench", "pick_cases.py"), features, "--low", "1e9",
                        "--high", "1e9", "--only-single", "--exclude", records], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.splitlines() == [objs[1]["case"]], "bench/pick_cases.py on --list-features",
          p.stdout + p.stderr)
    picked = os.path.join(work, "picked.txt")
    open(picked, "w").write(p.stdout)
    rc, so, se = run(tessera, "profile", "--list", "--case-ids", picked)
    check(rc == 0 and so.splitlines() == [listed[2]], "profile --case-ids takes bench/pick_cases.py's ids", so + se)
    # --out is appended to and repaired on resume: the ids file itself (under any name) is refused before the GPU
    # check, and the file is left as it was
    before = read_bytes(picked)
    for out in (picked, os.path.join(os.path.dirname(picked), ".", os.path.basename(picked))):
        rc, so, se = run(tessera, "profile", "--case-ids", picked, "--out", out)
        check(rc == 2 and "invalid argument: --out:" in se and "--case-ids file" in se and read_bytes(picked) == before,
              f"profile --out {out} (the --case-ids file) is refused and the file kept", so + se)


def profile_sources(tessera):
    """`tessera profile --sources`: only the named sources' corpus cases, in the spread order, counted per split."""
    rc, so, se = run(tessera, "profile", "--list", "--families", "STA-real", "--sources", "sta-hv768-b64",
                     "--cases-per-split", "100")
    lines = so.splitlines()
    ids = [line.split()[0] for line in lines]
    check(rc == 0 and len(lines) == 10 and all(i.startswith("STA-real/sta-hv768-b64/") for i in ids)
          and sum(" profiling " in line for line in lines) == 5,
          "profile --sources sta-hv768-b64: the ten 64x64 STA cases, five per split", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "STA-real", "--sources", "sta-hv768-b64",
                     "--cases-per-split", "2", "--splits", "evaluation")
    check(rc == 0 and so.split() and [l.split()[0] for l in so.splitlines()] == [i for i, l in zip(ids, lines)
                                                                              if " evaluation " in l][:2],
          "profile --sources --cases-per-split 2: the first two of the spread order", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64,Q16K16", "--sources",
                     "q64-vsa-wan720,q16-vsa-wan5b", "--cases-per-split", "3")
    srcs = {line.split()[0].split("/")[1] for line in so.splitlines()}
    check(rc == 0 and len(so.splitlines()) == 12 and srcs == {"q64-vsa-wan720", "q16-vsa-wan5b"},
          "profile --sources over two families: three cases per family and split", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64", "--sources", "q64-vsa-wan720,q64-vsa-wan720")
    check(rc == 2 and "--sources" in se and "more than once" in se and so == "", "profile --sources: a repeated id", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64", "STA-real", "--sources", "q64-vsa-wan720")
    check(rc == 2 and "names no source of family STA-real" in se and "sta-hv768-b64" in se and so == "",
          "profile --sources: a selected family none of whose sources is named", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64", "--sources", "sta-hv768-b64")
    check(rc == 2 and "--sources" in se and "sta-hv768-b64" in se and "q64-vsa-wan720" in se and so == "",
          "profile --sources: a source outside the selected families is named with the known ones", so + se)


def crafted_mask(path, meta=None, tensor=None, data=b"\0" * 8):
    """A mask file of 1 head x 8 q blocks x 8 kv blocks with metadata/tensor fields replaced."""
    md = {k: "x" for k in ["family", "source_id", "model", "sparsifier", "kind", "token_order", "split", "head_ids",
                           "notes", "bit_order"]}
    md.update(format="tessera-mask-v1", split="profiling", head_ids="0", heads="1", n_qb="8", n_kvb="8", n_q="8", n_kv="8", tokens_real="8",
              block_q="1", block_kv="1", step="0", layer="0", chunk="0", index="0", seed="0")
    md.update(meta or {})
    t = {"dtype": "U8", "shape": [1, 1, 8, 1], "data_offsets": [0, 8]}
    t.update(tensor or {})
    h = json.dumps({"__metadata__": md, "mask": t}).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + data)


def crafted_mask_files(tessera, work):
    d = os.path.join(work, "crafted")
    os.makedirs(d, exist_ok=True)
    good = os.path.join(d, "good.safetensors")
    crafted_mask(good)
    rc, so, se = run(tessera, "inspect-mask", good)
    check(rc == 0 and "blocks 8x8" in so, "inspect-mask of the crafted good file", so + se)
    big = str(2 ** 32)
    cases = {
        # heads x n_qb x row_bytes = 2^64 wraps to 0: was a segfault.
        "overflow": ({"heads": big, "n_qb": big, "n_q": big}, {"shape": [1, 2 ** 32, 2 ** 32, 1],
                                                               "data_offsets": [0, 0]}, b"", "'heads'"),
        "overflow2": ({"heads": str(2 ** 31 - 1), "n_qb": str(2 ** 62), "n_q": str(2 ** 62)},
                      {"shape": [1, 2 ** 31 - 1, 2 ** 62, 1], "data_offsets": [0, 0]}, b"", "overflow"),
        # 1 TiB declared, nothing stored: was std::bad_alloc.
        "huge": ({"n_qb": str(2 ** 40), "n_q": str(2 ** 40)}, {"shape": [1, 1, 2 ** 40, 1],
                                                              "data_offsets": [0, 2 ** 40]}, b"", "'data_offsets'"),
        "seed_abc": ({"seed": "abc"}, None, b"\0" * 8, "'seed'"),
        "seed_neg": ({"seed": "-1"}, None, b"\0" * 8, "'seed'"),
        "block_q_wrap": ({"block_q": str(2 ** 32 + 1)}, None, b"\0" * 8, "'block_q'"),
        "shape_str": (None, {"shape": "abc"}, b"\0" * 8, "'shape'"),
    }
    for name, (meta, tensor, data, needle) in cases.items():
        p = os.path.join(d, name + ".safetensors")
        crafted_mask(p, meta, tensor, data)
        for args in (["inspect-mask", p], ["masks", "stats", p], ["masks", "render", p, "--out", p + ".png"]):
            rc, so, se = run(tessera, *args)
            check(rc == 2 and "format error" in se and p in se and needle in se and (args[1] != "stats" or so == ""),
                  f"{' '.join(args[:2])} {name} (masks stats: no partial table)", f"rc {rc}\n" + so + se)
    p = os.path.join(d, "masknum.safetensors")
    with open(p, "wb") as f:
        h = json.dumps({"__metadata__": {"format": "tessera-mask-v1"}, "mask": 5}).encode()
        h += b" " * (-len(h) % 8)
        f.write(len(h).to_bytes(8, "little") + h)
    rc, so, se = run(tessera, "inspect-mask", p)
    check(rc == 2 and "format error" in se and "'mask'" in se, "inspect-mask: 'mask' as a number", so + se)
    missing = os.path.join(d, "missing.safetensors")
    rc, so, se = run(tessera, "inspect-mask", missing)
    check(rc == 2 and missing in se and "No such file or directory" in se, "inspect-mask of a missing file: reason",
          so + se)
    empty = os.path.join(d, "empty_dir")
    os.makedirs(empty, exist_ok=True)
    rc, so, se = run(tessera, "masks", "stats", empty)
    check(rc != 0 and empty in se and "no mask files" in se and so == "", "masks stats of an empty directory", so + se)


def corpus_commands(tessera, work):
    out = os.path.join(work, "gen_out")
    shutil.rmtree(out, ignore_errors=True)
    rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Q64K64", "Q64K64", "--out", out)
    check(rc != 0 and "more than once" in se and not os.path.exists(out), "masks generate --families X X", so + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q64K64", "Q64K64")
    check(rc != 0 and "more than once" in se and so == "", "profile --list --families X X", so + se)
    # More cases asked than a split has (Q16K16: 336 profiling cases): all of them, and a note on stderr.
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q16K16", "--splits", "profiling", "--cases-per-split", "337")
    check(rc == 0 and len(so.splitlines()) == 336 and "fewer than --cases-per-split 337" in se,
          "profile --list --cases-per-split above the split's cases says so", so[-300:] + se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Q16K16", "--splits", "profiling", "--cases-per-split", "336")
    check(rc == 0 and len(so.splitlines()) == 336 and se == "", "profile --list: every case, no note", se)
    rc, so, se = run(tessera, "profile", "--list", "--families", "Bogus")
    check(rc != 0 and "--families" in se and "Bogus" in se and so == "", "profile --list --families Bogus names the option",
          so + se)
    rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Bogus", "--out", out)
    check(rc != 0 and "--families" in se and not os.path.exists(out), "masks generate --families Bogus names the option",
          so + se)
    bad_table = os.path.join(work, "bad_sta.json")
    with open(bad_table, "w") as f:
        f.write('{"x": ')
    rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Q64K64", "STA-real", "--sta-table",
                     bad_table, "--out", out)
    check(rc != 0 and "--sta-table" in se and not os.path.exists(out), "masks generate: bad STA table writes nothing",
          so + se)
    for seed in ("-1", "99999999999999999999999", "1e3", ""):
        rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Q16K16", "--seed", seed, "--out", out)
        check(rc != 0 and "--seed" in se and not os.path.exists(out), f"masks generate --seed '{seed}'", so + se)
        rc, so, se = run(tessera, "run", "--cpu", "--families", "Q16K16", "--seed", seed, "--json",
                         os.path.join(work, "seed.json"))
        check(rc != 0 and "--seed" in se and so == "", f"run --seed '{seed}'", so + se)
    rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "STA-real", "--sta-table", work, "--out", out)
    check(rc != 0 and "--sta-table" in se and "directory" in se and not os.path.exists(out),
          "masks generate: an STA table path that is a directory", so + se)
    os.makedirs(out)
    with open(os.path.join(out, "old.txt"), "w") as f:
        f.write("x")
    rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Q16K16", "--out", out)
    check(rc != 0 and "--out" in se and "not empty" in se and os.listdir(out) == ["old.txt"],
          "masks generate into a non-empty directory", so + se)
    shutil.rmtree(out)
    for n in ("0", "1025", "40000"):
        rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Q16K16", "--threads", n, "--out", out)
        check(rc > 0 and "--threads" in se and not os.path.exists(out), f"masks generate --threads {n}", so + se)
    rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Q16K16", "--threads", "1024", "--out", out)
    check(rc == 0 and os.path.exists(os.path.join(out, "manifest.json")), "masks generate --threads 1024", so + se)


# Paths no output may go to, even as root, and a word of the reason each is refused for.
UNWRITABLE = {"/sys/tessera_x.json": "sysfs", "/dev/full": "not a regular file", "/proc/version": "proc filesystem"}


def whole_requests(tessera, work):
    """masks generate --whole-requests: its options refused without it, bad values named, a good run's manifest."""
    out = os.path.join(work, "whole_out")
    shutil.rmtree(out, ignore_errors=True)
    base = ["masks", "generate", "--small", "--families", "Q64K64-HD"]
    for extra, opt in ((["--split", "evaluation"], "--split"), (["--cases-per-family", "2"], "--cases-per-family")):
        rc, so, se = run(tessera, *base, *extra, "--out", out)
        check(rc != 0 and f"{opt}: only with --whole-requests" in se and not os.path.exists(out),
              f"masks generate {opt} without --whole-requests", so + se)
    rc, so, se = run(tessera, *base, "--whole-requests", "--split", "eval", "--out", out)
    check(rc != 0 and "--split" in se and "unknown split 'eval'" in se and not os.path.exists(out),
          "masks generate --whole-requests --split eval names --split", so + se)
    for n in ("0", "-1", "x", "100001"):
        rc, so, se = run(tessera, *base, "--whole-requests", "--cases-per-family", n, "--out", out)
        check(rc != 0 and "--cases-per-family" in se and not os.path.exists(out),
              f"masks generate --whole-requests --cases-per-family {n}", so + se)
    rc, so, se = run(tessera, "masks", "generate", "--small", "--whole-requests", "--families", "Bogus", "--out", out)
    check(rc != 0 and "--families" in se and not os.path.exists(out), "masks generate --whole-requests --families Bogus",
          so + se)
    rc, so, se = run(tessera, *base, "--whole-requests", "--split", "profiling", "--cases-per-family", "3", "--out", out)
    check(rc == 0 and "wrote 3 whole requests" in so, "masks generate --whole-requests (3 profiling requests)", so + se)
    if rc == 0:
        with open(os.path.join(out, "manifest.json")) as f:
            m = json.load(f)
        cases = m["cases"]
        check(m.get("whole_requests") is True and m.get("requests_split") == "profiling" and len(cases) == 3
              and all(c["split"] == "profiling" and c["heads"] in (24, 40) and "case_head_ids" in c for c in cases),
              "whole-request manifest fields", json.dumps(m)[:600])
        rc, so, se = run(tessera, "inspect-mask", os.path.join(out, cases[0]["file"]))
        check(rc == 0, "inspect-mask reads a whole request", so + se)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def output_paths(tessera, work):
    """Outputs that would overwrite an input or each other, or cannot be written: refused before any work, exit 2,
    naming the option."""
    d = os.path.join(work, "outputs")
    os.makedirs(d)
    mask = os.path.join(d, "m.safetensors")
    old, _ = featureless_record(tessera)
    records = os.path.join(d, "in.jsonl")

    def fresh_inputs():  # each check on intact inputs, whatever an earlier (failed) check overwrote
        crafted_mask(mask)
        write(records, [json.dumps(old)])

    # masks render: the PNG must not replace the mask it renders (also spelled differently).
    fresh_inputs()
    before = read_bytes(mask)
    for out in (mask, os.path.join(d, ".", "m.safetensors")):
        fresh_inputs()
        rc, so, se = run(tessera, "masks", "render", mask, "--out", out)
        check(rc == 2 and "--out" in se and read_bytes(mask) == before, f"masks render F --out {out}: refused",
              so + se)
    # profile-refeature: --case-stats is neither --in nor --out.
    fresh_inputs()
    before = read_bytes(records)
    new = os.path.join(d, "rf.jsonl")
    rc, so, se = run(tessera, "profile-refeature", "--in", records, "--out", new, "--case-stats", records)
    check(rc == 2 and "--case-stats" in se and read_bytes(records) == before and not os.path.exists(new),
          "profile-refeature --case-stats = --in refused, records kept", so + se)
    for stats in (new, os.path.join(d, ".", "rf.jsonl")):
        fresh_inputs()
        rc, so, se = run(tessera, "profile-refeature", "--in", records, "--out", new, "--case-stats", stats)
        check(rc == 2 and "--case-stats" in se and "--out" in se and not os.path.exists(new),
              f"profile-refeature --out {new} --case-stats {stats} refused", so + se)
        if os.path.exists(new):
            os.remove(new)
    # run --json must not replace the real STA table STA-real reads (a copy here, named by TESSERA_STA_TABLE).
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    table = os.path.join(d, "sta.json")
    shutil.copy(os.path.join(repo, "corpus", "data", "sta_mask_strategy_hunyuan_768x1280x117.json"), table)
    before = read_bytes(table)
    p = subprocess.run([tessera, "run", "--cpu", "--families", "STA-real", "--json", os.path.join(d, ".", "sta.json")],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, TESSERA_STA_TABLE=table))
    check(p.returncode == 2 and "--json" in p.stderr and "STA table" in p.stderr and p.stdout == ""
          and read_bytes(table) == before, "run --families STA-real --json <its STA table> refused", p.stdout + p.stderr)
    # ... also when STA-real is not among the families (a later run with it would read the report as its table).
    p = subprocess.run([tessera, "run", "--cpu", "--families", "Q16K16", "--json", table],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, TESSERA_STA_TABLE=table))
    check(p.returncode == 2 and "--json" in p.stderr and "STA table" in p.stderr and p.stdout == ""
          and read_bytes(table) == before, "run --families Q16K16 --json <the STA table> refused", p.stdout + p.stderr)
    # profile --splits: a split given twice would profile its cases twice.
    rc, so, se = run(tessera, "profile", "--list", "--splits", "profiling", "profiling", "--families", "Q64K64")
    check(rc == 2 and "--splits" in se and "more than once" in se and so == "", "profile --splits X X rejected",
          so + se)
    # profile --out: checked before any profiling (and before asking for a GPU).
    rc, so, se = run(tessera, "profile", "--families", "Q64K64", "--out", d)
    check(rc == 2 and "--out" in se and "directory" in se and so == "", "profile --out DIR refused first", so + se)
    # Unwritable outputs: refused before the work, naming the option and the reason.
    good = os.path.join(work, "good.jsonl")  # compile_table's records
    for path, reason in UNWRITABLE.items():
        commands = [("--json", ["run", "--cpu", "--families", "Q16K16", "--json", path]),
                    ("--out", ["profile", "--families", "Q64K64", "--out", path]),
                    ("--out", ["compile-table", "--in", good, "--out", path, "--min-leaf", "1"]),
                    ("--out", ["profile-refeature", "--in", records, "--out", path]),
                    ("--case-stats", ["profile-refeature", "--in", records, "--out", new, "--case-stats", path]),
                    ("--out", ["masks", "render", mask, "--out", path])]
        for option, args in commands:
            fresh_inputs()
            rc, so, se = run(tessera, *args)
            check(rc == 2 and f"{option}: " in se and reason in se and so == "" and not os.path.exists(new),
                  f"{args[0]} {option} {path}: refused before any work", so + se)
            if os.path.exists(new):
                os.remove(new)
    for path, reason in (("/sys/tessera_corp", "sysfs"), ("/proc/tessera_corp/x", "proc filesystem")):
        rc, so, se = run(tessera, "masks", "generate", "--small", "--families", "Q16K16", "--out", path)
        check(rc == 2 and "--out: " in se and reason in se and so == "", f"masks generate --out {path} refused",
              so + se)


def inspect(tessera):
    rc, so, se = run(tessera, "inspect", "catalog")
    check(rc == 0 and "example plan id" in so and "inspect plan` takes a plan id" in so, "inspect catalog", so + se)
    lines = so.splitlines()
    end = next(i for i, line in enumerate(lines) if line.endswith(" entries"))
    rows = [line.split() for line in lines[1:end]]
    check(len(rows) > 0, "inspect catalog lists entries", so)
    for row in rows:
        name, example = row[0], row[-1]
        if example == "-":
            check(row[6] not in ("1", "2", "3", "4"), f"{name}: no example plan only for stages outside 1..4", so)
            continue
        rc, so2, se2 = run(tessera, "inspect", "plan", example)
        check(rc == 0 and f"kernel      {name} (in the catalog)" in so2, f"example plan {example} runs {name}",
              so2 + se2)
        rc, so2, se2 = run(tessera, "inspect", "plan", name)
        check(rc != 0 and "kernel (catalog entry) name" in se2, f"inspect plan {name} explains plan ids", so2 + se2)
    persist = {row[0]: row[9] for row in rows}
    check(persist.get("wgmma.bf16.d128.t128x128.w12.s2") == "yes" and persist.get("mma.bf16.d128.t64x64.w4.s2") == "no"
          and persist.get("wgmma.bf16.d128.t64x128.w8.s2") == "no", "inspect catalog: the persist column", so)
    s1 = [row for row in rows if row[6] == "1"]
    check(len(s1) > 0 and all(row[-1] != "-" for row in s1), "entries with 1 stage have an example plan id", so)
    # Shared memory per CTA decides the architectures: 163,968 B (t128x128.w8.s2) exceeds the 99 KB of sm86.
    big = [row for row in rows if int(row[7]) > 99 * 1024]
    check(len(big) > 0 and all("sm86" not in row[8] and "sm90a" in row[8] for row in big),
          "entries over 99 KB of shared memory do not list sm86", so)
    rc, so, se = run(tessera, "inspect", "catalog", "--arch", "sm86")
    check(rc == 0 and all(f"{row[0]} " not in so for row in big), "inspect catalog --arch sm86 omits them", so + se)
    rc, so, se = run(tessera, "inspect", "plan", "sm86.mma.bf16.d128.q128d.kv128d.g1.tasc.split1.s2.w8")
    check(rc == 1 and "cannot launch on sm86" in so + se, "inspect plan of an entry too big for sm86 exits 1", so + se)
    rc, so, se = run(tessera, "inspect", "plan", rows[0][0])
    check(rc != 0 and "invalid argument: plan_id: " in se, "inspect plan errors name plan_id", so + se)
    rc, so, se = run(tessera, "inspect", "plan", "--help")
    check(rc == 0 and "plan_id" in so, "inspect plan --help names the positional plan_id", so + se)
    rc, so, se = run(tessera, "inspect", "plan", "sm90a.bogus")
    check(rc != 0 and "plan_id: " in se, "inspect plan of a malformed id names plan_id", so + se)
    # A plan no catalog entry runs (8 warps, 4 stages at d64 16x16: not a catalog shape): exit 1.
    rc, so, se = run(tessera, "inspect", "plan", "sm90a.mma.bf16.d64.q16d.kv16d.g1.tasc.split1.s4.w8")
    check("NOT in the catalog" in so and rc == 1, "inspect plan without a catalog entry exits 1", so + se)


def fresh_user_session8(tessera, work):
    """Defects a fresh-user pass found in session 8 (each failed on the binary before the fix)."""
    rc, so, se = run(tessera, "inspect", "catalog", "--arch", "")
    check(rc == 2 and "--arch" in se and "unknown architecture ''" in se and so == "",
          "inspect catalog --arch '' is an error naming --arch", so + se)
    rc, so, se = run(tessera, "inspect-mask", "")
    check(rc == 2 and "file: the mask file path is empty" in se, "inspect-mask '' names the argument", so + se)
    parent = os.path.join(work, "a_regular_file")
    with open(parent, "w") as f:
        f.write("x")
    rc, so, se = run(tessera, "run", "--json", os.path.join(parent, "x.json"))
    check(rc == 2 and "--json" in se and "is not a directory" in se and "does not exist" not in se,
          "run --json under a regular file says it is not a directory", so + se)
    rc, so, se = run(tessera, "masks", "generate", "--out", os.path.join(work, "sta_corpus"), "--families", "STA-real",
                     "--sta-table", "/nonexistent.json")
    check(rc == 2 and "--sta-table: " in se and "/nonexistent.json" in se,
          "masks generate --sta-table missing file names --sta-table", so + se)
    corpus = os.path.join(work, "stats_corpus")
    rc, so, se = run(tessera, "masks", "generate", "--out", corpus, "--small", "--families", "Q16K16")
    check(rc == 0, "masks generate --small for the stats checks", so + se)
    rc, so, se = run(tessera, "masks", "stats", corpus, corpus)
    check(rc == 2 and "inputs" in se and "more than once" in se, "masks stats DIR DIR refused (no double count)",
          so + se)
    rc, so, se = run(tessera, "masks", "stats", corpus, os.path.join(corpus, ".", ""))
    check(rc == 2 and "more than once" in se, "masks stats DIR DIR/. refused", so + se)
    one = next(os.path.join(d, f) for d, _, fs in os.walk(corpus) for f in sorted(fs) if f.endswith(".safetensors"))
    p = subprocess.run(["bash", "-c", f'"$0" masks stats <(cat "$1")', tessera, one], capture_output=True, text=True,
                       timeout=600)
    check(p.returncode == 0 and "Q16K16" in p.stdout, "masks stats reads a pipe (<(cat f))", p.stdout + p.stderr)
    layouts = {"sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4": "zero copy",
               "sm90a.mma.bf16.d128.q64d.kv64c2.g1.tasc.split1.s1.w4": "row-aligned",
               "sm90a.mma.bf16.d128.q64d.kv64c2.g1.trun.split1.s1.w4": "compact CSR",
               "sm90a.mma.bf16.d128.q16c8.kv16c8.g1.tasc.split1.s2.w8": "while n_kvb <= 8192"}
    for pid, want in layouts.items():
        rc, so, se = run(tessera, "inspect", "plan", pid)
        line = next((x for x in so.splitlines() if x.startswith("tile rows")), "")
        check(rc == 0 and want in line, f"inspect plan {pid} shows its tile-row layout ({want})", so + se)
    rc, so, se = run(tessera, "masks", "render", "--help")
    check(rc == 0 and "2147483648" not in so, "masks render --head range ends at the int32 maximum", so + se)
    # stdout before stderr when both go to one file: the plan table, then the message
    p = subprocess.run(["bash", "-c", '"$0" inspect plan sm90a.mma.bf16.d128.q64c2.kv64p2.g1.tasc.split4.s2.w4 2>&1',
                        tessera], capture_output=True, text=True, timeout=600)
    both = p.stdout
    check(p.returncode == 1 and both.find("plan ") < both.find("no catalog entry runs this plan"),
          "inspect plan prints its table before the error when stdout and stderr share a file", both)


def subcommands(tessera):
    rc, so, se = run(tessera, "bogus")
    check(rc != 0 and "tessera: unknown command 'bogus'" in se and "inspect" in se and "subcommand is required" not in se,
          "tessera bogus names the unknown command", so + se)
    rc, so, se = run(tessera, "masks", "bogus")
    check(rc != 0 and "tessera masks: unknown command 'bogus' (commands: generate, stats, render)" in se,
          "tessera masks bogus names the unknown command", so + se)
    for args in ([], ["inspect"], ["masks"]):
        rc, so, se = run(tessera, *args)
        check(rc != 0 and "A subcommand is required" in se, f"tessera {' '.join(args)} without a subcommand", so + se)
    rc, so, se = run(tessera, "inspect", "catalog", "extra")
    check(rc != 0 and "not expected: extra" in se, "an extra argument of a command is still CLI11's error", so + se)
    rc, so, se = run(tessera, "version")
    check(rc == 0, "tessera version", so + se)


def main():
    tessera, work = sys.argv[1], os.path.join(sys.argv[2], "cli_errors")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    compile_table(tessera, work)
    profile_refeature(tessera, work)
    run_command(tessera, work)
    mask_files(tessera, work)
    profile_masks(tessera, work)
    refeature_masks(tessera, work)
    profile_sources(tessera)
    profile_case_ids(tessera, work)
    crafted_mask_files(tessera, work)
    lost_stdout(tessera, work)
    corpus_commands(tessera, work)
    whole_requests(tessera, work)
    output_paths(tessera, work)
    inspect(tessera)
    fresh_user_session8(tessera, work)
    subcommands(tessera)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        sys.exit(1)
    print("all CLI error checks passed")


if __name__ == "__main__":
    main()
