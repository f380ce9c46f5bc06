// fuzz target: data_prep's own reader (data_prep/shard2text.c: load_tokenizer, open_checked for the shard and
// its mask), run as `shard2text -m TOKENIZER SHARD` (output to /dev/null). The first byte of the input picks the
// file it becomes (0 tokenizer, 1 shard, 2 mask); the other two are small valid files.
#include "fuzz.h"
#define main shard2text_main
#include "../../data_prep/shard2text.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char tpath[512], spath[512], mpath[512];
    fuzz_init_dir(); g_die_hook = fuzz_die_line;
    fuzz_path(tpath, sizeof tpath, "tok.bin"); fuzz_path(spath, sizeof spath, "x.bin"); fuzz_path(mpath, sizeof mpath, "x.mask");
    if (size < 1) return 0;
    int role = data[0] % 3; data++; size--;
    // the valid files: a 4-token tokenizer ("a", "bc", "", "d"), a 12-token shard and its mask
    static uint8_t tok[1024 + 8], shard[1024 + 24], mask[1024 + 12];
    uint32_t* th = (uint32_t*)tok; th[0] = 20240328; th[1] = 2; th[2] = 4; th[3] = 3;
    memcpy(tok + 1024, "\1a\2bc\0\1d", 8);
    int32_t* sh = (int32_t*)shard; sh[0] = 20240520; sh[1] = 1; sh[2] = 12;
    for (int i = 0; i < 12; i++) { shard[1024 + 2 * i] = (uint8_t)(i % 4); mask[1024 + i] = (uint8_t)(i % 3 == 0); }
    int32_t* mh = (int32_t*)mask; mh[0] = 20261110; mh[1] = 1; mh[2] = 12;
    fuzz_write(tpath, role == 0 ? data : tok, role == 0 ? size : sizeof tok);
    fuzz_write(spath, role == 1 ? data : shard, role == 1 ? size : sizeof shard);
    fuzz_write(mpath, role == 2 ? data : mask, role == 2 ? size : sizeof mask);
    if (FUZZ_TRY) {
        char* argv[] = {"shard2text", "-m", tpath, spath, NULL};
        shard2text_main(4, argv);
        char* argv2[] = {"shard2text", "-i", "-s", "3", "-n", "5", tpath, spath, NULL};
        shard2text_main(8, argv2);
    }
    FUZZ_DONE();
    return 0;
}
