// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tessera {

#if defined(__x86_64__)
namespace {

/// CPUID leaf 1 says AVX (ECX bit 28) and F16C (bit 29), and XGETBV that the OS saves the YMM registers (XCR0
/// bits 1 and 2, with OSXSAVE, bit 27). Asked directly: clang 16's __builtin_cpu_supports knows no "f16c".
bool detectF16c()
{
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return false;
    const bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), f16c = ecx & (1u << 29);
    if (!osxsave || !avx || !f16c)
        return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0x6u) == 0x6u;
}

/// CPUID leaf 7 says AVX2 (EBX bit 5).
bool detectAvx2()
{
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return detectF16c() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & (1u << 5));
}

} // namespace

bool hasF16c()
{
    static const bool yes = detectF16c();
    return yes;
}

bool hasAvx2()
{
    static const bool yes = detectAvx2();
    return yes;
}
#else
bool hasF16c() { return false; }
bool hasAvx2() { return false; }
#endif

} // namespace tessera
