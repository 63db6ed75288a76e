// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/lora_fuse.h"
#include "io/printable.h"

#include "merge/merge_engine.h"
#include "model/convert.h"
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

namespace tessera {

namespace {

/// The output dtype holds the base weight exactly, so the base is assembled straight into the output buffer
/// and converted to fp32 tile by tile (same dtype, or a wider fp32 output).
bool baseFitsOutput(const PlannedTensor& p)
{
    return p.dtype == p.sourceDtype || p.dtype == DType::Float32;
}

std::uint64_t tileRows(std::int64_t cols)
{
    return std::max<std::uint64_t>(1, kMergeChunkBytes / (static_cast<std::uint64_t>(std::max<std::int64_t>(cols, 1)) * 4));
}

/// How many of the `n` values of `dtype` at `data` are infinite or NaN (an exponent of all ones).
std::uint64_t nonFinite(const std::uint8_t* data, DType dtype, std::uint64_t n)
{
    std::uint64_t count = 0;
    if (dtype == DType::Float32) {
        for (std::uint64_t i = 0; i < n; ++i) {
            float v;
            std::memcpy(&v, data + 4 * i, 4);
            count += std::isfinite(v) ? 0 : 1;
        }
        return count;
    }
    const std::uint16_t exponent = dtype == DType::BFloat16 ? 0x7F80 : 0x7C00; // float16 otherwise
    for (std::uint64_t i = 0; i < n; ++i) {
        std::uint16_t v;
        std::memcpy(&v, data + 2 * i, 2);
        count += (v & exponent) == exponent ? 1 : 0;
    }
    return count;
}

/// A fused weight with more infinite or NaN values than its base: the update overflowed (an alpha or factors out
/// of range, or a sum past the output dtype's largest value). Such a model computes nothing useful.
Status checkFinite(const TensorInfo& weight, const PlannedTensor& planned, std::uint64_t before, std::uint64_t after)
{
    if (after <= before)
        return Status::success();
    std::ostringstream scale;
    scale << planned.delta->scale;
    return makeError(weight.name + ": fusing its LoRA update (scale " + scale.str() + ") makes "
                     + std::to_string(after - before) + " of its values infinite or NaN in "
                     + std::string(torchName(planned.dtype)) + "; the adapter's lora_alpha or factors are out of range, "
                     "so the fused model is not written");
}

} // namespace

Result<PlannedDelta> planLoraDelta(const PlannedTensor& planned, const TensorInfo& weight, const TensorInfo& a,
                                   std::size_t aIndex, const TensorInfo& b, std::size_t bIndex, double scale,
                                   bool transposed)
{
    if (weight.shape.size() != 2 || a.shape.size() != 2 || b.shape.size() != 2 || a.shape[0] != b.shape[1])
        return makeError(printableText(weight.name) + ": its LoRA factors " + printableText(a.name) + " "
                         + shapeToString(a.shape) + " and " + printableText(b.name) + " " + shapeToString(b.shape)
                         + " do not form a rank-r update of a 2-D weight " + shapeToString(weight.shape));
    const Shape update = transposed ? Shape { a.shape[1], b.shape[0] } : Shape { b.shape[0], a.shape[1] };
    if (update != weight.shape)
        return makeError(printableText(weight.name) + " is " + shapeToString(weight.shape) + " but its LoRA factors "
                         + printableText(a.name) + " " + shapeToString(a.shape) + " and " + printableText(b.name) + " "
                         + shapeToString(b.shape) + " make an update of " + shapeToString(update));
    for (DType d : { planned.sourceDtype, planned.dtype })
        if (!isFloatingPoint(d) || dtypeSize(d) < 2 || d == DType::Float64)
            return makeError(printableText(weight.name)
                             + ": a LoRA update can be fused into float16, bfloat16 and float32 weights, "
                             "not " + std::string(torchName(d)));
    PlannedDelta d;
    d.a = a;
    d.b = b;
    d.scale = scale;
    d.transposed = transposed;
    auto aCopy = planTensorCopy(a, aIndex, DType::Float32);
    TESSERA_TRY(aCopy);
    auto bCopy = planTensorCopy(b, bIndex, DType::Float32);
    TESSERA_TRY(bCopy);
    d.aCopy = std::move(*aCopy);
    d.bCopy = std::move(*bCopy);
    return d;
}

std::uint64_t loraFuseBufferBytes(const PlannedTensor& p)
{
    if (!p.delta)
        return p.bufferBytes;
    const std::uint64_t numel = shapeNumel(p.shape);
    const std::int64_t cols = p.shape.size() == 2 ? p.shape[1] : 1;
    std::uint64_t working = 0;
    if (!baseFitsOutput(p))
        working = numel * 4;
    else if (p.dtype != DType::Float32)
        working = std::min<std::uint64_t>(numel, tileRows(cols) * static_cast<std::uint64_t>(cols)) * 4;
    // Each factor in fp32 plus its rearranged copy (C and M below).
    const std::uint64_t factors = 2 * (p.delta->aCopy.bytes + p.delta->bCopy.bytes);
    return p.bytes + working + factors;
}

bool addLowRankProduct(float* w, std::int64_t rows, std::int64_t cols, const float* c, const float* m, std::int64_t r,
                       float scale, unsigned threads, const std::function<bool()>& canceled)
{
    constexpr std::int64_t kRowsPerItem = 16;
    const auto blocks = static_cast<std::size_t>((rows + kRowsPerItem - 1) / kRowsPerItem);
    std::atomic<bool> stopped { false };
    parallelFor(blocks, threads, [&](std::size_t block) {
        if (stopped.load(std::memory_order_relaxed))
            return;
        if (canceled && canceled()) {
            stopped = true;
            return;
        }
        std::vector<double> acc(static_cast<std::size_t>(cols));
        const std::int64_t first = static_cast<std::int64_t>(block) * kRowsPerItem;
        const std::int64_t last = std::min(rows, first + kRowsPerItem);
        for (std::int64_t i = first; i < last; ++i) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (std::int64_t k = 0; k < r; ++k) {
                const double coef = c[i * r + k];
                if (coef == 0)
                    continue;
                const float* mk = m + k * cols;
                for (std::int64_t j = 0; j < cols; ++j)
                    acc[static_cast<std::size_t>(j)] += coef * mk[j];
            }
            float* wi = w + i * cols;
            for (std::int64_t j = 0; j < cols; ++j)
                wi[j] = wi[j] + static_cast<float>(acc[static_cast<std::size_t>(j)]) * scale;
        }
    });
    return !stopped;
}

