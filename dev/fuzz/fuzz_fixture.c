// fuzz target: a fixture-layout file (dev/fixtures/*.bin; the input of dump mode -J) through dump_input_read
// (fixture_check: header, config, batch, sizes; then params and tokens), then one forward and backward of its
// batch (tokens outside the vocab must end in an error, not an out-of-bounds read).
#include "fuzz_miras.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char path[512];
    fuzz_init(); fuzz_path(path, sizeof path, "fixture.bin");
    fuzz_write(path, data, size);
    if (FUZZ_TRY) {
        int h[256]; Config cfg; Model M; int *inp, *tgt;
        dump_input_read(path, &M, &cfg, h, &inp, &tgt);
        model_forward(&M, inp, tgt, h[100], h[101]); model_zero_grad(&M); model_backward(&M, 1);
        free(inp); free(tgt); model_free(&M);
    }
    FUZZ_DONE();
    return 0;
}
