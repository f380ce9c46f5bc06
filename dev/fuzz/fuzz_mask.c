// fuzz target: an answer mask file (X.mask beside the shard X.bin) through the trainer's data loader
// (mask_check, then the mask bytes of four batches). The shard beside it is valid and as long as the mask's body
// (at least 16 tokens), so a mask whose header and size agree is accepted.
#include "fuzz_miras.h"

static DataLoader dl;
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char spath[512], mpath[512], pattern[512];
    fuzz_init(); fuzz_path(spath, sizeof spath, "m_train_000000.bin"); fuzz_path(mpath, sizeof mpath, "m_train_000000.mask");
    fuzz_path(pattern, sizeof pattern, "m_train_*.bin");
    long ntok = size > 1024 + 16 ? (long)size - 1024 : 16;
    static uint16_t shard[512 + 65536]; if (ntok > 65536) ntok = 65536;
    int32_t* h = (int32_t*)shard; memset(shard, 0, 1024); h[0] = 20240520; h[1] = 1; h[2] = (int32_t)ntok;
    for (long i = 0; i < ntok; i++) shard[512 + i] = (uint16_t)(i % 7);
    fuzz_write(spath, shard, 1024 + 2 * ntok);
    fuzz_write(mpath, data, size);
    memset(&dl, 0, sizeof dl);
    if (FUZZ_TRY) {
        dataloader_init(&dl, pattern, 2, 3);
        for (int i = 0; i < 4; i++) dataloader_next(&dl);
        dataloader_free(&dl); memset(&dl, 0, sizeof dl);
    }
    if (dl.g.gl_pathv) globfree(&dl.g);
    FUZZ_DONE();
    return 0;
}
