# train_miras: CPU trainer, tests, data tools; the GPU trainer when nvcc is there.
# make            the CPU trainer and the data tools (OMP=0 builds without OpenMP); make test builds the test drivers
# make train      make the default corpus from this repo's own sources and train the default model
# make test       all tests; the last line says "N passed, N failed, N skipped"
# make test_asan  the same tests with every binary built with -fsanitize=address,undefined (build/asan)
# make fuzz       each libFuzzer target of dev/fuzz for FUZZ_SECONDS (default 60); needs clang
# make format     lay out train_miras.c, train_miras.cu, test_miras.c with clang-format 14 (dev/clang-format.yml)
# make ci         what .ci/run runs: the tests, the ASan tests and a 10 s fuzz smoke run, summed in one line
# make train_miras USE_MPI=1      the data-parallel trainer (mpicc, Debian: libopenmpi-dev openmpi-bin): mpirun -np N ./train_miras ...
# make train_miras_cu USE_MPI=1   the GPU trainer with NCCL (gradients summed by ncclAllReduce; MPI launches the ranks)
# CC defaults to gcc (make's own default, cc, is an origin-"default" value that `CC ?= gcc` would not replace);
# `make CC=clang` or CC=clang in the environment still wins
ifeq ($(origin CC),default)
  CC = gcc
endif
OMP ?= 1
CFLAGS ?= -O3 -march=native -fopenmp-simd -Wall -Wno-unused-function -Wno-format-truncation
ifeq ($(OMP),1)
  CFLAGS += -fopenmp
endif
LDLIBS = -lm
NVCC ?= nvcc
GPU_COMPUTE_CAPABILITY ?= 90
# the device code nvcc makes: SASS for that GPU (and its PTX). CI's compile checks of the kernel lab, the cluster check
# and the NCCL build take PTX alone (NVCC_ARCH="-arch=compute_90 -code=compute_90"): no ptxas, ~2 minutes of one core less each
NVCC_ARCH ?= -arch=sm_$(GPU_COMPUTE_CAPABILITY)
# Data parallel (README "Data parallel"): USE_MPI=1 builds train_miras with mpicc and -DUSE_MPI. The value is kept
# in build/use_mpi (rewritten only when it changes), so switching USE_MPI rebuilds the trainers.
USE_MPI ?= 0
MPICC ?= mpicc
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && echo 1)
_use_mpi := $(shell mkdir -p build && [ "$$(cat build/use_mpi 2>/dev/null)" = "$(USE_MPI)" ] || echo $(USE_MPI) > build/use_mpi)
ifeq ($(USE_MPI),1)
  TRAIN_CC = $(MPICC)
  TRAIN_DEFS = -DUSE_MPI
  NVCC_MPI = -DUSE_MPI $(shell $(MPICC) --showme:compile 2>/dev/null) $(shell $(MPICC) --showme:link 2>/dev/null | sed 's/-Wl,[^ ]*//g') -lnccl
else
  TRAIN_CC = $(CC)
endif

.PHONY: all test test_asan asan_build fuzz fuzz_build ci ci_build test_emu_lab test_gpu_emu train data clean format
all: train_miras data_prep  # (test_miras and test_miras_fp64 compile ~20 s each: built by make test / make ci)

train_miras: train_miras.c build/use_mpi
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_DEFS) -o $@ $< $(LDLIBS)
# the same trainer in double: make test diffs it against the float one at long T (dev/test_precision.sh)
train_miras_fp64: train_miras.c
	$(CC) $(CFLAGS) -DMIRAS_DOUBLE -o $@ $< $(LDLIBS)
# the MPI trainer that make test runs under mpirun (built when mpicc and mpirun are there; else those tests skip)
train_miras_mpi: train_miras.c
	$(MPICC) $(CFLAGS) -DUSE_MPI -o $@ $< $(LDLIBS)

# the test driver includes train_miras.c; the fp64 build also runs the finite-difference checks
test_miras: test_miras.c train_miras.c
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)
test_miras_fp64: test_miras.c train_miras.c
	$(CC) $(CFLAGS) -DMIRAS_DOUBLE -o $@ $< $(LDLIBS)

-include data_prep/data_prep.mk

test: train_miras train_miras_fp64 test_miras test_miras_fp64 data_prep $(if $(HAVE_MPI),train_miras_mpi)
	@bash dev/test_all.sh

