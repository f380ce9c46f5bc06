#!/usr/bin/env bash
# GPU throughput and MFU of train_miras_cu on a ~100M-parameter titans model at T=4096, next to the PyTorch
# reference on the same model (dev/reference.py bench --device cuda).
# usage: [PRESET=titans] [REF=1] dev/bench_gpu.sh [B=4] [T=4096] [steps=6] [prec=0] [REF_T=256] [REF_B=1]
# PRESET: any preset at the same sizes (the README's GPU table: every preset with prec 2); REF=0 skips the reference,
# DECODE=0 the decode latency (B = 1, next to its floor); CU=PATH times another build of the GPU trainer (e.g.
# build/train_miras_cu_base, an earlier commit's: dev/cuda/device_prep.sh's CU_BASE) in place of ./train_miras_cu;
# FLAGS="..." adds trainer flags after the preset's (e.g. FLAGS="-k 64": the memory chunk size; the model line says so;
# the PyTorch reference runs without them)
# prec: the -f of train_miras_cu, the precision of the dense products: 0 fp32, 1 TF32, 2 bf16 (fp32 master weights)
# (B=4 needs about 64 GB; if that run fails, B=2 (about 33 GB) is tried.)
#
# Model: titans (deep memory, momentum, chunk 16), V=50257, D=768, L=8, H=12 (head width d=64), E=4 (memory width
# d_m=256), F=2048: 103,447,584 parameters. Tokens are random (throughput does not depend on them).
# train_miras_cu's tok/s is the median over steps 2..N of the whole step (forward, backward, AdamW).
#
# FLOPs per token, for MFU (model FLOPs, the chunk recomputation in the memory's backward not counted):
#   6 * params                          the usual dense estimate (2 forward + 4 backward per parameter per token;
#                                       the tied output head is the wte term)
# + 66 * d * d_m * H * L                the memory's own products: per token, head and layer, the forward does
#                                       11 products of size d x d_m (k W2^T, h W1^T, d1 W1, the two reads through
#                                       W and S of both matrices, the rank-one updates of P and S of both), the
#                                       backward 22 (updates 8, reads 8, second-order terms 6); 2 FLOPs each.
#                                       (terms in b = 16, the chunk size, instead of d_m are left out)
# MFU = FLOPs/token * tok/s / peak, with the peak of the matrix unit the run can use: fp32 (the default, CUDA
# cores) 67 TFLOP/s on H100 SXM and H200, 51 on H100 PCIe; with prec=1 (cuBLAS TF32 tensor cores for the dense
# products; the memory kernels stay fp32) the dense TF32 peak, 495 (SXM, H200) or 378 (PCIe); with prec=2 (bf16
# tensor cores for the dense products) the dense bf16 peak, 989 (SXM, H200) or 756 (PCIe). The memory kernels
# run on fp32 CUDA cores in every mode, so the MFU of prec 1 and 2 is against a peak they cannot reach as a
# whole. PEAK_TFLOPS=X overrides.
#
# The reference is naive (a Python loop over tokens, autograd for the inner gradients; it keeps the memory state
# of every token, ~8 MB per token and layer here), so it runs at REF_T (default 256) with REF_B sequences, one
# warm-up and one timed step, at most 300 s; its tok/s is printed with the T it ran at.
set -eu
cd "$(dirname "$0")/.."
B=${1:-4}; T=${2:-4096}; steps=${3:-6}; prec=${4:-0}; REF_T=${5:-256}; REF_B=${6:-1}
case "$prec" in 0|1|2) ;; *) echo "prec must be 0 (fp32), 1 (TF32) or 2 (bf16)"; exit 1 ;; esac
V=50257; D=768; L=8; H=12; E=4
CU=${CU:-./train_miras_cu}
[ "$CU" != ./train_miras_cu ] || make -s train_miras_cu >/dev/null
dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || echo unknown)
out=build/bench_gpu; mkdir -p $out
# random GPT-2-vocabulary shards (llm.c format), enough for the run
/usr/bin/env python3 - "$out/rand_train_000000.bin" $(( (steps + 2) * B * T + 1 )) <<'EOF'
import random, struct, sys
path, n = sys.argv[1], int(sys.argv[2]); random.seed(0)
h = [0] * 256; h[0], h[1], h[2] = 20240520, 1, n
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *h)); f.write(struct.pack("<%dH" % n, *[random.randrange(50257) for _ in range(n)]))
EOF
log=$out/train.txt
PRESET=${PRESET:-titans}
FLAGS=${FLAGS:-}
run() { $CU -p $PRESET -V $V -D $D -L $L -H $H -E $E -b $1 -t $T -x $steps -u 1 -v 0 -g 0 -n 0 -f $prec $FLAGS \
            -i "$out/rand_train_*.bin" -j none -z none -o $out >$log 2>&1; }
if ! run $B; then
    echo "B=$B failed: $(grep -m1 error $log)"; [ "$B" -gt 2 ] || { cat $log; exit 1; }
    B=2; echo "retrying with B=$B"; run $B || { cat $log; echo "train_miras_cu failed"; exit 1; }
