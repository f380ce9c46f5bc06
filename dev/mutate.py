#!/usr/bin/env python3
# Mutation testing of the hand-written backward: do the tests fail when the backward is wrong?
#
#   python3 dev/mutate.py [-n 40] [-s 1] [--fp64] [--ops flip,sign,drop,swap] [--acc] [--only LINE:OP,...] [--list]
#
# Draws -n mutants (seed -s) from the lines of train_miras.c that lie inside a function whose name contains
# "backward", one small change each:
#   flip   '+=' <-> '-='                     (an accumulation's sign)
#   sign   the first binary ' + ' <-> ' - '  (a term's sign)
#   drop   the statement deleted              (a term or an update missing)
#   swap   the first ' * ' -> ' / '           (a factor inverted)
# builds test_miras from the mutated source (the Makefile's flags, in a scratch folder) and runs it on
# dev/fixtures; with --fp64 the mutants it does not catch are tried with test_miras_fp64 too (fp64 finite
# differences). --acc draws only from the lines that accumulate (+=, -=: the gradient terms, where a missing
# or wrongly signed small term is the likely bug). A mutant that does not compile is dropped and another drawn. Prints one line per mutant (caught by
# the first FAIL line, or SURVIVED) and a summary. A survivor is a place to look: code no test reaches, a
# tolerance too loose, or a change that computes the same thing (an equivalent mutant, e.g. a sign flip of a zero).
# The trainer runs inside test_miras (bad input, resume) use the unmutated ./train_miras: the backward is checked
# in-process. ~40 s per mutant on two cores (compile 25 s, tests 15 s).
import argparse, os, random, re, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def backward_lines(src):
    """(index, line) of the statement lines inside the functions whose name contains 'backward'."""
    out, inside = [], False
    for i, line in enumerate(src):
        if re.match(r"^static [^(]*backward[^(]*\(", line) and not line.rstrip().endswith(";"):
            inside = True
            continue
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
        if s.endswith(";") and not re.match(r"^(real|int|size_t|double|float|const|long|uint|char|return|break|continue|if|for|while|else)\b", s) and s.count("(") == s.count(")"):
            return re.sub(r"\S.*;", ";", code, count=1) + sep + comment
    elif op == "swap":
        m = re.search(r"(?<=[\w)\]]) \* (?=[\w(])", code)
        if m:
            return code[: m.start()] + " / " + code[m.end():] + sep + comment
    return None


def cflags():
    out = subprocess.run(["make", "-n", "-B", "test_miras"], cwd=ROOT, capture_output=True, text=True).stdout
    cmd = [l for l in out.splitlines() if "test_miras.c" in l][0].split()
    return cmd


def run(cmd, cwd, timeout, env=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("-s", type=int, default=1)
    ap.add_argument("--fp64", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--ops", default="flip,sign,drop,swap", help="the kinds of change to draw from")
    ap.add_argument("--acc", action="store_true", help="only lines that accumulate (+= or -=): the gradient terms")
    a = ap.parse_args()
    src = open(os.path.join(ROOT, "train_miras.c")).read().split("\n")
    ops = a.ops.split(",")
    lines = [i for i in backward_lines(src) if not a.acc or re.search(r"[+-]=", src[i].partition("//")[0])]
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
    base = cflags()
    work = tempfile.mkdtemp(prefix="mutate_")
    shutil.copy(os.path.join(ROOT, "test_miras.c"), work)
    env = dict(os.environ, MIRAS_TRAIN_BIN=os.path.join(ROOT, "train_miras"))
    caught = survived = 0
    print("%d candidate mutants in %d backward lines; drawing %d (seed %d)" % (len(cands), len(lines), a.n, a.s))
    sys.stdout.flush()
    k = 0
    for i, op in cands:
        if k >= a.n:
            break
        mut = src[:]
        mut[i] = mutate(src[i], op)
        open(os.path.join(work, "train_miras.c"), "w").write("\n".join(mut))
        tags = []
        for exe, extra in (("test_miras", []), ("test_miras_fp64", ["-DMIRAS_DOUBLE"])):
            if exe == "test_miras_fp64" and not a.fp64:
                break
            cmd = [c for c in base]
            cmd[cmd.index("-o") + 1] = exe
            cmd[1:1] = extra
            rc, out = run(cmd, work, 600)
            if rc != 0:
                tags = None
                break
            rc, out = run(["./" + exe, os.path.join(ROOT, "dev/fixtures")], work, 900, env)
            if rc is None:
                tags.append("%s: timeout" % exe)
                break
            fails = [l for l in out.splitlines() if l.startswith("FAIL")]
            if fails:
                tags.append("%s: %d FAIL, first: %s" % (exe, len(fails), fails[0][7:110]))
                break
            if rc != 0:  # a crash (an index mutated out of bounds) fails the test run too
                tags.append("%s: exit %d without a FAIL line" % (exe, rc))
                break
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
