// fuzz target: a checkpoint (model header, params, optional training state and AdamW moments) as a run loads it:
// peek_checkpoint (header, config, sizes), model_build, load_checkpoint (with the state when there is one); then
// the loaded model is used: a forward and backward of one short sequence, an AdamW step, three decode steps.
#include "fuzz_miras.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char path[512];
    fuzz_init(); fuzz_path(path, sizeof path, "ckpt.bin");
    fuzz_write(path, data, size);
    if (FUZZ_TRY) {
        Config cfg; int has_state = peek_checkpoint(path, &cfg);
        Model M; model_build(&M, &cfg);
        TrainState st = {0, 0, 0, 1};
        load_checkpoint(&M, path, has_state ? &st : NULL);
        if (st.step < 0 || st.shard < 0 || st.pos < 0) abort();
        int T = cfg.b + 2 < 9 ? cfg.b + 2 : 9, in[9], tg[9];
        for (int t = 0; t < T; t++) { in[t] = (3 * t) % cfg.V; tg[t] = (3 * t + 1) % cfg.V; }
        model_forward(&M, in, tg, 1, T); model_zero_grad(&M); model_backward(&M, 1);
        grad_clip(&M, grad_norm(&M), 1); model_update(&M, 1e-3, 0.9, 0.95, 1e-8, 0.1);
        Decoder dec; decoder_init(&dec, &M);
        for (int t = 0; t < 3; t++) decoder_step(&dec, in[t]);
        decoder_free(&dec); model_free(&M);
    }
    FUZZ_DONE();
    return 0;
}
