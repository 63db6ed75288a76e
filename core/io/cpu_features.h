// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What this processor can run beyond the x86-64 baseline the project is built for. Code using more is compiled per
// function (`__attribute__((target(…)))`) and chosen at run time by these answers, never by build flags.

namespace tessera {

/// AVX and F16C, with the YMM registers saved by the operating system (false off x86-64).
bool hasF16c();

/// AVX2 and F16C, with the YMM registers saved by the operating system (false off x86-64).
bool hasAvx2();

} // namespace tessera
