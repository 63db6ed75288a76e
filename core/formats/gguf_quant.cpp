// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_quant.h"

#include "formats/gguf_blocks.h"

#include "model/convert.h"
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <vector>

namespace tessera {

namespace {

constexpr std::uint64_t kBlocksPerTask = 4096; ///< 128 Ki values of Q8_0: large enough to amortise the hand-out

/// The row of `type` when it is a quantized type, else an error naming what was asked.
Result<const GgmlTypeInfo*> quantizedType(GgmlType type)
{
    const GgmlTypeInfo& row = ggmlType(type);
    if (!row.quantized())
        return makeError(std::string(row.name) + " is not a quantized type");
    return &row;
}

Status wholeBlocks(const GgmlTypeInfo& row, std::uint64_t count)
{
    if (count % row.blockElements != 0)
        return makeError(std::string(row.name) + " needs a multiple of " + std::to_string(row.blockElements)
                         + " values (got " + std::to_string(count) + ")");
    return Status::success();
}

/// roundf() of x·(1/d) as an int8: halves away from zero. x − trunc(x) is exact for |x| < 2^23, so the comparison
/// with 0.5 decides exactly as roundf does. The value stays within ±128 unless the block's largest magnitude is so
/// small that 1/d overflows to infinity (a block of subnormals); ggml's conversion of ±inf or NaN on x86-64 gives
/// INT_MIN, whose low byte is 0, and so does this, without the undefined float-to-int conversion. Inline, unlike the
/// libm call, so the loop runs several times faster.
inline std::int8_t roundToInt8(float x)
{
    if (!(std::fabs(x) < 2147483648.0f))
        return 0;
    int i = static_cast<int>(x);
    const float fraction = x - static_cast<float>(i);
    i += (fraction >= 0.5f) - (fraction <= -0.5f);
    return static_cast<std::int8_t>(i);
}

constexpr std::uint64_t kQ8_0Values = sizeof(BlockQ8_0::q);

} // namespace

void quantizeQ8_0Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    std::vector<float> scales(static_cast<std::size_t>(blocks));
    for (std::uint64_t b = 0; b < blocks; ++b) {
        const float* x = src + b * kQ8_0Values;
        // ggml's MAX(amax, |x|): a NaN takes over, and the next value replaces it (std::max would keep amax).
        float amax = 0.0f;
        for (std::uint64_t j = 0; j < kQ8_0Values; ++j) {
            const float a = std::fabs(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        scales[b] = d;
        auto* q = reinterpret_cast<std::int8_t*>(dst + b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, q));
        for (std::uint64_t j = 0; j < kQ8_0Values; ++j)
            q[j] = roundToInt8(x[j] * id);
    }
    // The scales converted to fp16 together: one call instead of one a block.
    std::vector<std::uint16_t> halves(static_cast<std::size_t>(blocks));
    toGgmlHalves(scales.data(), halves.data(), static_cast<std::size_t>(blocks));
    for (std::uint64_t b = 0; b < blocks; ++b)
        std::memcpy(dst + b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, d), &halves[b], sizeof(BlockQ8_0::d));
}

void dequantizeQ8_0Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    for (std::uint64_t b = 0; b < blocks; ++b) {
        const std::uint8_t* block = src + b * sizeof(BlockQ8_0);
        std::uint16_t half;
        std::memcpy(&half, block + offsetof(BlockQ8_0, d), sizeof half);
        float d = 0;
        (void)convertElements(&half, DType::Float16, &d, DType::Float32, 1);
        const auto* q = reinterpret_cast<const std::int8_t*>(block + offsetof(BlockQ8_0, q));
        for (std::uint64_t j = 0; j < kQ8_0Values; ++j)
            dst[b * kQ8_0Values + j] = d * static_cast<float>(q[j]);
    }
}

Status quantizeGgml(GgmlType type, const float* src, std::uint64_t count, std::uint8_t* dst, unsigned threads)
{
    auto row = quantizedType(type);
    TESSERA_TRY(row);
    const GgmlTypeInfo& t = **row;
    TESSERA_TRY(wholeBlocks(t, count));
    const std::uint64_t blocks = count / t.blockElements;
    const std::uint64_t tasks = (blocks + kBlocksPerTask - 1) / kBlocksPerTask;
    parallelFor(static_cast<std::size_t>(tasks), threads, [&](std::size_t task) {
        const std::uint64_t first = task * kBlocksPerTask;
        const std::uint64_t n = std::min(kBlocksPerTask, blocks - first);
        t.quantize(src + first * t.blockElements, n, dst + first * t.blockBytes);
    });
    return Status::success();
}

Status quantizeGgmlFrom(GgmlType type, const void* src, DType dtype, std::uint64_t count, std::uint8_t* dst,
                        unsigned threads)
{
    if (dtype == DType::Float32)
        return quantizeGgml(type, static_cast<const float*>(src), count, dst, threads);
    auto row = quantizedType(type);
    TESSERA_TRY(row);
    const GgmlTypeInfo& t = **row;
    TESSERA_TRY(wholeBlocks(t, count));
    const std::uint64_t perTask = kBlocksPerTask * t.blockElements;
    const std::uint64_t tasks = (count + perTask - 1) / perTask;
    const std::size_t es = dtypeSize(dtype);
    std::atomic<bool> failed { false };
    std::string message;
    std::mutex mutex;
    parallelFor(static_cast<std::size_t>(tasks), threads, [&](std::size_t task) {
        const std::uint64_t first = task * perTask;
        const std::uint64_t n = std::min(perTask, count - first);
        std::vector<float> values(static_cast<std::size_t>(n));
        auto converted = convertElements(static_cast<const std::uint8_t*>(src) + first * es, dtype, values.data(),
                                         DType::Float32, n);
        if (!converted) {
            std::lock_guard<std::mutex> lock(mutex);
            message = converted.error().message;
            failed = true;
            return;
        }
        t.quantize(values.data(), n / t.blockElements, dst + first / t.blockElements * t.blockBytes);
    });
    if (failed)
        return makeError(message);
    return Status::success();
}

std::uint64_t quantizeSlabBytes(GgmlType type)
{
    return kBlocksPerTask * ggmlType(type).blockElements * sizeof(float);
}

Status dequantizeGgml(GgmlType type, const std::uint8_t* src, std::uint64_t count, float* dst)
{
    auto row = quantizedType(type);
    TESSERA_TRY(row);
    TESSERA_TRY(wholeBlocks(**row, count));
    (*row)->dequantize(src, count / (*row)->blockElements, dst);
    return Status::success();
}

} // namespace tessera
