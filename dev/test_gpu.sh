#!/usr/bin/env bash
# The GPU trainer against the CPU trainer (`make test_gpu`; needs a GPU). For every dev/fixtures/*.bin and for
# synthetic inputs at larger shapes (head width 64, memory width 256, partial chunks, channel-wise gates, every
# preset; and head width 15, the kernels' scalar paths): train_miras -J and train_miras_cu -J dump logits, loss,
# gradients and 3-10 AdamW steps, and `test_miras --compare` diffs them (3 checks each); then
# `train_miras_cu --decode-test` checks token-by-token decoding against the parallel forward on the GPU (1 check
# each). The last line is "N passed, N failed".
#
# GPU_BIN=build/emu/train_miras_emu dev/test_gpu.sh runs the same checks on the CPU emulator of dev/cuda/emu
# (build it with dev/cuda/emu_build.sh; slow: SYNTH=0 skips the synthetic inputs; ONLY=REGEX keeps the inputs
# whose names match; JOBS=N checks N inputs at once; SWEEP=1 adds the 200 inputs of test_miras's option sweep).
#
# bf16: the inputs whose names match BF16 (a regex; BF16='^$' for none) are also run with -f 2
# (bf16 dense products, fp32 master weights) and compared with the same CPU dump by `test_miras --compare-bf16`
# (3 checks each: logits and loss, gradient cosine over all and per tensor, the AdamW step losses; the
# tolerances and why are in test_miras.c). The fp32 checks above are unchanged.
set -u
cd "$(dirname "$0")/.." || exit 1
GPU=${GPU_BIN:-./train_miras_cu}
SYNTH=${SYNTH:-1}
ONLY=${ONLY:-.}
JOBS=${JOBS:-1}   # inputs checked at once (the emulator: one per core; a GPU: several processes share it)
# each input's CPU trainer and the GPU trainer's host code are OpenMP programs: JOBS of them on all cores each would
# spin against each other, so each gets its share of the cores unless OMP_NUM_THREADS says otherwise
if [ "$JOBS" -gt 1 ] && [ -z "${OMP_NUM_THREADS:-}" ]; then
    n=$(( $(nproc 2>/dev/null || echo 1) / JOBS )); [ "$n" -ge 1 ] || n=1; export OMP_NUM_THREADS=$n
fi
# (not yaad, yaad_cw, deep_nores_gd, mal, mac: their 10 steps amplify any rounding, see test_miras.c's compare_bf16)
BF16=${BF16:-'^(titans|ttt_mlp|deltanet|memora_cw|moneta_cw|transformer|mag|syn_.*)$'}
# (nor syn_atlas_pp: on the emulator its bf16 gradient cosine is 0.99999 over all, but its gate_gamma_b, 4 entries,
# lands at 0.82 against the per-tensor 0.97; syn_atlas, the same model without the gated memory, at 0.99928)
NOBF16=${NOBF16:-'^syn_atlas_pp$'}
# the inputs whose GPU dump is made again with each setting of CKPT_ENVS (the generic memory kernels keeping one
# chunk-start state in 3, or in as many as fit EMU_MEM_FREE bytes on the emulator) and must not change at all
CKPT=${CKPT:-'^(titans|titans_anchor|ttt_mlp|yaad_anchor|memora|moneta_cw|omega_mom|omeganet|muon_deep|atlas|atlas_chunk|atlas_pp|syn_titans_d48|syn_omega_mom|syn_titans_n2048|syn_memora|syn_atlas_chunk|syn_omega_yaad|syn_gated_cw)$'}
CKPT_ENVS=${CKPT_ENVS:-MIRAS_MEM_CKPT=3}
# the inputs (the b = 1 delta rule at head width 64) also run through the WY chunk kernels (MIRAS_MEM_WY=1, the split,
# and =3, the split with T = (I + L)^-1): the same fp32 checks against the CPU dump (3xTF32 chunk products), and with
# =1 bf16's (TF32) where BF16 matches
WY=${WY:-'^(syn_deltanet|syn_gdn_t150)$'}
# the inputs also run with the reads of every chunk apart from the chain (MIRAS_MEM_PAR=1: the forward's reads and
# the backward's reads part for all chunks at once, the chains without them): the same fp32 checks against the CPU
# dump, and bf16's where BF16 matches, and it must say that it ran so (else 3 failures: the checks would pass on the
# one-pass kernels)
PAR=${PAR:-'^(titans|titans_anchor|titans_H|ttt_mlp|yaad|yaad_cw|moneta_anchor|moneta_cw|memora|memora_cw|gated_mom|poly_mom|deep_noln|mal|mag|hybrid_asm|gated_deltanet|syn_titans_d64|syn_split|syn_memora|syn_moneta_cw|syn_gated_cw|syn_yaad_cw)$'}
# of those, the inputs whose backward chain also runs recomputing each chunk's forward values (MIRAS_MEM_PAR_FW=0; by
# default it loads those the reads' pass saved): the same fp32 checks, and the line that says it recomputed
PARFW=${PARFW:-'^(titans|syn_titans_d64)$'}
# the inputs that also run with the chunk-start state copied into shared memory in every chain, ahead of the rows'
# (n, d_m) arrays (MIRAS_MEM_STATE=3; by default only the chains with the reads apart copy it): the same fp32 checks,
# and the line that says a chain copied it (else 3 failures: the checks would pass on the state in global memory)
STATE=${STATE:-'^(titans|titans_anchor|gated_mom|omega_mom|muon_deep|syn_titans_d64)$'}
# the inputs whose decoding is checked again with MIRAS_DECODE_CHUNK=1 (the partial chunk re-run for every token,
# decoder_memory_kernel) beside the default recurrent step (decoder_recurrent_kernel): both against the parallel
# forward, and each must say which it ran (else a failure: both checks could have run the same decoder)
DECCHUNK=${DECCHUNK:-'^(titans|moneta|memora|mal|omeganet|atlas|atlas_chunk|muonc_linear|syn_titans_d64|syn_split|syn_split_omega|syn_omeganet|syn_omega_mom)$'}
out=build/gpu_test
mkdir -p "$out"
echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true) (GPU binary: $GPU)"
for b in ./train_miras ./test_miras "$GPU"; do
    [ -x "$b" ] || { echo "missing $b (make test_gpu builds train_miras, test_miras and train_miras_cu)"; echo "0 passed, 1 failed"; exit 1; }
