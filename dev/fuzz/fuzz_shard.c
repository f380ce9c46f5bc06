// fuzz target: a token shard (llm.c header + uint16 tokens) through the trainer's data loader
// (shard_check, dataloader_init, dataloader_next: four batches of B=2, T=3, so it wraps around a short shard).
#include "fuzz_miras.h"

static DataLoader dl;   // static: it must survive the longjmp to be released
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char path[512], pattern[512];
    fuzz_init(); fuzz_path(path, sizeof path, "s_train_000000.bin"); fuzz_path(pattern, sizeof pattern, "s_train_*.bin");
    fuzz_write(path, data, size);
    memset(&dl, 0, sizeof dl);
    if (FUZZ_TRY) {
        dataloader_init(&dl, pattern, 2, 3);
        for (int i = 0; i < 4; i++) {
            dataloader_next(&dl);
            for (int n = 0; n < 6; n++) if (dl.inputs[n] < 0 || dl.inputs[n] > 65535 || dl.targets[n] < 0 || dl.targets[n] > 65535) abort();
        }
        dataloader_free(&dl); memset(&dl, 0, sizeof dl);
    }
    if (dl.g.gl_pathv) globfree(&dl.g);   // glob's own memory is not in the shim's list
    FUZZ_DONE();
    return 0;
}
