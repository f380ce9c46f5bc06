#!/usr/bin/env python3
"""Local-memory instructions (LDL, STL) of the memory kernels' functions in a SASS listing.

usage: dev/cuda/sass_local.py LISTING [KERNEL_REGEX] [--per-call]
LISTING: `cuobjdump -sass` (or `nvdisasm -c`) of a cubin built from train_miras.cu with `nvcc -O3 -arch=sm_90 -cubin`.
On sm_90 a __noinline__ device function is a subroutine of each kernel's text that calls it. Its LDL / STL are
either register spills or the calling convention's: the arguments that do not fit the parameter registers, and the
caller's values live across a call (saved before, loaded after). At 512 threads per CTA (128 registers each) and
with the shared memory taking nearly all of the L1 (the plan's ~224 KB of 256 KB), a thread's stack frame of ~2 KB
(1 MB per CTA) cannot stay in the L1: every such load goes to L2, a few hundred cycles on the chain's critical path.
Per function: its LDL / STL, how many sit inside a loop (a backward branch's range: executed per iteration), its
CALLs, and its instructions. --per-call prints "kernel function local" lines for dev/cuda/emu_calls.py instead (for
the kernel's own body, under the kernel's name: those inside its loops, i.e. its chunk loop's, once per chunk)."""
import os, re, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_sites import short


def demangled(mangled):
    """c++filt's name, as emu_sites.short writes it (so that dev/cuda/emu_calls.py's names match)"""
    return short(subprocess.run(["c++filt", mangled], capture_output=True, text=True).stdout)


def parse(path):
    """{kernel: {function: [instructions]}}: a kernel's own body under the kernel's name"""
    ks, kern, fn = {}, None, None
    for line in open(path):
        s = line.strip()
        m = re.match(r"^\.text\.(\S+):$", s) or re.match(r"^Function : (\S+)$", s)
        if m:
            kern = fn = m.group(1)
            ks.setdefault(kern, {})[fn] = []
            continue
        m = re.match(r"^\$(\S+?)\$(\S+):$", s)  # a subroutine: $kernel$function:
        if m and kern:
            fn = m.group(2)
            ks[kern][fn] = []
            continue
        if kern and fn:
            if re.match(r"^\.L_x_\d+:$", s):
                ks[kern][fn].append(("label", s[:-1]))
                continue
            m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", s)
            if m:
                ks[kern][fn].append(("ins", m.group(1)))
    return ks


def stats(body):
    lab, ins = {}, []
    for kind, x in body:
        if kind == "label":
            lab[x] = len(ins)
        else:
            ins.append(x)
    inloop = [0] * len(ins)
    for i, x in enumerate(ins):
        m = re.search(r"BRA\s.*`\((\.L_x_\d+)\)", x)
        if m and m.group(1) in lab and lab[m.group(1)] <= i:
            for j in range(lab[m.group(1)], i + 1):
                inloop[j] = 1
    loc = [i for i, x in enumerate(ins) if re.search(r"\b(LDL|STL)\b", x)]
    return {"local": len(loc), "loop": sum(inloop[i] for i in loc), "calls": sum("CALL" in x for x in ins),
            "ins": len(ins)}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    per_call = "--per-call" in sys.argv
    ks = parse(args[0])
    pat = re.compile(args[1] if len(args) > 1 else r"memory_(forward|backward|reads)_kernel|decoder_recurrent_kernel")
    for kern in sorted(ks):
        kn = demangled(kern)
        if not pat.search(kn):
            continue
        rows = []
        for fn, body in ks[kern].items():
            s = stats(body)
            rows.append((s, "(kernel body)" if fn == kern else demangled(fn)))
        # the same function under several template arguments: the largest one's count (the emulator counts by name)
        if per_call:
            best = {}
            for s, n in rows:  # (the kernel body: those in its loops, the chunk loop's per chunk)
                best[n] = max(best.get(n, 0), s["loop"] if n == "(kernel body)" else s["local"])
            for n, v in sorted(best.items()):
                print(kn, kn if n == "(kernel body)" else n, v)
            continue
        tot = sum(s["local"] for s, _ in rows)
        print(f"{kn}: {tot} LDL/STL in {len(rows)} functions")
        for s, n in sorted(rows, key=lambda e: -e[0]["local"]):
            if s["local"]:
                print(f"  {s['local']:5d} ({s['loop']:4d} in loops)  {s['calls']:3d} calls  {s['ins']:6d} instructions  {n}")


if __name__ == "__main__":
    main()