done
pass=0; fail=0

# synthetic inputs: name and flags (model and batch); written by the GPU binary's host code (--make-input).
# (syn_titans_n2048: enough rows, 2048, for the multi-segment reductions, e.g. conv_backward's weight gradient.
# syn_titans_d48w: d 48 in whole 16-row chunks, so the tensor-core products take k in quads with K = 48, whose last
# batch of loads (tc_product's TC_BATCH) is partial.)
# Each is well conditioned in float: the float CPU trainer is within ~1e-6 (logits) and ~1e-5 (gradients) of its
# fp64 build on it. (Memora at some shapes is not: with -D 64 -E 4 -k 4 the float CPU's gradients are 3e-4 from
# fp64, and any two float implementations then differ by that much.)
synth=(
  "syn_titans_d64   -p titans -V 256 -D 128 -L 2 -H 2 -E 4 -k 16 -b 2 -t 40"
  # head width 15 (14 where attention's RoPE needs it even): no row of a state is a whole number of 16-byte words,
  # so the kernels take their scalar paths instead of the float4 ones (a mutant in mem_update_backward_ew's scalar
  # dS term passed every other input; each of these runs in seconds on the emulator)
  "syn_titans_d15   -p titans -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_ttt_d15      -p ttt_mlp -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_yaad_d15     -p yaad -R 4 -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_moneta_d15   -p moneta -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_memora_d15   -p memora -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_gated_d15    -p titans -T 1 -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_omeganet_d15 -p omeganet -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_atlas_d15    -p atlas -G 3 -V 256 -D 30 -L 1 -H 2 -E 2 -k 4 -b 1 -t 10"
  "syn_atlasc_d15   -p atlas_chunk -V 256 -D 30 -L 1 -H 2 -E 2 -k 5 -b 2 -t 17"
  "syn_dn_d15       -p deltanet -V 256 -D 30 -L 1 -H 2 -b 2 -t 17"
  "syn_gdn_d15      -p gated_deltanet -V 256 -D 30 -L 1 -H 2 -b 2 -t 17"
  "syn_la_d15       -p linear_attn -V 256 -D 30 -L 1 -H 2 -k 5 -b 2 -t 17"
  "syn_lattice_d15  -p lattice -V 256 -D 30 -L 1 -H 2 -b 2 -t 17 -w 4"
  "syn_dot_d15      -p dot -V 256 -D 30 -L 1 -H 2 -E 2 -k 3 -b 2 -t 23"
  "syn_tx_d14       -p transformer -V 256 -D 28 -L 1 -H 2 -b 2 -t 17"
  "syn_mac_d14      -p mac -M 3 -C 10 -V 256 -D 28 -L 1 -H 2 -E 2 -k 5 -b 2 -t 27"
  "syn_titans_d48w  -p titans -V 256 -D 96 -L 1 -H 2 -E 4 -k 16 -b 2 -t 40"
  "syn_titans_d48   -p titans -V 300 -D 96 -L 3 -H 2 -E 2 -k 7 -b 3 -t 19"
  "syn_ttt_d96      -p ttt_mlp -V 256 -D 96 -L 1 -H 1 -E 3 -k 5 -b 2 -t 23"
  "syn_moneta_cw    -p moneta -R 4 -V 256 -D 128 -L 2 -H 2 -E 2 -k 8 -b 2 -t 27"
  "syn_yaad_cw      -p yaad -R 4 -V 256 -D 128 -L 2 -H 2 -E 2 -k 8 -b 2 -t 27"
  "syn_yaad         -p yaad -V 256 -D 64 -L 2 -H 2 -E 2 -k 6 -b 2 -t 17"
  "syn_memora       -p memora -V 256 -D 128 -L 1 -H 2 -E 2 -k 8 -b 2 -t 21"
  "syn_memora_cw    -p memora -R 3 -V 256 -D 64 -L 1 -H 2 -E 2 -k 5 -b 2 -t 13"
  "syn_moneta       -p moneta -V 256 -D 64 -L 2 -H 1 -E 2 -k 6 -b 2 -t 15"
  "syn_linear_attn  -p linear_attn -V 256 -D 128 -L 2 -H 2 -k 16 -b 2 -t 37"
  "syn_deltanet     -p deltanet -V 256 -D 128 -L 2 -H 2 -b 2 -t 20"
  "syn_gdn_cw       -p gated_deltanet -R 2 -V 256 -D 128 -L 2 -H 2 -b 2 -t 20"
  "syn_gdn_t150     -p gated_deltanet -V 256 -D 128 -L 2 -H 2 -b 2 -t 150"
  "syn_titans_z0    -p titans -Z 0 -X 1 -V 256 -D 128 -L 2 -H 2 -E 4 -k 16 -b 2 -t 40"
  "syn_gdn_anchor   -p gated_deltanet -Z 1 -V 256 -D 128 -L 2 -H 2 -b 2 -t 20"
  "syn_titans_n2048 -p titans -V 512 -D 128 -L 2 -H 2 -E 2 -k 16 -b 4 -t 512"
  "syn_hybrid_asm   -p titans-H -P ASM -W 9 -V 256 -D 128 -L 3 -H 2 -E 2 -k 8 -b 2 -t 29"
  "syn_transformer  -p transformer -V 256 -D 192 -L 2 -H 2 -b 2 -t 70"
  "syn_lattice_d64  -p lattice -V 256 -D 128 -L 2 -H 2 -b 2 -t 40 -w 16"
  "syn_lattice_enc  -p lattice_enc -B 1 -V 256 -D 128 -L 1 -H 2 -b 2 -t 29 -w 8"
  "syn_mal          -p mal -M 3 -W 7 -V 256 -D 128 -L 2 -H 2 -E 2 -k 8 -b 2 -t 29"
  "syn_mag          -p mag -M 5 -W 6 -V 256 -D 128 -L 2 -H 2 -E 2 -k 8 -b 3 -t 26"
  "syn_mac          -p mac -M 3 -C 8 -V 256 -D 128 -L 2 -H 2 -E 2 -k 8 -b 2 -t 27"
  "syn_mac_dn       -p mac -Q deltanet -M 2 -C 3 -V 256 -D 128 -L 1 -H 2 -t 14"
  "syn_omega_mom    -p titans -G 5 -V 256 -D 128 -L 2 -H 2 -E 2 -k 6 -b 2 -t 27"
  "syn_omega_yaad   -p yaad -G 8 -V 256 -D 128 -L 2 -H 2 -E 2 -k 4 -b 2 -t 23"
  "syn_omega_dn     -p deltanet -G 3 -V 256 -D 128 -L 1 -H 2 -b 2 -t 17"
  "syn_omeganet     -p omeganet -V 256 -D 64 -L 2 -H 2 -E 2 -k 6 -b 2 -t 23"
  "syn_poly_dn      -p deltanet -I 1 -G 2 -V 256 -D 128 -L 1 -H 2 -b 2 -t 9"
  "syn_atlas        -p atlas -G 3 -V 256 -D 64 -L 1 -H 2 -E 2 -k 4 -b 1 -t 10"
  "syn_atlas_pp     -p atlas_pp -G 2 -V 256 -D 64 -L 1 -H 2 -E 2 -k 3 -b 1 -t 8"
  "syn_atlas_chunk  -p atlas_chunk -V 256 -D 64 -L 2 -H 2 -E 2 -k 5 -b 2 -t 23"
  "syn_gated_mom    -p titans -T 1 -V 256 -D 128 -L 2 -H 2 -E 4 -k 16 -b 2 -t 40"
  "syn_gated_gd     -p omeganet -T 1 -V 256 -D 64 -L 2 -H 2 -E 2 -k 6 -b 2 -t 23"
  "syn_gated_cw     -p titans -T 1 -R 3 -V 256 -D 128 -L 2 -H 2 -E 2 -k 8 -b 2 -t 27"
  "syn_gated_yaad   -p yaad -T 1 -R 4 -V 256 -D 128 -L 1 -H 2 -E 2 -k 6 -b 2 -t 21"
  "syn_split        -p titans -T 1 -V 256 -D 64 -L 1 -H 2 -E 2 -k 4 -b 2 -t 17"
  "syn_split_omega  -p titans -G 6 -V 256 -D 64 -L 1 -H 2 -E 2 -k 4 -b 2 -t 17"
  "syn_dt           -p deep_transformer -V 256 -D 128 -L 2 -H 2 -E 2 -k 8 -b 2 -t 29"
  "syn_dot          -p dot -V 256 -D 128 -L 1 -H 2 -E 2 -k 3 -b 2 -t 23"
  "syn_phi_gdn      -p gated_deltanet -I 2 -G 3 -V 256 -D 128 -L 2 -H 2 -k 4 -b 2 -t 19"
  "syn_phi_softmax  -p linear_attn -I 2 -V 256 -D 128 -L 1 -H 2 -k 5 -b 2 -t 21"
  "syn_dot_t150     -p dot -V 256 -D 64 -L 1 -H 2 -E 2 -k 4 -b 1 -t 150"
)
# SWEEP=1: also test_miras's option sweep (its pairwise set of -U -T -R -G -I -Z / -Y -B on every memory preset,
# 200 inputs, `test_miras --sweep-list`, chunks of 3 and 1) at one small shape, CPU against GPU like the inputs above
if [ "${SWEEP:-0}" = 1 ]; then
    while read -r name flags; do synth+=("$name -V 256 -D 64 -L 1 -H 2 -E 2 -b 2 -t 17 $flags"); done < <(./test_miras --sweep-list)
