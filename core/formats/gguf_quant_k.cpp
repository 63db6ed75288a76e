// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_quant_k.h"

#include "formats/gguf_blocks.h"

#include <algorithm>
#include <cmath>

// Byte-identical to ggml only when every float operation rounds as ggml's do, one at a time and in ggml's order:
// this file is compiled with -ffp-contract=off (core/CMakeLists.txt), each sum runs in ggml's loop order, each
// product keeps ggml's grouping (w·x·l is (w·x)·l), and an int meets a float as a float, as in C.

namespace tessera {

namespace {

constexpr int kSuper = static_cast<int>(kSuperBlockValues);
/// Below this largest magnitude ggml takes a group for all zeros (GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

/// ggml's nearest_int: adding 1.5·2^23 leaves the integer nearest to f (ties to even) in the low mantissa bits,
/// for |f| < 2^22. Beyond that (the reference only asserts) the same bit arithmetic is done here, so any input
/// gives ggml's number, and no float-to-int conversion can overflow.
inline int nearestInt(float f)
{
    const float shifted = f + 12582912.0f;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &shifted, sizeof bits);
    return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

inline int clampInt(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

/// C's conversion of an int to an 8-bit field, as ggml's stores do: the low byte.
inline std::uint8_t lowByte(int v) { return static_cast<std::uint8_t>(static_cast<unsigned>(v) & 0xFFu); }
inline int lowByteSigned(int v)
{
    const int byte = lowByte(v);
    return byte >= 128 ? byte - 256 : byte;
}

/// The grid search of make_qkx2_quants: the codes' range nmax + rmin + rdelta·is for is = 0…nstep.
struct AffineSearch {
    int nmax;
    float rmin;
    float rdelta;
    int nstep; ///< below 1: no search, the first codes are kept
};

template <bool kAbsoluteError>
inline float errorOf(float diff)
{
    return kAbsoluteError ? std::fabs(diff) : diff * diff;
}

/// ggml's make_qkx2_quants: codes L in [0, nmax] and value ≈ scale·L − negatedMin for the N values x, with the
/// weighted least-squares scale and minimum (the minimum kept ≤ 0) of the best of a grid of code ranges, judged
/// by the weighted squared (or absolute) error.
template <int N, bool kAbsoluteError>
float fitScaleAndMin(const float* x, const float* w, const AffineSearch& s, std::uint8_t* L, float& negatedMin)
{
    float min = x[0];
    float max = x[0];
    float sumW = w[0];
    float sumX = sumW * x[0];
    for (int i = 1; i < N; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sumW += w[i];
        sumX += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        std::fill(L, L + N, std::uint8_t { 0 });
        negatedMin = -min;
        return 0.0f;
    }
    const float nmax = static_cast<float>(s.nmax);
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float bestError = 0;
    for (int i = 0; i < N; ++i) {
        L[i] = static_cast<std::uint8_t>(clampInt(nearestInt(iscale * (x[i] - min)), 0, s.nmax));
        bestError += w[i] * errorOf<kAbsoluteError>(scale * L[i] + min - x[i]);
    }
    if (s.nstep < 1) {
        negatedMin = -min;
        return scale;
    }
    std::uint8_t trial[N];
    for (int is = 0; is <= s.nstep; ++is) {
        iscale = (s.rmin + s.rdelta * static_cast<float>(is) + nmax) / (max - min);
        float sumL = 0;
        float sumL2 = 0;
        float sumXL = 0;
        for (int i = 0; i < N; ++i) {
            const int l = clampInt(nearestInt(iscale * (x[i] - min)), 0, s.nmax);
            trial[i] = static_cast<std::uint8_t>(l);
            const float fl = static_cast<float>(l);
            sumL += w[i] * fl;
            sumL2 += w[i] * fl * fl;
            sumXL += w[i] * fl * x[i];
        }
        const float det = sumW * sumL2 - sumL * sumL;
        if (!(det > 0))
            continue;
        float thisScale = (sumW * sumXL - sumX * sumL) / det;
        float thisMin = (sumL2 * sumX - sumL * sumXL) / det;
        if (thisMin > 0) {
            thisMin = 0;
            thisScale = sumXL / sumL2;
        }
        float error = 0;
        for (int i = 0; i < N; ++i)
            error += w[i] * errorOf<kAbsoluteError>(thisScale * trial[i] + thisMin - x[i]);
        if (error < bestError) {
            std::copy(trial, trial + N, L);
            bestError = error;
            scale = thisScale;
            min = thisMin;
        }
    }
    negatedMin = -min;
    return scale;
}

constexpr int kGroup = 16; ///< values in a sub-block of Q2_K, Q3_K and Q6_K

/// The signed value of largest magnitude among 16 (the first of equals), and that magnitude.
inline float signedAbsMax(const float* x, float& amax)
{
    float max = 0;
    amax = 0;
    for (int i = 0; i < kGroup; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

/// ggml's make_qx_quants as Q6_K calls it (no importance weights, rmse_type 1: weights x²): codes L in
/// [0, 2·nmax) for value = scale·(L − nmax), the scale the best weighted least-squares fit over 18 nudges of the
/// code range around nmax.
float fitSymmetricScale(const float* x, int nmax, std::int8_t* L)
{
    float amax = 0;
    const float max = signedAbsMax(x, amax);
    if (amax < kGroupMaxEps) {
        std::fill(L, L + kGroup, std::int8_t { 0 });
        return 0.0f;
    }
    float w[kGroup];
    for (int i = 0; i < kGroup; ++i)
        w[i] = x[i] * x[i];
    float iscale = static_cast<float>(-nmax) / max;
    float sumLX = 0;
    float sumL2 = 0;
    for (int i = 0; i < kGroup; ++i) {
        const int l = clampInt(nearestInt(iscale * x[i]), -nmax, nmax - 1);
        L[i] = static_cast<std::int8_t>(l + nmax);
        sumLX += w[i] * x[i] * static_cast<float>(l);
        sumL2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = sumL2 != 0 ? sumLX / sumL2 : 0.0f;
    float best = scale * sumLX;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        sumLX = sumL2 = 0;
        for (int i = 0; i < kGroup; ++i) {
            const int l = clampInt(nearestInt(iscale * x[i]), -nmax, nmax - 1);
            sumLX += w[i] * x[i] * static_cast<float>(l);
            sumL2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
        }
        if (sumL2 > 0 && sumLX * sumLX > best * sumL2) {
            for (int i = 0; i < kGroup; ++i) // a better range is rare: its codes are worked out again only then
                L[i] = static_cast<std::int8_t>(clampInt(nearestInt(iscale * x[i]), -nmax, nmax - 1) + nmax);
            scale = sumLX / sumL2;
            best = scale * sumLX;
        }
    }
    return scale;
}

/// ggml's make_q3_quants with do_rmse, as Q3_K calls it (nmax 4): codes L in [0, 8) for value = scale·(L − 4),
/// improved one code at a time (up to five sweeps) while the x²-weighted fit gets better.
float fitThreeBitScale(const float* x, std::int8_t* L)
{
    constexpr int nmax = 4;
    float amax = 0;
    const float max = signedAbsMax(x, amax);
    if (amax < kGroupMaxEps) {
        std::fill(L, L + kGroup, std::int8_t { 0 });
        return 0.0f;
    }
    const float iscale = static_cast<float>(-nmax) / max;
    float w[kGroup];
    float sumLX = 0;
    float sumL2 = 0;
    for (int i = 0; i < kGroup; ++i) {
        const int l = clampInt(nearestInt(iscale * x[i]), -nmax, nmax - 1);
        L[i] = static_cast<std::int8_t>(l);
        w[i] = x[i] * x[i];
        sumLX += w[i] * x[i] * static_cast<float>(l);
        sumL2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int sweep = 0; sweep < 5; ++sweep) {
        int changed = 0;
        for (int i = 0; i < kGroup; ++i) {
            float slx = sumLX - w[i] * x[i] * static_cast<float>(L[i]);
            if (!(slx > 0))
                continue;
            float sl2 = sumL2 - w[i] * static_cast<float>(L[i]) * static_cast<float>(L[i]);
            const int l = clampInt(nearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == L[i])
                continue;
            slx += w[i] * x[i] * static_cast<float>(l);
            sl2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
            if (sl2 > 0 && slx * slx * sumL2 > sumLX * sumLX * sl2) {
                L[i] = static_cast<std::int8_t>(l);
                sumLX = slx;
                sumL2 = sl2;
                ++changed;
            }
        }
        if (changed == 0)
            break;
    }
    for (int i = 0; i < kGroup; ++i)
        L[i] = static_cast<std::int8_t>(L[i] + nmax);
    return sumL2 > 0.0f ? sumLX / sumL2 : 0.0f;
}

/// 2-bit codes, four to a byte: bytes 32·h + l hold codes 128·h + l + 32·k in bits 2k (Q2_K's and Q3_K's qs).
template <typename Code>
void packTwoBitCodes(const Code (&L)[kSuper], std::uint8_t (&qs)[kSuper / 4])
{
    for (int j = 0; j < kSuper; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4)
                                                      | (L[j + l + 96] << 6));
}

void quantizeQ2_KBlock(const float* x, BlockQ2_K& y)
{
    constexpr AffineSearch search { 3, -0.5f, 0.1f, 15 };
    constexpr float q4scale = 15.0f;
    std::uint8_t L[kSuper];
    float scales[kSuper / kGroup];
    float mins[kSuper / kGroup];
    float maxScale = 0; // scales are never negative, the minimum being taken off
    float maxMin = 0;
    for (int j = 0; j < kSuper / kGroup; ++j) {
        float weights[kGroup];
        for (int l = 0; l < kGroup; ++l)
            weights[l] = std::fabs(x[kGroup * j + l]);
        scales[j] = fitScaleAndMin<kGroup, true>(x + kGroup * j, weights, search, L + kGroup * j, mins[j]);
        if (scales[j] > maxScale)
            maxScale = scales[j];
        if (mins[j] > maxMin)
            maxMin = mins[j];
    }
    if (maxScale > 0) {
        const float iscale = q4scale / maxScale;
        for (int j = 0; j < kSuper / kGroup; ++j)
            y.scales[j] = lowByte(nearestInt(iscale * scales[j]));
        y.d = toGgmlHalf(maxScale / q4scale);
    } else {
        std::fill(std::begin(y.scales), std::end(y.scales), std::uint8_t { 0 });
        y.d = toGgmlHalf(0.0f);
    }
    if (maxMin > 0) {
        const float iscale = q4scale / maxMin;
        for (int j = 0; j < kSuper / kGroup; ++j) {
            const unsigned code = static_cast<unsigned>(nearestInt(iscale * mins[j]));
            y.scales[j] = static_cast<std::uint8_t>((y.scales[j] | (code << 4)) & 0xFFu);
        }
        y.dmin = toGgmlHalf(maxMin / q4scale);
    } else {
        y.dmin = toGgmlHalf(0.0f);
    }
    // The codes again, against the scales as stored.
    const float d = fromGgmlHalf(y.d);
    const float dmin = fromGgmlHalf(y.dmin);
    for (int j = 0; j < kSuper / kGroup; ++j) {
        const float dj = d * static_cast<float>(y.scales[j] & 0xF);
        if (dj == 0)
            continue;
        const float dm = dmin * static_cast<float>(y.scales[j] >> 4);
        for (int i = 0; i < kGroup; ++i)
            L[kGroup * j + i] = static_cast<std::uint8_t>(clampInt(nearestInt((x[kGroup * j + i] + dm) / dj), 0, 3));
    }
    packTwoBitCodes(L, y.qs);
}

/// Sub-block j's 6-bit scale code in Q3_K's 12 bytes: low nibbles in bytes 0…7, the top two bits in bytes 8…11.
inline int threeBitScaleCode(const std::uint8_t (&scales)[12], int j)
{
    const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    return low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

/// Q3_K's sub-block scales as 6-bit codes against d = max_scale / −32, with d.
void encodeThreeBitScales(const float (&scales)[kSuper / kGroup], float maxScale, BlockQ3_K& y)
{
    std::fill(std::begin(y.scales), std::end(y.scales), std::uint8_t { 0 });
    if (maxScale == 0) {
        y.d = toGgmlHalf(0.0f);
        return;
    }
    const float iscale = -32.0f / maxScale;
    for (int j = 0; j < kSuper / kGroup; ++j) {
        const int l = clampInt(lowByteSigned(nearestInt(iscale * scales[j])), -32, 31) + 32;
        if (j < 8)
            y.scales[j] = static_cast<std::uint8_t>(l & 0xF);
        else
            y.scales[j - 8] = static_cast<std::uint8_t>(y.scales[j - 8] | ((l & 0xF) << 4));
        y.scales[j % 4 + 8] = static_cast<std::uint8_t>(y.scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
    }
    y.d = toGgmlHalf(1 / iscale);
}

void quantizeQ3_KBlock(const float* x, BlockQ3_K& y)
{
    std::int8_t L[kSuper];
    float scales[kSuper / kGroup];
    float maxScale = 0;
    float amax = 0;
    for (int j = 0; j < kSuper / kGroup; ++j) {
        scales[j] = fitThreeBitScale(x + kGroup * j, L + kGroup * j);
        const float scale = std::fabs(scales[j]);
        if (scale > amax) {
            amax = scale;
            maxScale = scales[j];
        }
    }
    encodeThreeBitScales(scales, maxScale, y);
    const float d = fromGgmlHalf(y.d);
    for (int j = 0; j < kSuper / kGroup; ++j) {
        const float dj = d * static_cast<float>(threeBitScaleCode(y.scales, j) - 32);
        if (dj == 0)
            continue;
        for (int i = 0; i < kGroup; ++i)
            L[kGroup * j + i] = static_cast<std::int8_t>(clampInt(nearestInt(x[kGroup * j + i] / dj), -4, 3) + 4);
    }
    // The third bit of code j goes to bit j / 32 of hmask[j % 32].
    std::fill(std::begin(y.hmask), std::end(y.hmask), std::uint8_t { 0 });
    for (int j = 0; j < kSuper; ++j)
        if (L[j] > 3) {
            y.hmask[j % 32] = static_cast<std::uint8_t>(y.hmask[j % 32] | (1u << (j / 32)));
            L[j] = static_cast<std::int8_t>(L[j] - 4);
        }
    packTwoBitCodes(L, y.qs);
}

constexpr int kSubBlock = 32; ///< values in a sub-block of Q4_K and Q5_K

/// Sub-block j's 6-bit scale and minimum codes in Q4_K's and Q5_K's 12 bytes (ggml's get_scale_min_k4): for
/// j < 4 the low six bits of bytes j and j + 4; else nibbles of byte j + 4 and the top two bits of bytes j − 4, j.
inline void scaleMinCodes(const std::uint8_t (&q)[12], int j, int& scale, int& min)
{
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

inline void putScaleMinCodes(std::uint8_t (&q)[12], int j, std::uint8_t scale, std::uint8_t min)
{
    if (j < 4) {
        q[j] = scale;
        q[j + 4] = min;
    } else {
        q[j + 4] = static_cast<std::uint8_t>((scale & 0xF) | ((min & 0xF) << 4));
        q[j - 4] = static_cast<std::uint8_t>(q[j - 4] | ((scale >> 4) << 6));
        q[j] = static_cast<std::uint8_t>(q[j] | ((min >> 4) << 6));
    }
}

/// What Q4_K and Q5_K share: each sub-block of 32 fitted with a scale and a minimum (weights: the sub-block's RMS
/// plus |x|), those coded in 6 bits against the fp16 d and dmin, then the codes L in [0, nmax] again against the
/// scales as stored.
template <typename Block>
void fitScalesAndMins(const float* x, const AffineSearch& search, Block& y, std::uint8_t (&L)[kSuper])
{
    constexpr int kSubBlocks = kSuper / kSubBlock;
    float scales[kSubBlocks];
    float mins[kSubBlocks];
    float maxScale = 0;
    float maxMin = 0;
    for (int j = 0; j < kSubBlocks; ++j) {
        const float* xs = x + kSubBlock * j;
        float sumX2 = 0;
        for (int l = 0; l < kSubBlock; ++l)
            sumX2 += xs[l] * xs[l];
        const float rms = std::sqrt(sumX2 / static_cast<float>(kSubBlock));
        float weights[kSubBlock];
        for (int l = 0; l < kSubBlock; ++l)
            weights[l] = rms + std::fabs(xs[l]);
        scales[j] = fitScaleAndMin<kSubBlock, false>(xs, weights, search, L + kSubBlock * j, mins[j]);
        if (scales[j] > maxScale)
            maxScale = scales[j];
        if (mins[j] > maxMin)
            maxMin = mins[j];
    }
    const float invScale = maxScale > 0 ? 63.0f / maxScale : 0.0f;
    const float invMin = maxMin > 0 ? 63.0f / maxMin : 0.0f;
    for (int j = 0; j < kSubBlocks; ++j)
        putScaleMinCodes(y.scales, j, std::min<std::uint8_t>(63, lowByte(nearestInt(invScale * scales[j]))),
                         std::min<std::uint8_t>(63, lowByte(nearestInt(invMin * mins[j]))));
    y.d = toGgmlHalf(maxScale / 63.0f);
    y.dmin = toGgmlHalf(maxMin / 63.0f);
    const float d = fromGgmlHalf(y.d);
    const float dmin = fromGgmlHalf(y.dmin);
    for (int j = 0; j < kSubBlocks; ++j) {
        int scale = 0;
        int min = 0;
        scaleMinCodes(y.scales, j, scale, min);
        const float dj = d * static_cast<float>(scale);
        if (dj == 0)
            continue;
        const float dm = dmin * static_cast<float>(min);
        for (int i = 0; i < kSubBlock; ++i)
            L[kSubBlock * j + i] = static_cast<std::uint8_t>(
                clampInt(nearestInt((x[kSubBlock * j + i] + dm) / dj), 0, search.nmax));
    }
}

void quantizeQ4_KBlock(const float* x, BlockQ4_K& y)
{
    std::uint8_t L[kSuper];
    fitScalesAndMins(x, AffineSearch { 15, -1.0f, 0.1f, 20 }, y, L);
    // Byte 32·h + l: code 64·h + l in the low nibble, code 64·h + 32 + l in the high one.
    for (int j = 0; j < kSuper; j += 64)
        for (int l = 0; l < 32; ++l)
            y.qs[j / 2 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
}

void quantizeQ5_KBlock(const float* x, BlockQ5_K& y)
{
    std::uint8_t L[kSuper];
    fitScalesAndMins(x, AffineSearch { 31, -0.5f, 0.1f, 15 }, y, L);
    // As Q4_K's nibbles; the fifth bit of code 64·h + l goes to bit 2h of qh[l], of code 64·h + 32 + l to bit 2h+1.
    std::fill(std::begin(y.qh), std::end(y.qh), std::uint8_t { 0 });
    for (int n = 0, pair = 0; n < kSuper; n += 64, pair += 2)
        for (int l = 0; l < 32; ++l) {
            int lo = L[n + l];
            int hi = L[n + l + 32];
            if (lo > 15) {
                lo -= 16;
                y.qh[l] = static_cast<std::uint8_t>(y.qh[l] | (1u << pair));
            }
            if (hi > 15) {
                hi -= 16;
                y.qh[l] = static_cast<std::uint8_t>(y.qh[l] | (2u << pair));
            }
            y.qs[n / 2 + l] = static_cast<std::uint8_t>(lo | (hi << 4));
        }
}

/// Q6_K's 6-bit codes: per half of 128, ql[64·h + l] holds codes l (low nibble) and l + 64 (high), ql[64·h + 32 + l]
/// codes l + 32 and l + 96; qh[32·h + l] their top two bits, in that order of codes l, l + 32, l + 64, l + 96.
void packSixBitCodes(const std::int8_t (&L)[kSuper], BlockQ6_K& y)
{
    for (int j = 0; j < kSuper; j += 128) {
        std::uint8_t* ql = y.ql + j / 2;
        std::uint8_t* qh = y.qh + j / 4;
        for (int l = 0; l < 32; ++l) {
            const int c0 = L[j + l];
            const int c1 = L[j + l + 32];
            const int c2 = L[j + l + 64];
            const int c3 = L[j + l + 96];
            ql[l] = static_cast<std::uint8_t>((c0 & 0xF) | ((c2 & 0xF) << 4));
            ql[l + 32] = static_cast<std::uint8_t>((c1 & 0xF) | ((c3 & 0xF) << 4));
            qh[l] = static_cast<std::uint8_t>((c0 >> 4) | ((c1 >> 4) << 2) | ((c2 >> 4) << 4) | ((c3 >> 4) << 6));
        }
    }
}

void quantizeQ6_KBlock(const float* x, BlockQ6_K& y)
{
    std::int8_t L[kSuper];
    float scales[kSuper / kGroup];
    float maxScale = 0;
    float maxAbsScale = 0;
    for (int j = 0; j < kSuper / kGroup; ++j) {
        scales[j] = fitSymmetricScale(x + kGroup * j, 32, L + kGroup * j);
        const float absScale = std::fabs(scales[j]);
        if (absScale > maxAbsScale) {
            maxAbsScale = absScale;
            maxScale = scales[j];
        }
    }
    if (maxAbsScale < kGroupMaxEps) {
        y = BlockQ6_K {}; // d = fp16 0 is all zero bits too
        return;
    }
    const float iscale = -128.0f / maxScale;
    y.d = toGgmlHalf(1 / iscale);
    for (int j = 0; j < kSuper / kGroup; ++j)
        y.scales[j] = static_cast<std::int8_t>(lowByteSigned(std::min(127, nearestInt(iscale * scales[j]))));
    const float d = fromGgmlHalf(y.d);
    for (int j = 0; j < kSuper / kGroup; ++j) {
        const float dj = d * static_cast<float>(y.scales[j]);
        if (dj == 0)
            continue;
        for (int i = 0; i < kGroup; ++i)
            L[kGroup * j + i] = static_cast<std::int8_t>(clampInt(nearestInt(x[kGroup * j + i] / dj), -32, 31) + 32);
    }
    packSixBitCodes(L, y);
}

/// Quantizes each super-block on the stack with `one`, then copies it into place.
template <typename Block, typename QuantizeOne>
void quantizeEach(const float* src, std::uint64_t blocks, std::uint8_t* dst, QuantizeOne one)
{
    for (std::uint64_t b = 0; b < blocks; ++b) {
        Block y;
        one(src + b * kSuperBlockValues, y);
        storeBlock(y, dst, b);
    }
}

/// Copies each super-block onto the stack and expands it with `one`.
template <typename Block, typename DequantizeOne>
void dequantizeEach(const std::uint8_t* src, std::uint64_t blocks, float* dst, DequantizeOne one)
{
    for (std::uint64_t b = 0; b < blocks; ++b)
        one(loadBlock<Block>(src, b), dst + b * kSuperBlockValues);
}

void dequantizeQ2_KBlock(BlockQ2_K x, float* y)
{
    const float d = fromGgmlHalf(x.d);
    const float min = fromGgmlHalf(x.dmin);
    int is = 0;
    for (int n = 0; n < kSuper; n += 128) {
        const std::uint8_t* q = x.qs + n / 4;
        for (int shift = 0; shift < 8; shift += 2)
            for (int half = 0; half < 2; ++half) {
                const std::uint8_t sc = x.scales[is++];
                const float dl = d * static_cast<float>(sc & 0xF);
                const float ml = min * static_cast<float>(sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
            }
    }
}

void dequantizeQ3_KBlock(BlockQ3_K x, float* y)
{
    const float d = fromGgmlHalf(x.d);
    int is = 0;
    unsigned highBit = 1;
    for (int n = 0; n < kSuper; n += 128) {
        const std::uint8_t* q = x.qs + n / 4;
        for (int shift = 0; shift < 8; shift += 2, highBit <<= 1)
            for (int half = 0; half < 2; ++half) {
                const float dl = d * static_cast<float>(threeBitScaleCode(x.scales, is++) - 32);
                for (int l = 16 * half; l < 16 * half + 16; ++l)
                    *y++ = dl * static_cast<float>(((q[l] >> shift) & 3) - ((x.hmask[l] & highBit) ? 0 : 4));
            }
    }
}

/// Q4_K's and Q5_K's sub-block j: its factor d·scale and the minimum dmin·min it takes off.
template <typename Block>
inline void subBlockScale(const Block& x, float d, float dmin, int j, float& factor, float& offset)
{
    int scale = 0;
    int min = 0;
    scaleMinCodes(x.scales, j, scale, min);
    factor = d * static_cast<float>(scale);
    offset = dmin * static_cast<float>(min);
}

void dequantizeQ4_KBlock(BlockQ4_K x, float* y)
{
    const float d = fromGgmlHalf(x.d);
    const float dmin = fromGgmlHalf(x.dmin);
    for (int j = 0; j < kSuper / 64; ++j) {
        const std::uint8_t* q = x.qs + 32 * j;
        float d1 = 0, m1 = 0, d2 = 0, m2 = 0;
        subBlockScale(x, d, dmin, 2 * j, d1, m1);
        subBlockScale(x, d, dmin, 2 * j + 1, d2, m2);
        for (int l = 0; l < 32; ++l)
            *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l)
            *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
}

void dequantizeQ5_KBlock(BlockQ5_K x, float* y)
{
    const float d = fromGgmlHalf(x.d);
    const float dmin = fromGgmlHalf(x.dmin);
    for (int j = 0; j < kSuper / 64; ++j) {
        const std::uint8_t* q = x.qs + 32 * j;
        const unsigned lowBit = 1u << (2 * j);
        const unsigned highBit = 2u << (2 * j);
        float d1 = 0, m1 = 0, d2 = 0, m2 = 0;
        subBlockScale(x, d, dmin, 2 * j, d1, m1);
        subBlockScale(x, d, dmin, 2 * j + 1, d2, m2);
        for (int l = 0; l < 32; ++l)
            *y++ = d1 * static_cast<float>((q[l] & 0xF) + ((x.qh[l] & lowBit) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l)
            *y++ = d2 * static_cast<float>((q[l] >> 4) + ((x.qh[l] & highBit) ? 16 : 0)) - m2;
    }
}

void dequantizeQ6_KBlock(BlockQ6_K x, float* y)
{
    const float d = fromGgmlHalf(x.d);
    // Per half of 128: values l, l + 32, l + 64, l + 96 come from ql[l], ql[l + 32] and qh[l]; a sub-block's factor
    // d·sc is the first product of ggml's d·sc·q, so it is formed once per run of 16.
    for (int n = 0; n < kSuper; n += 128, y += 128) {
        const std::uint8_t* ql = x.ql + n / 2;
        const std::uint8_t* qh = x.qh + n / 4;
        const std::int8_t* sc = x.scales + n / 16;
        for (int is = 0; is < 2; ++is) {
            const float f1 = d * static_cast<float>(sc[is]);
            const float f2 = d * static_cast<float>(sc[is + 2]);
            const float f3 = d * static_cast<float>(sc[is + 4]);
            const float f4 = d * static_cast<float>(sc[is + 6]);
            for (int l = 16 * is; l < 16 * is + 16; ++l) {
                y[l] = f1 * static_cast<float>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = f2 * static_cast<float>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = f3 * static_cast<float>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = f4 * static_cast<float>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
    }
}

} // namespace

void quantizeQ2_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeEach<BlockQ2_K>(src, blocks, dst, quantizeQ2_KBlock);
}

void dequantizeQ2_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeEach<BlockQ2_K>(src, blocks, dst, dequantizeQ2_KBlock);
}

void quantizeQ3_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeEach<BlockQ3_K>(src, blocks, dst, quantizeQ3_KBlock);
}

void dequantizeQ3_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeEach<BlockQ3_K>(src, blocks, dst, dequantizeQ3_KBlock);
}

void quantizeQ4_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeEach<BlockQ4_K>(src, blocks, dst, quantizeQ4_KBlock);
}

void dequantizeQ4_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeEach<BlockQ4_K>(src, blocks, dst, dequantizeQ4_KBlock);
}

void quantizeQ5_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeEach<BlockQ5_K>(src, blocks, dst, quantizeQ5_KBlock);
}

void dequantizeQ5_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeEach<BlockQ5_K>(src, blocks, dst, dequantizeQ5_KBlock);
}

void quantizeQ6_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeEach<BlockQ6_K>(src, blocks, dst, quantizeQ6_KBlock);
}

void dequantizeQ6_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeEach<BlockQ6_K>(src, blocks, dst, dequantizeQ6_KBlock);
}

} // namespace tessera
