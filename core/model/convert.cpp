// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/convert.h"

#include "io/cpu_features.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera {

namespace {

bool isConvertibleFloat(DType t)
{
    return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

std::uint32_t floatBits(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float bitsFloat(std::uint32_t u)
{
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

/// Round-to-nearest-even Float32 → Float16, the result c10::Half and F16C's vcvtps2ph give for every non-NaN.
std::uint16_t f32ToF16(float f)
{
    const std::uint32_t x = floatBits(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t absx = x & 0x7FFFFFFFu;
    if (absx > 0x7F800000u) // NaN: quiet it, keep the sign and the top payload bits as vcvtps2ph does
        return static_cast<std::uint16_t>(sign | 0x7E00u | ((absx >> 13) & 0x3FFu));
    if (absx >= 0x477FF000u) // ≥ 65520, the tie between 65504 (odd mantissa) and 2^16, rounds to infinity
        return static_cast<std::uint16_t>(sign | 0x7C00u);
    if (absx >= 0x38800000u) { // normal in Float16 (≥ 2^-14)
        const std::uint32_t mant = absx & 0x7FFFFFu;
        std::uint32_t h = (((absx >> 23) - 112u) << 10) | (mant >> 13);
        const std::uint32_t rem = mant & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            ++h; // a carry into the exponent is still the right encoding
        return static_cast<std::uint16_t>(sign | h);
    }
    // Subnormal in Float16: count units of 2^-24. value = m·2^(E-23), so units = m·2^(E+1).
    const int exponent = static_cast<int>(absx >> 23) - 127;
    if (exponent < -25)
        return sign;
    const std::uint32_t m = (absx & 0x7FFFFFu) | 0x800000u;
    const int shift = -(exponent + 1); // 14 … 24
    std::uint32_t h = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u)))
        ++h; // may become 0x400, the smallest normal: still correct
    return static_cast<std::uint16_t>(sign | h);
}

float f16ToF32(std::uint16_t h)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exponent = (h >> 10) & 0x1Fu;
    std::uint32_t mant = h & 0x3FFu;
    if (exponent == 0x1F)
        return bitsFloat(sign | 0x7F800000u | (mant << 13));
    if (exponent == 0) {
        if (mant == 0)
            return bitsFloat(sign);
        exponent = 113; // normalise the subnormal: 2^-14 · 0.m
        while (!(mant & 0x400u)) {
            mant <<= 1;
            --exponent;
        }
        return bitsFloat(sign | (exponent << 23) | ((mant & 0x3FFu) << 13));
    }
    return bitsFloat(sign | ((exponent + 112u) << 23) | (mant << 13));
}

/// Round-to-nearest-even Float32 → BFloat16, as c10::BFloat16's round_to_nearest_even.
std::uint16_t f32ToBf16(float f)
{
    const std::uint32_t x = floatBits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return static_cast<std::uint16_t>((x >> 16) | 0x0040u); // quiet NaN, sign and top payload kept
    return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

float bf16ToF32(std::uint16_t b) { return bitsFloat(static_cast<std::uint32_t>(b) << 16); }

#if defined(__x86_64__)
/// Float32 → Float16 with the F16C instruction, eight at a time: vcvtps2ph with round-to-nearest-even gives
/// exactly f32ToF16() for every one of the 2^32 float bit patterns, NaNs included (checked exhaustively), at
/// several times the speed. Used only when the processor has it.
__attribute__((target("avx,f16c"))) void floatsToF16Hardware(const float* in, unsigned char* out, std::uint64_t count)
{
    std::uint64_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * 2),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < count; ++i) {
        const std::uint16_t h = f32ToF16(in[i]);
        std::memcpy(out + i * 2, &h, 2);
    }
}
#endif

// Element access through memcpy: mapped checkpoint data need not be aligned to the element size.
template <typename T>
T load(const unsigned char* p, std::uint64_t i)
{
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    return v;
}