fi
params=$(grep -m1 -oE '[0-9]+ params' $log | awk '{print $1}')
tps=$(grep -E '^step +[0-9]+/' $log | tail -n +2 | sed -E 's/.*\| ([0-9]+) tok\/s/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
ms=$(grep -E '^step +[0-9]+/' $log | tail -n +2 | sed -E 's/.*\| ([0-9.]+) ms \|.*/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
if [ -n "${PEAK_TFLOPS:-}" ]; then peak=$PEAK_TFLOPS
else case "$dev" in
    *H100*PCIe*) peak=$(case $prec in 1) echo 378 ;; 2) echo 756 ;; *) echo 51 ;; esac) ;;
    *H100*|*H200*) peak=$(case $prec in 1) echo 495 ;; 2) echo 989 ;; *) echo 67 ;; esac) ;;
    *) peak=0 ;;
esac; fi
d=$((D / H)); dm=$((E * d)); plabel=$(case $prec in 1) echo TF32 ;; 2) echo bf16 ;; *) echo fp32 ;; esac)
mf=66; case $PRESET in deltanet|gated_deltanet|linear_attn) mf=18; dm=$d ;; esac   # linear memories: ~9 d x d products per token
mfu=$(awk -v p="$params" -v t="$tps" -v pk="$peak" -v d=$d -v dm=$dm -v H=$H -v L=$L -v mf=$mf \
      'BEGIN { f = 6 * p + mf * d * dm * H * L; if (pk > 0) printf "%.2f%% (%.1f TFLOP/s of %d, %.0f MFLOP/token)", 100 * f * t / (pk * 1e12), f * t / 1e12, pk, f / 1e6; else printf "n/a (set PEAK_TFLOPS)" }')
echo "device: $dev"
echo "model: $PRESET${FLAGS:+ $FLAGS} V=$V D=$D L=$L H=$H E=$E $params params; B=$B T=$T, $plabel dense products"
echo "train_miras_cu: $tps tok/s ($ms ms/step, median of steps 2..$steps, incl. AdamW), MFU $mfu"
grep -E "^memory" $log | sort -u   # (how the memory kernels ran: the split, the reads apart, the kept states)
# decode latency (DECODE=0 skips): the same model at B = 1 after one training step at T = 64, 256 sampled tokens;
# train_miras_cu times the decoder step alone (one token through every layer, its logits on the host) and prints
# its floor: the bytes of the weights (as the products read them: fp32, bf16 with prec 2) and memory states one token
# reads, over the card's peak memory bandwidth; once with plain launches, once with CUDA graphs (MIRAS_DECODE_GRAPH=1,
# the sampler's default), once with the partial chunk re-run per token instead of the recurrent step, plain launches
# (MIRAS_DECODE_CHUNK=1; the same for the presets the recurrent step does not take)
if [ "${DECODE:-1}" = 1 ]; then
    for e in "MIRAS_DECODE_GRAPH=0" "MIRAS_DECODE_GRAPH=1" "MIRAS_DECODE_GRAPH=0 MIRAS_DECODE_CHUNK=1"; do
        if env $e $CU -p $PRESET -V $V -D $D -L $L -H $H -E $E -b 1 -t 64 -x 1 -u 1 -v 0 \
               -g 257 -n 0 -f $prec $FLAGS -i "$out/rand_train_*.bin" -j none -z none -o $out/decode >$out/decode.txt 2>&1; then
            echo "decode, B=1, $plabel, $e: $(grep -m1 '^decode:' $out/decode.txt | sed 's/^decode: //')"
        else echo "decode ($e): failed: $(tail -n 1 $out/decode.txt)"; fi
        rm -rf $out/decode
    done
fi
ref_tps=n/a; ref_note=""
if [ "${REF:-1}" = 0 ]; then echo "PyTorch reference: skipped (REF=0)"
elif /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    if ref_line=$(timeout 300 /usr/bin/python3 dev/reference.py bench --preset $PRESET --device cuda --V $V --D $D --L $L --H $H --E $E \
                  --B $REF_B --T $REF_T --steps 1 2>&1 | tail -n 1); then
        ref_tps=$(echo "$ref_line" | sed -E 's/.*, ([0-9.]+) tokens\/s/\1/'); ref_note=" at B=$REF_B T=$REF_T"
        echo "PyTorch reference (naive, fwd+bwd only)$ref_note: $ref_tps tok/s"
    else echo "PyTorch reference: failed or timed out: $ref_line"; fi
else echo "PyTorch reference: skipped (no torch with CUDA for /usr/bin/python3)"; fi
ratio=$(awk -v a="$tps" -v b="$ref_tps" 'BEGIN { if (b + 0 > 0) printf "%.0fx", a / b; else print "n/a" }')
echo "| device | model | B x T | train_miras_cu tok/s | MFU | reference tok/s | ratio |"
echo "| $dev | $PRESET ~100M, $plabel | ${B}x${T} | $tps | ${mfu%% (*} | $ref_tps${ref_note} | $ratio |"
