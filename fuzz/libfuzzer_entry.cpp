// SPDX-License-Identifier: GPL-3.0-or-later
// The libFuzzer entry point of one target. fuzz/CMakeLists.txt compiles this file once per target with
// TESSERA_FUZZ_BODY naming the body (fuzzUnpickler, …), so the bodies themselves stay plain functions that the
// normal build links into the regression replay test.

#include "fuzz_targets.h"

#ifndef TESSERA_FUZZ_BODY
#error "TESSERA_FUZZ_BODY must name the target's body"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    return tessera::fuzz::TESSERA_FUZZ_BODY(data, size);
}