fi
inputs=()
for f in dev/fixtures/*.bin; do inputs+=("$f"); done
if [ "$SYNTH" = 1 ]; then
    for s in "${synth[@]}"; do
        set -- $s; name=$1; shift
        echo "$name" | grep -Eq -- "$ONLY" || continue
        if "$GPU" --make-input "$out/$name.bin" "$@" -y 7 >/dev/null 2>"$out/$name.err"; then inputs+=("$out/$name.bin")
        else echo "FAIL - $name: --make-input failed: $(head -n 1 "$out/$name.err")"; fail=$((fail + 1)); fi
    done
fi

# one input's checks; its lines go to $out/log_NAME.txt and its counts ("passed failed") to $out/cnt_NAME.txt, so
# that JOBS inputs can run at once (the emulator is one thread per process; on a GPU, processes share the card)
# One variant of the GPU trainer on check()'s input (its $f, $name, $pass, $fail): the dump with the environment
# settings "$@" (and -f 2 when $4 says so) against the CPU's (3 checks: fp32's, or bf16's with -f 2); the run must
# print a line matching $3, else it did not take the variant and the checks would be vacuous (3 failures).
# $1: the label in the check lines, $2: the dump's file tag
variant() {
    local label=$1 tag=$2 says=$3 fl=$4 res last; shift 4
    if ! env "$@" "$GPU" $fl -J "$f" -O "$out/gpu_${tag}_$name.bin" >"$out/gpu_${tag}_$name.out" 2>"$out/gpu_${tag}_$name.err"; then
        echo "FAIL - $name: $*${fl:+ $fl}: $GPU -J failed: $(head -n 1 "$out/gpu_${tag}_$name.err")"; fail=$((fail + 3)); return
    fi
    if ! grep -q "$says" "$out/gpu_${tag}_$name.out"; then   # (not vacuous)
        echo "FAIL - $name: $*${fl:+ $fl} did not take the $label variant (no line /$says/)"; fail=$((fail + 3)); return
    fi
    if [ -z "$fl" ]; then res=$(./test_miras --compare "$name ($label)" "$out/cpu_$name.bin" "$out/gpu_${tag}_$name.bin" "$f" 2>&1)
    else res=$(./test_miras --compare-bf16 "$name ($label)" "$f" "$out/cpu_$name.bin" "$out/gpu_${tag}_$name.bin" 2>&1); fi
    printf '%s\n' "$res" | grep -E '^(ok|FAIL)|^    .* FAIL$'
    last=$(printf '%s\n' "$res" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$last" ]; then echo "FAIL - $name: test_miras ($label) printed no summary"; fail=$((fail + 1))
    else pass=$((pass + $(echo "$last" | awk '{print $1}'))); fail=$((fail + $(echo "$last" | awk '{print $3}'))); fi
}
check() {
    local f=$1 name res last pass=0 fail=0
    name=$(basename "$f" .bin)
    echo "=== $name"
    if ! ./train_miras -J "$f" -O "$out/cpu_$name.bin" 2>"$out/cpu_$name.err"; then
        echo "FAIL - $name: train_miras -J failed: $(head -n 1 "$out/cpu_$name.err")"; echo "0 1" >"$out/cnt_$name.txt"; return
    fi
    if ! "$GPU" -J "$f" -O "$out/gpu_$name.bin" 2>"$out/gpu_$name.err"; then
        echo "FAIL - $name: $GPU -J failed: $(head -n 1 "$out/gpu_$name.err")"; echo "0 3" >"$out/cnt_$name.txt"; return
    fi
    res=$(./test_miras --compare "$name" "$out/cpu_$name.bin" "$out/gpu_$name.bin" "$f" 2>&1)   # ($f: the per-tensor layout)
    # a failure is judged again against each tensor's float noise on this input: the fp64 CPU's dump as the 6th
    # argument may raise a tensor's tolerance (test_miras --compare; only ever upwards, so passing inputs skip it)
    if printf '%s\n' "$res" | grep -q '^FAIL' && [ -x ./train_miras_fp64 ] &&
        ./train_miras_fp64 -J "$f" -O "$out/cpu64_$name.bin" 2>/dev/null; then
        res=$(./test_miras --compare "$name" "$out/cpu_$name.bin" "$out/gpu_$name.bin" "$f" "$out/cpu64_$name.bin" 2>&1)
    fi
    printf '%s\n' "$res" | grep -E '^(ok|FAIL)|^    .* FAIL$'    # the check lines and the failing rows of the tensor tables
    last=$(printf '%s\n' "$res" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$last" ]; then echo "FAIL - $name: test_miras --compare printed no summary"; fail=$((fail + 1))
    else pass=$((pass + $(echo "$last" | awk '{print $1}'))); fail=$((fail + $(echo "$last" | awk '{print $3}'))); fi
    if "$GPU" --decode-test "$f" >"$out/dec_$name.txt" 2>&1; then pass=$((pass + 1))
    else
        fail=$((fail + 1))
        grep -q '^FAIL' "$out/dec_$name.txt" || echo "FAIL - $name: --decode-test failed: $(tail -n 1 "$out/dec_$name.txt")"
    fi
    grep -E '^(ok|FAIL)|error' "$out/dec_$name.txt" | sed -E "s#^(ok|FAIL) - $f#\1 - $name#"
    if echo "$name" | grep -Eq -- "$DECCHUNK"; then
        if ! grep -q '(the recurrent step)' "$out/dec_$name.txt"; then
            echo "FAIL - $name: the decoder did not take the recurrent step"; fail=$((fail + 1))
        elif MIRAS_DECODE_CHUNK=1 "$GPU" --decode-test "$f" >"$out/decc_$name.txt" 2>&1 &&
            ! grep -q '(the recurrent step)' "$out/decc_$name.txt"; then
            pass=$((pass + 1)); echo "ok - $name: MIRAS_DECODE_CHUNK=1 (the partial chunk re-run per token): $(grep -o 'worst err .*' "$out/decc_$name.txt")"
        else fail=$((fail + 1)); echo "FAIL - $name: MIRAS_DECODE_CHUNK=1: $(tail -n 1 "$out/decc_$name.txt")"; fi
    fi
    if echo "$name" | grep -Eq -- "$CKPT"; then   # fewer stored memory states: the same dump, byte for byte
        for e in $CKPT_ENVS; do
            if ! env "$e" "$GPU" -J "$f" -O "$out/gpu_ck_$name.bin" >"$out/gpu_ck_$name.out" 2>"$out/gpu_ck_$name.err"; then
                echo "FAIL - $name: $e: $GPU -J failed: $(head -n 1 "$out/gpu_ck_$name.err")"; fail=$((fail + 1))
            elif ! grep -q '^memory states: one chunk-start state in' "$out/gpu_ck_$name.out"; then   # (not vacuous)
                echo "FAIL - $name: $e kept every chunk-start state: nothing was recomputed"; fail=$((fail + 1))
            elif cmp -s "$out/gpu_$name.bin" "$out/gpu_ck_$name.bin"; then
                echo "ok - $name: $e ($(grep -m1 -o 'one chunk-start state in [0-9]*' "$out/gpu_ck_$name.out") kept, the rest" \
                    "recomputed in the backward) gives the same dump, byte for byte"
                pass=$((pass + 1))
            else
                echo "FAIL - $name: $e changes the dump"; fail=$((fail + 1))
            fi
        done
    fi
    if echo "$name" | grep -Eq -- "$WY"; then   # the WY chunk kernels: split, split with T (3 checks each), split in bf16 (3)
        for run in "1 fp32" "3 fp32" "1 bf16"; do
            read -r wy prec <<<"$run"; fl=""; [ "$prec" = bf16 ] && fl="-f 2"
            [ -n "$fl" ] && { echo "$name" | grep -Eq -- "$BF16" || continue; }
            variant "WY $wy" wy "^memory: the b = 1 delta rule in WY chunks.*MIRAS_MEM_WY=$wy" "$fl" MIRAS_MEM_WY=$wy
        done
    fi
    if echo "$name" | grep -Eq -- "$PAR"; then   # the reads apart from the chain (3 checks; bf16 3 more where BF16 matches)
        for fl in "" "-f 2"; do
            [ -n "$fl" ] && { echo "$name" | grep -Eq -- "$BF16" && ! echo "$name" | grep -Eq -- "$NOBF16" || continue; }
            variant "reads apart" par "^memory: the reads of every chunk apart from the chain" "$fl" MIRAS_MEM_PAR=1
        done
        if echo "$name" | grep -Eq -- "$PARFW"; then
            variant "reads apart, forward recomputed" parfw "^memory: the backward chain recomputes" "" MIRAS_MEM_PAR=1 \
                MIRAS_MEM_PAR_FW=0
        fi
    fi
    if echo "$name" | grep -Eq -- "$STATE"; then   # the state copy in every chain (3 checks)
        variant "state copy" state "^memory: the .* chain's chunk-start state in shared memory" "" MIRAS_MEM_STATE=3
    fi
    if echo "$name" | grep -Eq -- "$BF16" && ! echo "$name" | grep -Eq -- "$NOBF16"; then
        if ! "$GPU" -f 2 -J "$f" -O "$out/gpu_bf16_$name.bin" 2>"$out/gpu_bf16_$name.err"; then
            echo "FAIL - $name: $GPU -f 2 -J failed: $(head -n 1 "$out/gpu_bf16_$name.err")"; fail=$((fail + 3))
        else
            res=$(./test_miras --compare-bf16 "$name" "$f" "$out/cpu_$name.bin" "$out/gpu_bf16_$name.bin" 2>&1)
            printf '%s\n' "$res" | grep -E '^(ok|FAIL)'
            last=$(printf '%s\n' "$res" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
            if [ -z "$last" ]; then echo "FAIL - $name: test_miras --compare-bf16 printed no summary"; fail=$((fail + 1))
            else pass=$((pass + $(echo "$last" | awk '{print $1}'))); fail=$((fail + $(echo "$last" | awk '{print $3}'))); fi
        fi
    fi
    echo "$pass $fail" >"$out/cnt_$name.txt"
}
names=()
running=0
for f in "${inputs[@]}"; do
    name=$(basename "$f" .bin)
    echo "$name" | grep -Eq -- "$ONLY" || continue
    names+=("$name"); rm -f "$out/cnt_$name.txt"
    check "$f" >"$out/log_$name.txt" 2>&1 &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait
for name in "${names[@]}"; do   # in input order, whatever order they finished in
    cat "$out/log_$name.txt"
    if [ -f "$out/cnt_$name.txt" ]; then read -r p f <"$out/cnt_$name.txt"; pass=$((pass + p)); fail=$((fail + f))
    else echo "FAIL - $name: its checks ended without a count"; fail=$((fail + 1)); fi
done
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
