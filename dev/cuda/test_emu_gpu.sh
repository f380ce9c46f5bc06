#!/usr/bin/env bash
# A subset of `make test_gpu` on the CUDA emulator (no GPU): train_miras.cu built for dev/cuda/emu, then
# dev/test_gpu.sh on the fixtures of the layers written after the H100 run of 2026-11-23 (they have passed on an H200
# since, 2026-11-28; here they keep CI's check of train_miras.cu on machines without a GPU) (the Titans layers MAL, MAG, MAC,
# and attention, whose bf16 mode is also new; the ATLAS family's omega window, poly features, muon and the phi*
# memory; the gated memory with gd, momentum and chunk-level muon): dumps against the CPU, GPU decoding against the
# GPU forward, and bf16 for transformer, mag, omeganet and gated_mom; the checkpointed memory states (one kept in 2,
# and as few as an emulated device with no free memory makes the trainer keep) giving the same dumps for omega_mom,
# omeganet and gated_mom. Part of `make ci` (a few minutes); the
# last line is "N passed, N failed". (Not mag_atlas_pp and mal_atlas: their token-level muon made each a third of this
# script's time, 272 s and 199 s of one core on the 2-core machine; MAG's and MAL's streams, the gated memory, poly and
# muon each have their inputs here, and `make test_gpu_emu` and `make test_gpu` check every fixture, those included.)
set -u
cd "$(dirname "$0")/../.."
for t in g++ python3; do
    command -v $t >/dev/null || { echo "# 166 check(s) skipped: no $t (the emulator build needs g++ and python3)"; echo "0 passed, 0 failed"; exit 0; }
done
if ! bash dev/cuda/emu_build.sh >build/emu_build.log 2>&1; then
    echo "not ok - the emulator build of train_miras.cu failed: $(tail -n 3 build/emu_build.log)"; echo "0 passed, 1 failed"; exit 1
fi
GPU_BIN=build/emu/train_miras_emu SYNTH=0 JOBS=${JOBS:-$(nproc)} \
    ONLY='^(mal|mag|mag_gdn|mac|mac_moneta|mac_memora_cw|mac_yaad_cw|mac_muon_gated|mac_muonc|mac_omeganet|mac_omega_lin|mac_lattice|mac_dot|mac_dot_lin|mal_omeganet|mal_lattice|mag_lattice_sim|mal_dot|mag_dt|transformer|omega_gd|omega_mom|omega_linear|poly_linear|poly_mom|omeganet|muon_linear|muonc_linear|gated_gd|gated_mom|gated_chunk|deep_transformer|dot|dot_linear|dot_bound|dt_bound)$' \
    BF16='^(transformer|mag|omeganet|gated_mom)$' CKPT='^(omega_mom|omeganet|gated_mom)$' CKPT_ENVS="MIRAS_MEM_CKPT=2 EMU_MEM_FREE=1" \
    bash dev/test_gpu.sh