template <typename T>
void store(unsigned char* p, std::uint64_t i, T v)
{
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

/// Calls `fn` with a loader reading element i of a `t` buffer as float. Float64 rounds to Float32 here, which is
/// also what torch does on its way to the 16-bit types; a Float64 destination never reads Float64 (same-type
/// copies are memcpy), and widening the others to double is exact. Dispatching once per buffer keeps the
/// per-element loops free of type switches.
template <typename Fn>
void withFloatLoader(DType t, Fn&& fn)
{
    switch (t) {
    case DType::Float16:
        fn([](const unsigned char* p, std::uint64_t i) { return f16ToF32(load<std::uint16_t>(p, i)); });
        break;
    case DType::BFloat16:
        fn([](const unsigned char* p, std::uint64_t i) { return bf16ToF32(load<std::uint16_t>(p, i)); });
        break;
    case DType::Float32:
        fn([](const unsigned char* p, std::uint64_t i) { return load<float>(p, i); });
        break;
    default:
        fn([](const unsigned char* p, std::uint64_t i) { return static_cast<float>(load<double>(p, i)); });
        break;
    }
}

template <typename Fn>
void forEach(std::uint64_t count, Fn&& fn)
{
    for (std::uint64_t i = 0; i < count; ++i)
        fn(i);
}

Status checkArgs(const void* src, DType srcType, const void* dst, std::uint64_t count, const char* what)
{
    const std::size_t size = dtypeSize(srcType);
    if (size == 0)
        return makeError(std::string(what) + ": the source dtype " + std::string(torchName(srcType))
                         + " has no known element size");
    if (count > std::numeric_limits<std::uint64_t>::max() / 8)
        return makeError(std::string(what) + ": element count " + std::to_string(count) + " is too large");
    if (count > 0 && (!src || !dst))
        return makeError(std::string(what) + ": null buffer for " + std::to_string(count) + " elements");
    return Status::success();
}

} // namespace

bool canConvert(DType from, DType to)
{
    if (from == to)
        return dtypeSize(from) > 0;
    return isConvertibleFloat(from) && isConvertibleFloat(to);
}

DType convertedDtype(DType source, std::optional<DType> requested)
{
    if (requested && isFloatingPoint(source) && dtypeSize(source) >= 2 && canConvert(source, *requested))
        return *requested;
    return source;
}

std::optional<DType> narrowerComparisonDtype(DType a, DType b)
{
    const bool floating = isFloatingPoint(a) && isFloatingPoint(b) && dtypeSize(a) >= 2 && dtypeSize(b) >= 2;
    if (!floating || dtypeSize(a) == dtypeSize(b) || !canConvert(a, b) || !canConvert(b, a))
        return std::nullopt;
    return dtypeSize(a) < dtypeSize(b) ? a : b;
}

Status convertElements(const void* src, DType srcType, void* dst, DType dstType, std::uint64_t count)
{
    TESSERA_TRY(checkArgs(src, srcType, dst, count, "convert"));
    if (!canConvert(srcType, dstType))
        return makeError("cannot convert " + std::string(torchName(srcType)) + " to " + std::string(torchName(dstType))
                         + ": only float16, bfloat16, float32 and float64 convert into one another; other dtypes "
                           "must be kept as they are");
    if (count == 0)
        return Status::success();
    if (srcType == dstType) {
        std::memcpy(dst, src, count * dtypeSize(srcType));
        return Status::success();
    }
    const auto* in = static_cast<const unsigned char*>(src);
    auto* out = static_cast<unsigned char*>(dst);
    withFloatLoader(srcType, [&](auto loadFloat) {
        switch (dstType) {
        case DType::Float64:
            forEach(count, [&](std::uint64_t i) { store<double>(out, i, static_cast<double>(loadFloat(in, i))); });
            break;
        case DType::Float32:
            forEach(count, [&](std::uint64_t i) { store<float>(out, i, loadFloat(in, i)); });
            break;
        case DType::Float16:
            // c10::Half is built from a float, so Float64 is rounded twice (to Float32, then to Float16) like torch.
#if defined(__x86_64__)
            if (hasF16c()) {
                constexpr std::uint64_t kBlock = 1024;
                float floats[kBlock];
                for (std::uint64_t first = 0; first < count; first += kBlock) {
                    const std::uint64_t n = std::min(kBlock, count - first);
                    for (std::uint64_t i = 0; i < n; ++i)
                        floats[i] = loadFloat(in, first + i);
                    floatsToF16Hardware(floats, out + first * 2, n);
                }
                break;
            }
#endif
            forEach(count, [&](std::uint64_t i) { store<std::uint16_t>(out, i, f32ToF16(loadFloat(in, i))); });
            break;
        case DType::BFloat16:
            forEach(count, [&](std::uint64_t i) { store<std::uint16_t>(out, i, f32ToBf16(loadFloat(in, i))); });
            break;
        default:
            break; // excluded by canConvert
        }
    });
    return Status::success();
}

Status accumulatePartial(float* accumulator, const void* src, DType srcType, std::uint64_t count)
{
    TESSERA_TRY(checkArgs(src, srcType, accumulator, count, "sum Partial terms"));
    if (!isConvertibleFloat(srcType))
        return makeError("cannot sum Partial terms of dtype " + std::string(torchName(srcType))
                         + ": only float16, bfloat16, float32 and float64 terms can be summed");
    const auto* in = static_cast<const unsigned char*>(src);
    withFloatLoader(srcType, [&](auto loadFloat) {
        forEach(count, [&](std::uint64_t i) { accumulator[i] += loadFloat(in, i); });
    });
    return Status::success();
}

} // namespace tessera