# the default corpus: this repository's own text, byte-level (no download); the val split is its first 10%
CORPUS_FILES = $(wildcard train_miras.c test_miras.c README.md Makefile dev/*.py data_prep/*.c data_prep/*.h)
build/data/repo_tokenizer.bin: $(CORPUS_FILES) data_prep
	@mkdir -p build/data
	data_prep/text2shards -t byte -v 0.1 -o build/data/repo $(CORPUS_FILES)
data: build/data/repo_tokenizer.bin

# the quick start: a small titans model, a few minutes on 2 cores
train: train_miras data
	./train_miras -p titans -x 400 -v 50 -o build/run

# the GPU trainer (train_miras.cu includes train_miras.c for the host side: config, files, the CPU model)
train_miras_cu: train_miras.cu train_miras.c build/use_mpi
	$(NVCC) -O3 $(NVCC_ARCH) -Xcompiler -fopenmp $(NVCC_MPI) -o $@ $< -lcublas
# CPU vs GPU on every fixture (dump mode), and decode vs parallel on the GPU; needs a GPU
test_gpu: train_miras train_miras_fp64 train_miras_cu test_miras
	@bash dev/test_gpu.sh
# the same checks without a GPU: train_miras.cu run thread by thread in a CPU emulator of CUDA (slow; see dev/cuda)
test_gpu_emu: train_miras train_miras_fp64 test_miras
	@bash dev/cuda/emu_build.sh && GPU_BIN=build/emu/train_miras_emu SYNTH=0 bash dev/test_gpu.sh
# the memory kernels' SIMT, TF32 and 3xTF32 tensor-core products against the CPU on the emulator (part of make ci)
test_emu_lab:
	@bash dev/cuda/test_emu_lab.sh

# ---- sanitizers and fuzzing (README "Tests": "Sanitizers", "Fuzzing")
ASAN_CC ?= $(CC)
ASAN_CFLAGS = -O2 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Wall -Wno-unused-function -Wno-format-truncation -fopenmp
build/asan/train_miras: train_miras.c
	@mkdir -p build/asan
	$(ASAN_CC) $(ASAN_CFLAGS) -o $@ $< $(LDLIBS)
build/asan/test_miras: test_miras.c train_miras.c
	@mkdir -p build/asan
	$(ASAN_CC) $(ASAN_CFLAGS) -o $@ $< $(LDLIBS)
build/asan/test_miras_fp64: test_miras.c train_miras.c
	@mkdir -p build/asan
	$(ASAN_CC) $(ASAN_CFLAGS) -DMIRAS_DOUBLE -o $@ $< $(LDLIBS)
build/asan/data_prep/%: data_prep/%.c data_prep/common.h data_prep/gpt2_bpe.h
	@mkdir -p build/asan/data_prep
	$(ASAN_CC) $(ASAN_CFLAGS) -o $@ $<
ASAN_BINS = build/asan/train_miras build/asan/test_miras build/asan/test_miras_fp64 $(DATA_PREP_BINS:data_prep/%=build/asan/data_prep/%)
asan_build: $(ASAN_BINS)  # (the ASan binaries alone: .ci/run builds them beside the nvcc builds)
test_asan: $(ASAN_BINS)
	@MIRAS_BIN_DIR=build/asan bash dev/test_all.sh

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = shard mask tokenizer checkpoint fixture shard2text gpt2
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wall -Wno-unused-function -Wno-unknown-pragmas
build/fuzz/fuzz_shard2text: dev/fuzz/fuzz_shard2text.c dev/fuzz/fuzz.h data_prep/shard2text.c data_prep/common.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< -lm
build/fuzz/fuzz_gpt2: dev/fuzz/fuzz_gpt2.c dev/fuzz/fuzz.h dev/fuzz/gpt2_valid.h data_prep/text2shards.c data_prep/common.h data_prep/gpt2_bpe.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< -lm
build/fuzz/fuzz_%: dev/fuzz/fuzz_%.c dev/fuzz/fuzz.h dev/fuzz/fuzz_miras.h train_miras.c
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< -lm
build/fuzz/make_seeds: dev/fuzz/make_seeds.c dev/fuzz/gpt2_valid.h train_miras.c
	@mkdir -p build/fuzz
	$(CC) -O1 -Wall -Wno-unused-function -Wno-unknown-pragmas -o $@ $< -lm
fuzz_build: $(FUZZ_TARGETS:%=build/fuzz/fuzz_%) build/fuzz/make_seeds
fuzz: fuzz_build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash dev/fuzz/run.sh

# CI: the tests, the ASan tests and a short fuzz run, summed into one last line
ci_build: train_miras train_miras_fp64 test_miras test_miras_fp64 data_prep $(ASAN_BINS) fuzz_build $(if $(HAVE_MPI),train_miras_mpi)
ci: ci_build
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-10} bash dev/test_all.sh ./test_miras ./test_miras_fp64 "bash data_prep/test_data_prep.sh" \
		"bash dev/test_mpi.sh" "bash dev/check_format.sh" "bash dev/test_precision.sh" \
		"env MIRAS_BIN_DIR=build/asan bash dev/test_all.sh" "bash dev/fuzz/run.sh" "bash dev/cuda/test_emu_lab.sh" \
		"bash dev/cuda/test_emu_gpu.sh" "bash dev/cuda/test_emu_nccl.sh"

# one statement per line, lines up to 120 characters; make test checks it (dev/check_format.sh)
CLANG_FORMAT ?= $(shell command -v clang-format-14 || command -v clang-format)
format:
	$(CLANG_FORMAT) --style=file:dev/clang-format.yml -i train_miras.c train_miras.cu test_miras.c

clean:
	rm -rf train_miras train_miras_fp64 train_miras_mpi test_miras test_miras_fp64 train_miras_cu memlab memlab_phase $(DATA_PREP_BINS) build

# the kernel lab of the memory (dev/cuda/memlab.cu): every version of the memory kernels, checked against the CPU and timed
memlab: dev/cuda/memlab.cu dev/cuda/memlab_v1.cuh train_miras.cu train_miras.c
	$(NVCC) -O3 $(NVCC_ARCH) -Xcompiler -fopenmp -o $@ $< -lcublas
# memlab with the barrier clock (-P 1: cycles between __syncthreads by source line; train_miras.cu's MEM_PHASE_TIMING)
memlab_phase: dev/cuda/memlab.cu dev/cuda/memlab_v1.cuh train_miras.cu train_miras.c
	$(NVCC) -O3 $(NVCC_ARCH) -DMEM_PHASE_TIMING -Xcompiler -fopenmp -o $@ $< -lcublas
# thread block clusters on the GPU against the emulator's model of them (dev/cuda/cluster_check.cu; sm_90)
build/cluster_check: dev/cuda/cluster_check.cu
	@mkdir -p build
	$(NVCC) -O2 $(NVCC_ARCH) -o $@ $<
