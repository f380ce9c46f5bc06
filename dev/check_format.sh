#!/usr/bin/env bash
# The layout check of `make test`: train_miras.c, train_miras.cu and test_miras.c are exactly as clang-format 14
# lays them out with dev/clang-format.yml (one statement per line, lines up to 120 characters; `make format`
# applies it). Other clang-format versions lay out a few constructs differently, so they skip, counted.
set -u
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format)}
pass=0; fail=0; skip=0
if [ -z "$CF" ] || ! "$CF" --version | grep -q 'version 14\.'; then
    echo "# SKIP layout of the C and CUDA files: clang-format 14 not found (Debian: apt-get install clang-format-14)"
    skip=3
else
    for f in train_miras.c train_miras.cu test_miras.c; do
        n=$("$CF" --style=file:dev/clang-format.yml "$f" | diff "$f" - | grep -c '^[<>]')
        if [ "$n" -eq 0 ]; then echo "ok - $f is laid out as dev/clang-format.yml says"; pass=$((pass + 1))
        else echo "not ok - $f: $n lines differ from clang-format's layout (run make format)"; fail=$((fail + 1)); fi
    done
fi
[ "$skip" -gt 0 ] && echo "# $skip check(s) skipped"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
