// fuzz target: a tokenizer file (llm.c: uint32 header, then a length byte and the bytes per token) through
// tokenizer_load, then every token printed as the sampler does (to /dev/null).
#include "fuzz_miras.h"

static Tokenizer tk;
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char path[512];
    fuzz_init(); fuzz_path(path, sizeof path, "tokenizer.bin");
    fuzz_write(path, data, size);
    if (FUZZ_TRY) {
        if (tokenizer_load(&tk, path)) {
            for (int id = 0; id <= tk.n + 1; id++) print_token(&tk, id, tk.n);
            tokenizer_free(&tk);
        }
    }
    FUZZ_DONE();
    return 0;
}
