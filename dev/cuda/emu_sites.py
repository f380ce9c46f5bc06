#!/usr/bin/env python3
"""Names the barrier sites an emulated run counted (EMU_BARRIER_SITES=FILE, dev/cuda/emu/cuda_runtime.h).

usage: dev/cuda/emu_sites.py BINARY FILE [BASE_FILE]
Prints per kernel, then per site, the count (FILE's minus BASE_FILE's where given: e.g. T = 48 minus T = 16, the
barriers of two chunks), the kind (block: __syncthreads; cluster: cluster.sync) and the inlined call chain from the
outermost function to the barrier, as function:line of the emulator's source (build/emu/*.cpp, train_miras.cu's
code with the launches rewritten; the functions are train_miras.cu's)."""
import re, subprocess, sys
from collections import defaultdict


def read(path):
    d = {}
    for line in open(path):
        f = line.split()
        d[(f[0], f[2], tuple(f[3:]))] = int(f[1])
    return d


def short(fn):
    fn = fn.strip()
    while True:  # templates and lambdas' argument lists out
        t = re.sub(r"<[^<>]*>", "", fn)
        if t == fn:
            break
        fn = t
    fn = re.sub(r"\([^()]*\)", "", fn)
    fn = re.sub(r"^.* ", "", fn)
    return fn


def chain(binary, off, cache={}):
    """addr2line -i of one address: [(function, line)], the innermost (the address's own function) first"""
    if off not in cache:
        out = subprocess.run(["addr2line", "-f", "-i", "-C", "-e", binary, "0x" + off], capture_output=True,
                             text=True).stdout.splitlines()
        cache[off] = [(short(out[i]), out[i + 1].split(" ")[0].split(":")[-1]) for i in range(0, len(out) - 1, 2)]
    return cache[off]


def main():
    binary, path = sys.argv[1], sys.argv[2]
    d = read(path)
    if len(sys.argv) > 3:
        b = read(sys.argv[3])
        d = {k: v - b.get(k, 0) for k, v in d.items() if v - b.get(k, 0) != 0}
    per = defaultdict(list)
    for (k, kind, frames), n in d.items():
        kname = chain(binary, k)[0][0] if chain(binary, k) else "?"
        parts = []
        for fr in frames:  # the barrier's caller first, then its callers: stop at the kernel
            c = chain(binary, fr)
            parts += c
            if any(fn == kname for fn, _ in c):
                break
        names = [fn + ":" + ln for fn, ln in reversed(parts)]
        per[kname].append((n, kind, " > ".join(names[1:] if names and names[0].startswith(kname) else names)))
    for k in sorted(per, key=lambda k: -sum(n for n, _, _ in per[k])):
        rows = sorted(per[k], key=lambda r: (-r[0], r[2]))
        print("%s: %d barriers (%d cluster)" % (k, sum(n for n, _, _ in rows), sum(n for n, t, _ in rows if t == "cluster")))
        for n, t, s in rows:
            print("  %6d %-7s %s" % (n, t, s))


if __name__ == "__main__":
    main()
