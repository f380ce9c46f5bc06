#!/usr/bin/env python3
"""Rewrites the kernel launches of a .cu file, `k<<<grid, block[, smem[, stream]]>>>(args);`, as
`emu::launch(grid, block, emu::bind(k)(args)[, smem[, stream]]);` (the kernel with its arguments' values at the launch)
so that dev/cuda/emu can compile it as C++; and every `__shared__ T x[..];` as a reference to one copy per CTA
(`emu::cta_static`, so that the CTAs of a cluster, which run together, each have their own; at file scope a macro),
and `extern __shared__ T x[];` as a pointer to the CTA's dynamic shared memory.
usage: emu_launch.py IN.cu OUT.cpp"""
import re, sys, zlib

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
src = "".join(out)

def shared(m):  # `__shared__ T x[a][b];` (not extern): a per-CTA copy; a declaration at file scope becomes a macro
    indent, ty, name, dims = m.group(1), m.group(2), m.group(3), m.group(4) or ""
    if indent == "" and (m.start() == 0 or src[m.start() - 1] == "\n"):
        # (one line, so that the line numbers stay the .cu's; the ID from the name, apart from __COUNTER__'s)
        return "#define %s (emu::cta_static<%s%s, %d>())" % (name, ty, dims, 1000000 + zlib.crc32(name.encode()) % 1000000)
    return "%sauto& %s = emu::cta_static<%s%s, __COUNTER__>();" % (indent, name, ty, dims)
# `extern __shared__ T x[];` (the dynamic shared memory): a pointer to this CTA's
src, nd = re.subn(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+)\s+(\w+)\[\]\s*;",
                  lambda m: "%s* %s = (%s*)emu::dyn_smem();" % (m.group(1), m.group(2), m.group(1)), src)
src, ns = re.subn(r"(?m)([ \t]*)(?<!extern )__shared__\s+([\w:]+)\s+(\w+)((?:\[[^\]]+\])*)\s*;", shared, src)
open(sys.argv[2], "w").write(src)
print("emu_launch: %d launches, %d __shared__ declarations rewritten (%d dynamic)" % (n, ns + nd, nd), file=sys.stderr)