Status materializeFused(SourceFiles& files, const TensorInfo& weight, const PlannedTensor& planned, std::uint8_t* dst,
                        const std::function<bool()>& canceled)
{
    const PlannedDelta& d = *planned.delta;
    const std::int64_t rows = planned.shape[0];
    const std::int64_t cols = planned.shape[1];
    const std::int64_t r = d.a.shape[0];

    // The factors, in fp32, rearranged so that the update is C [rows, r] · M [r, cols].
    auto a = PageBuffer::allocate(d.aCopy.bytes);
    TESSERA_TRY(a);
    TESSERA_TRY(materializeTensor(files, d.a, d.aCopy, a->data(), canceled));
    auto b = PageBuffer::allocate(d.bCopy.bytes);
    TESSERA_TRY(b);
    TESSERA_TRY(materializeTensor(files, d.b, d.bCopy, b->data(), canceled));
    const float* fa = reinterpret_cast<const float*>(a->data());
    const float* fb = reinterpret_cast<const float*>(b->data());
    std::vector<float> c, m;
    if (!d.transposed) {
        c.assign(fb, fb + rows * r); // B [out, r]
        m.assign(fa, fa + r * cols); // A [r, in]
    } else {
        // An embedding: update = (B [dim, r] · A [r, num])ᵀ, so C = Aᵀ [num, r] and M = Bᵀ [r, dim].
        c.resize(static_cast<std::size_t>(rows * r));
        m.resize(static_cast<std::size_t>(r * cols));
        for (std::int64_t k = 0; k < r; ++k) {
            for (std::int64_t i = 0; i < rows; ++i)
                c[static_cast<std::size_t>(i * r + k)] = fa[k * rows + i];
            for (std::int64_t j = 0; j < cols; ++j)
                m[static_cast<std::size_t>(k * cols + j)] = fb[j * r + k];
        }
    }
    *a = PageBuffer();
    *b = PageBuffer();
    const float scale = static_cast<float>(d.scale);
    const unsigned threads = resolveThreads(0);

    PlannedTensor base = planned;
    base.delta.reset();
    if (!baseFitsOutput(planned)) {
        // A narrower output (fp32 weights written as bf16): fuse in an fp32 copy, then round once.
        base.dtype = DType::Float32;
        base.bytes = shapeNumel(planned.shape) * 4;
        auto work = PageBuffer::allocate(base.bytes);
        TESSERA_TRY(work);
        TESSERA_TRY(materializeTensor(files, weight, base, work->data(), canceled));
        float* w = reinterpret_cast<float*>(work->data());
        const std::uint64_t before = nonFinite(work->data(), DType::Float32, shapeNumel(planned.shape));
        if (!addLowRankProduct(w, rows, cols, c.data(), m.data(), r, scale, threads, canceled))
            return canceledError();
        TESSERA_TRY(convertElements(w, DType::Float32, dst, planned.dtype, shapeNumel(planned.shape)));
        return checkFinite(weight, planned, before, nonFinite(dst, planned.dtype, shapeNumel(planned.shape)));
    }
    TESSERA_TRY(materializeTensor(files, weight, base, dst, canceled));
    if (planned.dtype == DType::Float32) {
        const std::uint64_t before = nonFinite(dst, DType::Float32, shapeNumel(planned.shape));
        if (!addLowRankProduct(reinterpret_cast<float*>(dst), rows, cols, c.data(), m.data(), r, scale, threads,
                               canceled))
            return canceledError();
        return checkFinite(weight, planned, before, nonFinite(dst, DType::Float32, shapeNumel(planned.shape)));
    }
    // bf16/fp16 in and out: each tile of rows goes to fp32 (exactly), gets its update, and is rounded back once.
    const std::size_t es = dtypeSize(planned.dtype);
    const std::int64_t perTile = static_cast<std::int64_t>(tileRows(cols));
    std::vector<float> tile(static_cast<std::size_t>(std::min(perTile, rows) * cols));
    std::uint64_t before = 0, after = 0;
    for (std::int64_t row = 0; row < rows; row += perTile) {
        const std::int64_t n = std::min(perTile, rows - row);
        const std::uint64_t count = static_cast<std::uint64_t>(n * cols);
        std::uint8_t* at = dst + static_cast<std::uint64_t>(row * cols) * es;
        before += nonFinite(at, planned.dtype, count);
        TESSERA_TRY(convertElements(at, planned.dtype, tile.data(), DType::Float32, count));
        if (!addLowRankProduct(tile.data(), n, cols, c.data() + row * r, m.data(), r, scale, threads, canceled))
            return canceledError();
        TESSERA_TRY(convertElements(tile.data(), DType::Float32, at, planned.dtype, count));
        after += nonFinite(at, planned.dtype, count);
    }
    return checkFinite(weight, planned, before, after);
}

} // namespace tessera
