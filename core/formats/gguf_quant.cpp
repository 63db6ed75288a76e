// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_quant.h"

#include "model/convert.h"
#include "parallel.h"

#include <atomic>
#include <cmath>
#include <mutex>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

constexpr std::uint64_t kBlocksPerTask = 4096; ///< 128 Ki values: large enough to amortise the hand-out

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

void quantizeBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    std::vector<float> scales(static_cast<std::size_t>(blocks));
    for (std::uint64_t b = 0; b < blocks; ++b) {
        const float* x = src + b * kQ8_0BlockElements;
        float amax = 0.0f;
        for (std::uint64_t j = 0; j < kQ8_0BlockElements; ++j)
            amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        scales[b] = d;
        auto* q = reinterpret_cast<std::int8_t*>(dst + b * kQ8_0BlockBytes + 2);
        for (std::uint64_t j = 0; j < kQ8_0BlockElements; ++j)
            q[j] = roundToInt8(x[j] * id);
    }
    std::vector<std::uint16_t> halves(static_cast<std::size_t>(blocks));
    (void)convertElements(scales.data(), DType::Float32, halves.data(), DType::Float16, blocks);
    for (std::uint64_t b = 0; b < blocks; ++b)
        std::memcpy(dst + b * kQ8_0BlockBytes, &halves[b], 2);
}

} // namespace

Status quantizeQ8_0(const float* src, std::uint64_t count, std::uint8_t* dst, unsigned threads)
{
    if (count % kQ8_0BlockElements != 0)
        return makeError("Q8_0 needs a multiple of 32 values (got " + std::to_string(count) + ")");
    const std::uint64_t blocks = count / kQ8_0BlockElements;
    const std::uint64_t tasks = (blocks + kBlocksPerTask - 1) / kBlocksPerTask;
    parallelFor(static_cast<std::size_t>(tasks), threads, [&](std::size_t t) {
        const std::uint64_t first = t * kBlocksPerTask;
        const std::uint64_t n = std::min(kBlocksPerTask, blocks - first);
        quantizeBlocks(src + first * kQ8_0BlockElements, n, dst + first * kQ8_0BlockBytes);
    });
    return Status::success();
}

Status quantizeQ8_0From(const void* src, DType dtype, std::uint64_t count, std::uint8_t* dst, unsigned threads)
{
    if (dtype == DType::Float32)
        return quantizeQ8_0(static_cast<const float*>(src), count, dst, threads);
    if (count % kQ8_0BlockElements != 0)
        return makeError("Q8_0 needs a multiple of 32 values (got " + std::to_string(count) + ")");
    const std::uint64_t perTask = kBlocksPerTask * kQ8_0BlockElements;
    const std::uint64_t tasks = (count + perTask - 1) / perTask;
    const std::size_t es = dtypeSize(dtype);
    std::atomic<bool> failed { false };
    std::string message;
    std::mutex mutex;
    parallelFor(static_cast<std::size_t>(tasks), threads, [&](std::size_t t) {
        const std::uint64_t first = t * perTask;
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
        quantizeBlocks(values.data(), n / kQ8_0BlockElements, dst + first / kQ8_0BlockElements * kQ8_0BlockBytes);
    });
    if (failed)
        return makeError(message);
    return Status::success();
}

void dequantizeQ8_0(const std::uint8_t* src, std::uint64_t count, float* dst)
{
    const std::uint64_t blocks = count / kQ8_0BlockElements;
    for (std::uint64_t b = 0; b < blocks; ++b) {
        std::uint16_t half;
        std::memcpy(&half, src + b * kQ8_0BlockBytes, 2);
        float d = 0;
        (void)convertElements(&half, DType::Float16, &d, DType::Float32, 1);
        const auto* q = reinterpret_cast<const std::int8_t*>(src + b * kQ8_0BlockBytes + 2);
        for (std::uint64_t j = 0; j < kQ8_0BlockElements; ++j)
            dst[b * kQ8_0BlockElements + j] = d * static_cast<float>(q[j]);
    }
}

} // namespace tessera
