#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver, for programs that keep their own `main`
/// (https://llvm.org/docs/LibFuzzer.html#using-libfuzzer-as-a-library).
/// It is linked only into a `-sanitize=fuzzer` build; `Fuzz/Driver` calls it
/// only when compiled with `-DFUZZING`.
int LLVMFuzzerRunDriver(int *argc, char ***argv,
                        int (*callback)(const uint8_t *data, size_t size));

#endif
