// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/tensor_values.h"

#include "compare/whole_tensor.h"
#include "io/crc32.h"
#include "io/regular_file.h"
#include "io/zip_archive.h"
#include "merge/box_copy.h"
#include "merge/merge_plan.h"
#include "model/convert.h"

#include <algorithm>
#include <cstring>

namespace tessera {

std::optional<std::vector<TensorValues::Run>> TensorValues::inPlaceRuns(const CheckpointInfo& info, int index,
                                                                        std::optional<DType> dtype, DType& read)
{
    const TensorInfo& t = info.tensors[static_cast<std::size_t>(index)];
    auto planned = planTensorCopy(t, static_cast<std::size_t>(index), dtype);
    // Direct: every piece one contiguous run of the tensor, plain bytes, as the merge streams them.
    if (!planned || planned->mode != CopyMode::Direct || info.loraDeltaFor(t.name) || !kernelReads(planned->dtype))
        return std::nullopt;
    read = planned->dtype;
    const Shape strides = globalStrides(t.shape);
    std::vector<Run> runs;
    for (std::size_t i : planned->pieces) {
        const Piece& p = t.pieces[i];
        if (p.storedDtype != planned->dtype)
            return std::nullopt; // converted on its way: assembled
        Run run;
        run.first = elementOffset(p.offsets, strides);
        run.count = 1;
        for (auto extent : p.shape)
            run.count *= static_cast<std::uint64_t>(extent);
        run.offset = p.dataOffset;
        run.file = p.file;
        run.piece = i;
        runs.push_back(std::move(run));
    }
    std::sort(runs.begin(), runs.end(), [](const Run& l, const Run& r) { return l.first < r.first; });
    for (std::size_t i = 1; i < runs.size(); ++i)
        if (runs[i - 1].first + runs[i - 1].count > runs[i].first)
            return std::nullopt; // overlapping pieces: left to the assembly's rules
    return runs;
}

bool TensorValues::readsInPlace(const CheckpointInfo& info, int index, std::optional<DType> dtype)
{
    DType read = DType::Unknown;
    return inPlaceRuns(info, index, dtype, read).has_value();
}

Result<TensorValues> TensorValues::open(SourceFiles& files, const CheckpointInfo& info, int index,
                                        const std::function<bool()>& canceled, std::optional<DType> dtype, bool inPlace)
{
    TensorValues values;
    auto runs = inPlace ? inPlaceRuns(info, index, dtype, values.m_dtype) : std::nullopt;
    if (!runs) {
        const TensorInfo& t = info.tensors[static_cast<std::size_t>(index)];
        auto buffer = readWholeTensor(files, info, index, canceled, dtype);
        TESSERA_TRY(buffer);
        return inMemory(std::move(*buffer), convertedDtype(t.dtype, dtype));
    }
    const TensorInfo& t = info.tensors[static_cast<std::size_t>(index)];
    const std::size_t es = dtypeSize(values.m_dtype);
    for (Run& run : *runs) {
        const Piece& piece = t.pieces[run.piece];
        run.summed = piece.storageCrc32 && piece.storageBegin == piece.dataOffset
            && piece.storageBytes == run.count * es;
        if (!run.summed)
            TESSERA_TRY(files.verifyStorage(piece, canceled));
        run.fd = files.descriptor(run.file);
        if (run.fd < 0)
            return makeError(run.file + ": cannot be opened: " + std::strerror(errno));
    }
    values.m_runs = std::move(*runs);
    values.m_tensor = &t;
    values.m_files = &files;
    return values;
}

TensorValues TensorValues::inMemory(PageBuffer buffer, DType dtype)
{
    TensorValues values;
    values.m_buffer = std::move(buffer);
    values.m_dtype = dtype;
    return values;
}

ValueSpan TensorValues::span(const std::uint8_t* missing) const
{
    ValueSpan span;
    span.dtype = m_dtype;
    span.missing = missing;
    if (m_buffer.data())
        span.data = m_buffer.data();
    else
        span.load = [this](std::uint64_t first, std::uint64_t count, std::uint8_t* dst) { return load(first, count, dst); };
    return span;
}

/// Copies elements [first, first + count) from the runs holding them; an element no run holds (a gap, which the
/// comparison leaves out) reads as zeros, as the assembly leaves it.
Status TensorValues::load(std::uint64_t first, std::uint64_t count, std::uint8_t* dst) const
{
    const std::size_t es = dtypeSize(m_dtype);
    auto run = std::upper_bound(m_runs.begin(), m_runs.end(), first, [](std::uint64_t at, const Run& r) { return at < r.first; });
    if (run != m_runs.begin())
        --run;
    for (std::uint64_t at = first, end = first + count; at < end;) {
        while (run != m_runs.end() && run->first + run->count <= at)
            ++run;
        const std::uint64_t from = run == m_runs.end() ? end : std::max(at, std::min(run->first, end));
        std::memset(dst + (at - first) * es, 0, static_cast<std::size_t>((from - at) * es));
        if (from == end)
            break;
        const std::uint64_t to = std::min(end, run->first + run->count);
        const std::uint64_t bytes = (to - from) * es;
        auto got = readAt(run->fd, dst + (from - first) * es, bytes, run->offset + (from - run->first) * es);
        if (!got)
            return got.error().withContext(run->file);
        if (*got < bytes) // its bounds were checked when it was scanned: the file shrank since
            return m_files->changedError(run->file);
        if (run->summed) {
            const std::uint32_t crc = crc32Update(0, dst + (from - first) * es, static_cast<std::size_t>(bytes));
            std::lock_guard<std::mutex> lock(m_parts->mutex);
            m_parts->parts.push_back({ static_cast<std::size_t>(run - m_runs.begin()), from, to - from, crc });
        }
        at = to;
    }
    return Status::success();
}

Status TensorValues::verify(const std::function<bool()>& canceled) const
{
    std::vector<Part> parts;
    {
        std::lock_guard<std::mutex> lock(m_parts->mutex);
        parts = m_parts->parts;
    }
    std::sort(parts.begin(), parts.end(), [](const Part& l, const Part& r) { return l.first < r.first; });
    const std::size_t es = dtypeSize(m_dtype);
    auto part = parts.begin();
    for (std::size_t i = 0; i < m_runs.size(); ++i) {
        const Run& run = m_runs[i];
        if (!run.summed)
            continue;
        // The parts of one run tile it in order when every block was read once.
        std::uint32_t crc = 0;
        std::uint64_t next = run.first;
        for (; part != parts.end() && part->run == i && part->first == next; ++part) {
            crc = crc32Combine(crc, part->crc, part->count * es);
            next += part->count;
        }
        while (part != parts.end() && part->run == i)
            ++part;
        const Piece& piece = m_tensor->pieces[run.piece];
        if (next != run.first + run.count)
            TESSERA_TRY(m_files->verifyStorage(piece, canceled));
        else if (crc != *piece.storageCrc32)
            return ZipArchive::crcMismatch(piece.file, piece.storageRecord, *piece.storageCrc32, crc);
    }
    return Status::success();
}

} // namespace tessera
