#!/usr/bin/env python3
"""Rewrites the kernel launches of a .cu file, `k<<<grid, block[, smem[, stream]]>>>(args);`, as
`emu::launch(grid, block, emu::bind(k)(args)[, smem[, stream]]);` (the kernel with its arguments' values at the launch)
so that dev/cuda/emu can compile it as C++. usage: emu_launch.py IN.cu OUT.cpp"""
import re, sys

def balanced(s, i, open_, close):  # s[i] == open_; index after the matching close
    depth = 0
    while i < len(s):
        if s[i] == open_: depth += 1
        elif s[i] == close:
            depth -= 1
            if depth == 0: return i + 1
        i += 1
    raise SystemExit("emu_launch: unbalanced at %d" % i)

def split_top(s):  # split on top-level commas
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{": depth += 1
        if ch in ")]}": depth -= 1
        if ch == "," and depth == 0: out.append(cur); cur = ""
        else: cur += ch
    out.append(cur); return [x.strip() for x in out]

src = open(sys.argv[1]).read(); out = []; pos = 0; n = 0
for m in re.finditer(r"(\w+)<<<", src):
    if m.start() < pos: continue
    end = src.index(">>>", m.end()); cfg = split_top(src[m.end():end])
    if len(cfg) not in (2, 3, 4): raise SystemExit("emu_launch: launch with %d config values at %d" % (len(cfg), m.start()))
    a0 = end + 3; a1 = balanced(src, a0, "(", ")")
    out.append(src[pos:m.start()])
    rest = "".join(", %s" % x for x in cfg[2:])   # the dynamic shared memory's bytes, the stream
    out.append("emu::launch(dim3(%s), dim3(%s), emu::bind(%s)%s%s)" % (cfg[0], cfg[1], m.group(1), src[a0:a1], rest))
    pos = a1; n += 1
out.append(src[pos:])
open(sys.argv[2], "w").write("".join(out))
print("emu_launch: %d launches rewritten" % n, file=sys.stderr)
