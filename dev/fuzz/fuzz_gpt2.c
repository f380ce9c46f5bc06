// fuzz target: text2shards' GPT-2 files and encoder (data_prep/gpt2_bpe.h: gpt2_load's encoder.json and vocab.bpe
// readers, then gpt2_encode). The first byte of the input picks what it becomes: 0 encoder.json, 1 vocab.bpe (the
// other file a small valid one: the 256 single-byte tokens of GPT-2's alphabet plus "Ġt", "he", "Ġthe" and their
// three merges), 2 the text that the valid pair encodes (pre-tokeniser and BPE on any bytes); each emitted id must
// lie in the vocabulary and the pieces must cover the text in order.
#include "fuzz.h"
#include "gpt2_valid.h"
#define main text2shards_main
#include "../../data_prep/text2shards.c"
#undef main

typedef struct { size_t next; int bad; int vocab; } Cover;
static void check_emit(void* ctx, int id, size_t off) {
    Cover* c = ctx;
    if (id < 0 || id >= c->vocab || off < c->next) c->bad = 1;  // pieces start in order, never before the last
    c->next = off;
}
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char epath[512], mpath[512], enc[8192];
    static size_t ne;
    fuzz_init_dir(); g_die_hook = fuzz_die_line; g_hint = NULL;  // (a die() inside gpt2_load skips its reset)
    fuzz_path(epath, sizeof epath, "encoder.json"); fuzz_path(mpath, sizeof mpath, "vocab.bpe");
    if (!ne) ne = gpt2_valid_encoder(enc, sizeof enc);
    if (size < 1) return 0;
    int role = data[0] % 3; data++; size--;
    fuzz_write(epath, role == 0 ? (const void*)data : enc, role == 0 ? size : ne);
    fuzz_write(mpath, role == 1 ? (const void*)data : GPT2_VALID_MERGES, role == 1 ? size : sizeof GPT2_VALID_MERGES - 1);
    if (FUZZ_TRY) {
        Gpt2Bpe b;
        gpt2_load(&b, fz_dir);
        if (role == 2) {
            Cover c = {0, 0, b.vocab};
            gpt2_encode(&b, data, size, check_emit, &c);
            if (c.bad) { fprintf(stderr, "fuzz: gpt2_encode emitted an id outside the vocabulary or out of order\n"); abort(); }
        }
        gpt2_free(&b);
    }
    FUZZ_DONE();
    return 0;
}
