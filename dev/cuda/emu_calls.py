#!/usr/bin/env python3
"""Function calls per chunk of the memory kernels, from two runs of the instrumented emulator (EMU_CALLS=FILE,
dev/cuda/emu_calls.sh builds it), and with a SASS listing, the local-memory instructions they cost.

usage: dev/cuda/emu_calls.py BINARY FILE BASE_FILE CHUNKS [SASS]
FILE's counts minus BASE_FILE's (a run at more chunks minus one at fewer), divided by CHUNKS (the chunks between)
and by the kernel's launches (its own entries, the same in both runs): per kernel, each function's calls per chunk
by thread 0 of CTA 0, as the emulator's source names them. Only the functions SASS lists as subroutines of the
kernel are shown with SASS (the rest are inlined on the GPU). With SASS (dev/cuda/sass_local.py's listing of the same source for the GPU, `--per-call`), each
function's local-memory instructions per call (LDL, STL: a __noinline__ call's arguments beyond the registers and
the caller's values live across it; every one a round trip to L1, and past its few KB to L2) times its calls: an
estimate of the local-memory instructions per chunk and thread (loops inside a function counted once, so a floor)."""
import os, subprocess, sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_sites import short  # (the same names as the barrier sites')


def read(path):
    d = {}
    for line in open(path):
        k, f, n = line.split()
        d[(k, f)] = int(n)
    return d


def name(binary, off, cache={}):
    """the function at an offset of the emulator's binary, as emu_sites.short writes it"""
    if off not in cache:
        out = subprocess.run(["addr2line", "-f", "-C", "-e", binary, "0x" + off], capture_output=True,
                             text=True).stdout.splitlines()
        cache[off] = short(out[0]) if out else "?"
    return cache[off]


def main():
    binary, path, base, chunks = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    d, b = read(path), read(base)
    local = {}
    if len(sys.argv) > 5:  # "kernel function local-per-call" lines
        for line in open(sys.argv[5]):
            f = line.split()
            if len(f) == 3:
                local[(f[0], f[1])] = int(f[2])
    launches = {k[0]: n for k, n in d.items() if k[0] == k[1]}
    per = defaultdict(dict)
    for k in set(d) | set(b):
        n = (d.get(k, 0) - b.get(k, 0)) / chunks / launches.get(k[0], 1)
        if n:
            kern, fn = name(binary, k[0]), name(binary, k[1])
            if local and (kern, fn) not in local:
                continue
            per[kern][fn] = per[kern].get(fn, 0) + n
    for kern in sorted(per):
        rows = sorted(per[kern].items(), key=lambda e: -e[1])
        total = sum(n for fn, n in rows if fn != kern)
        est = sum(n * local.get((kern, fn), 0) for fn, n in rows if fn != kern) + local.get((kern, kern), 0)
        print(f"{kern}: {total:.1f} calls per chunk" + (f", ~{est:.0f} local-memory instructions per chunk" if local else ""))
        if (kern, kern) in local:
            print(f"  {1:8.1f}  (the kernel's chunk loop)  ({local[(kern, kern)]} local per chunk)")
        for fn, n in rows:
            if fn == kern:
                continue
            lc = local.get((kern, fn))
            print(f"  {n:8.1f}  {fn}" + (f"  ({lc} local per call: {n * lc:.0f})" if lc is not None else ""))


if __name__ == "__main__":
    main()
