// dev/fuzz/fuzz_miras.h: the trainer's parsers under the fuzz scaffolding (fuzz.h): train_miras.c compiled with
// TESTING (no main), its die() routed through fuzz_die, which checks `error: ... (hint: ...)` and longjmps back.
#ifndef MIRAS_FUZZ_MIRAS_H
#define MIRAS_FUZZ_MIRAS_H
#include "fuzz.h"
#define TESTING
#include "../../train_miras.c"

static void fuzz_die(const char* msg, const char* hint) {
    fuzz_check_line("message", msg); fuzz_check_line("hint", hint);
    if (!hint) { fprintf(stderr, "fuzz: an error without a hint: %s\n", msg); abort(); }
    if (!fz_armed) { fprintf(stderr, "fuzz: an error outside the parser: %s\n", msg); abort(); }
    longjmp(fz_jmp, 1);
}
static void fuzz_init(void) { fuzz_init_dir(); die_hook = fuzz_die; }
#endif
