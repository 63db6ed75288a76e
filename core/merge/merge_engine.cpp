// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/merge_engine.h"
#include "io/printable.h"

#include "merge/box_copy.h"
#include "merge/encoded_piece.h"
#include "model/convert.h"
#include "merge/hf_output.h"
#include "merge/lora_fuse.h"
#include "publish/staged_run.h"
#include "publish/target_checks.h"
#include "io/durable_file.h"
#include "io/guarded_read.h"
#include "io/path_kinds.h"
#include "io/regular_file.h"
#include "parallel.h"
#include "model/placement.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr std::uint64_t kCopyChunk = 64u << 20; ///< copy_file_range call size: large, but cancel stays responsive

/// One slab of a piece: a block of its dim-0 rows small enough that its source pages can be dropped after use.
struct Slab {
    Shape shape;
    Shape globalOffsets;
    std::uint64_t srcElement = 0;    ///< its first stored element, from the piece's first
    std::uint64_t srcByteOffset = 0; ///< from the piece's first element
    std::uint64_t spanBytes = 0;
};

/// Bytes from a piece's first element to the end of its box `shape` (an encoded box ends at a block's end).
std::uint64_t pieceSpanBytes(const Piece& p, const Shape& shape, const Shape& strides)
{
    return storedByteOffset(p, boxSpanBytes(shape, strides, 1));
}

std::vector<Slab> slabsOf(const Piece& p)
{
    std::vector<Slab> slabs;
    if (p.shape.empty()) {
        slabs.push_back({ {}, {}, 0, 0, storedByteOffset(p, 1) });
        return slabs;
    }
    const Shape rowShape(p.shape.begin() + 1, p.shape.end()), rowStrides(p.strides.begin() + 1, p.strides.end());
    // An encoded slab is decoded to float32 whole (decodePieceElements), so that is the size that counts for it.
    const std::uint64_t rowSpan = std::max<std::uint64_t>(1, p.encoding == PieceEncoding::Plain
            ? pieceSpanBytes(p, rowShape, rowStrides)
            : boxSpanBytes(rowShape, rowStrides, sizeof(float)));
    const std::int64_t rows = p.shape[0];
    std::int64_t perSlab = std::max<std::int64_t>(1, static_cast<std::int64_t>(kMergeChunkBytes / rowSpan));
    const auto block = static_cast<std::int64_t>(blockElements(p));
    if (block > 1 && p.shape.size() == 1) // a vector's slabs must still be whole blocks
        perSlab = std::max<std::int64_t>(block, perSlab / block * block);
    for (std::int64_t r0 = 0; r0 < rows; r0 += perSlab) {
        Slab s;
        s.shape = p.shape;
        s.shape[0] = std::min(perSlab, rows - r0);
        s.globalOffsets = p.offsets;
        s.globalOffsets[0] += r0;
        s.srcElement = static_cast<std::uint64_t>(r0 * p.strides[0]);
        s.srcByteOffset = storedByteOffset(p, s.srcElement);
        s.spanBytes = pieceSpanBytes(p, s.shape, p.strides);
        slabs.push_back(std::move(s));
    }
    return slabs;
}

Status checkBounds(const MappedFile& file, const MappedFile* scales, const Piece& p, const std::string& tensor)
{
    const std::uint64_t span = pieceSpanBytes(p, p.shape, p.strides);
    if (p.dataOffset > file.size() || span > file.size() - p.dataOffset)
        return pastEndError(p.file, tensor + ": the piece " + boxText(p.offsets, p.shape), file.size());
    return checkScaleBounds(p, boxSpanBytes(p.shape, p.strides, 1), scales, tensor);
}

struct OutputFile {
    std::string path;
    int fd = -1;
    std::size_t index = 0;                                 ///< in MergePlan::files
    const MergeRunOptions* options = nullptr;              ///< for onTensorBytes
    ~OutputFile()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

/// Writes tensor bytes at `offset` of `out` and tells MergeRunOptions::onTensorBytes.
Status writeTensorBytes(const OutputFile& out, const std::uint8_t* data, std::uint64_t length, std::uint64_t offset,
                        const std::string& what)
{
    TESSERA_TRY(writeAllAt(out.fd, data, length, offset, what));
    if (!out.options || out.options->sync)
        startWriteback(out.fd, offset, length);
    if (out.options && out.options->onTensorBytes)
        out.options->onTensorBytes(out.index, offset, data, length);
    return Status::success();
}

/// Compares a Replica piece with the Primary piece of the same box, run by run, in the stored bytes.
Status verifyReplica(SourceFiles& files, const TensorInfo& t, const Piece& replica, const Piece& primary,
                     const std::function<bool()>& canceled)
{
    auto a = files.map(replica.file);
    TESSERA_TRY(a);
    auto b = files.map(primary.file);
    TESSERA_TRY(b);
    TESSERA_TRY(checkBounds(**a, nullptr, replica, t.name));
    TESSERA_TRY(checkBounds(**b, nullptr, primary, t.name));
    if (replica.storedDtype != primary.storedDtype)
        return makeError(printableText(t.name) + ": replica on rank " + std::to_string(replica.rank) + " is "
                         + std::string(torchName(replica.storedDtype)) + " but rank " + std::to_string(primary.rank)
                         + " holds " + std::string(torchName(primary.storedDtype)));
    const std::size_t es = dtypeSize(replica.storedDtype);
    const std::uint8_t* ra = (*a)->view().data() + replica.dataOffset;
    const std::uint8_t* pb = (*b)->view().data() + primary.dataOffset;
    if (canceled && canceled())
        return canceledError();
    bool equal = true;
    std::uint64_t firstDiff = 0;
    TESSERA_TRY(files.guardedRead(replica.file, [&] {
        forEachRun(replica.shape, replica.strides, primary.strides, [&](std::uint64_t s, std::uint64_t d, std::uint64_t n) {
            if (equal && std::memcmp(ra + s * es, pb + d * es, n * es) != 0) {
                equal = false;
                firstDiff = d;
            }
        });
    }, primary.file));
    (*a)->adviseDontNeed(replica.dataOffset, boxSpanBytes(replica.shape, replica.strides, es));
    (*b)->adviseDontNeed(primary.dataOffset, boxSpanBytes(primary.shape, primary.strides, es));
    if (!equal)
        return makeError(printableText(t.name) + ": the replica of " + boxText(replica.offsets, replica.shape)
                         + " on rank "
                         + std::to_string(replica.rank) + " (" + replica.file + ") differs from rank "
                         + std::to_string(primary.rank) + " (" + primary.file + ") near element "
                         + std::to_string(firstDiff) + " of the piece; the replicas diverged during training");
    return Status::success();
}

/// Writes `length` bytes of a piece stored as they are written, from `done` bytes into it, through memory:
/// read with pread rather than from the mapping, so a source truncated meanwhile is a short read, not a SIGBUS
/// (MergeRunOptions::onTensorBytes sees the bytes on their way).
Status writeDirectThroughMemory(SourceFiles& files, const TensorInfo& t, const Piece& p, const OutputFile& out,
                                std::uint64_t outOffset, std::uint64_t done, std::uint64_t length,
                                const std::function<void(std::uint64_t)>& addBytes, const std::function<bool()>& canceled)
{
    const int fd = files.descriptor(p.file);
    if (fd < 0)
        return makeError(p.file + ": cannot be opened: " + std::strerror(errno));
    std::unique_ptr<std::uint8_t[]> staging(new std::uint8_t[static_cast<std::size_t>(std::min(length, kMergeChunkBytes))]);
    const std::string what = out.path + ": " + t.name;
    for (std::uint64_t at = 0; at < length;) {
        if (canceled && canceled())
            return canceledError();
        const std::uint64_t n = std::min(length - at, kMergeChunkBytes);
        const std::uint64_t from = p.dataOffset + done + at;
        auto got = readAt(fd, staging.get(), n, from);
        if (!got)
            return got.error().withContext(p.file + ": " + t.name);
        if (*got < n) // its bounds were checked when it was read: the file shrank since
            return files.changedError(p.file);
        ::posix_fadvise(fd, static_cast<off_t>(from), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
        TESSERA_TRY(writeTensorBytes(out, staging.get(), n, outOffset + at, what));
        at += n;
        addBytes(n);
    }
    return Status::success();
}

/// Streams one piece that is a contiguous range of the output straight into the file.
Status writeDirectPiece(SourceFiles& files, const TensorInfo& t, const PlannedTensor& planned, const Piece& p,
                        const OutputFile& out, const std::function<void(std::uint64_t)>& addBytes,
                        const std::function<bool()>& canceled)
{
    const std::size_t inSize = dtypeSize(p.storedDtype);
    const std::size_t outSize = dtypeSize(planned.dtype);
    const std::uint64_t count = shapeNumel(p.shape);
    const std::uint64_t outOffset = planned.fileOffset + elementOffset(p.offsets, globalStrides(t.shape)) * outSize;
    const std::string what = out.path + ": " + t.name;
    // The bytes may go in-kernel (copy_file_range) and a piece may be only part of its record, so the record is
    // checked whole, once, before the copy.
    TESSERA_TRY(files.verifyStorage(p, canceled));
    if (p.storedDtype == planned.dtype) {
        const std::uint64_t length = count * outSize;
        std::uint64_t done = 0;
        // In-kernel copy: no page of the source is mapped into this process at all (unless the bytes are to be
        // seen on their way, MergeRunOptions::onTensorBytes).
        const int sfd = out.options && out.options->onTensorBytes ? -1 : files.descriptor(p.file);
        while (sfd >= 0 && done < length) {
            if (canceled && canceled())
                return canceledError();
            loff_t inOff = static_cast<loff_t>(p.dataOffset + done);
            loff_t outOff = static_cast<loff_t>(outOffset + done);
            const ssize_t n = ::copy_file_range(sfd, &inOff, out.fd, &outOff, std::min(length - done, kCopyChunk), 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP
                              || errno == EBADF || errno == EPERM))
                    break; // not supported between these files: fall back to writing from the mapping
                if (n == 0) // its bounds were checked when it was read: the file shrank since
                    return files.changedError(p.file);
                return makeError(what + ": copy failed: " + std::strerror(errno));
            }
            if (!out.options || out.options->sync)
                startWriteback(out.fd, static_cast<std::uint64_t>(outOff) - static_cast<std::uint64_t>(n),
                               static_cast<std::uint64_t>(n));
            done += static_cast<std::uint64_t>(n);
            addBytes(static_cast<std::uint64_t>(n));
        }
        if (done == length)
            return Status::success();
        auto map = files.map(p.file);
        TESSERA_TRY(map);
        TESSERA_TRY(checkBounds(**map, nullptr, p, t.name));
        return writeDirectThroughMemory(files, t, p, out, outOffset + done, done, length - done, addBytes, canceled);
    }
    auto map = files.map(p.file);
    TESSERA_TRY(map);
    TESSERA_TRY(checkBounds(**map, nullptr, p, t.name));
    const std::uint8_t* base = (*map)->view().data() + p.dataOffset;
    const std::uint64_t perChunk = std::max<std::uint64_t>(1, kMergeChunkBytes / std::max(inSize, outSize));
    std::vector<std::uint8_t> staging(static_cast<std::size_t>(std::min(perChunk, count) * outSize));
    for (std::uint64_t first = 0; first < count; first += perChunk) {
        if (canceled && canceled())
            return canceledError();
        const std::uint64_t n = std::min(perChunk, count - first);
        (*map)->adviseWillNeed(p.dataOffset + first * inSize, n * inSize);
        Status converted;
        TESSERA_TRY(files.guardedRead(p.file, [&] {
            converted = convertElements(base + first * inSize, p.storedDtype, staging.data(), planned.dtype, n);
        }));
        if (!converted)
            return converted.error().withContext(p.file + ": " + t.name);
        TESSERA_TRY(writeTensorBytes(out, staging.data(), n * outSize, outOffset + first * outSize, what));
        (*map)->adviseDontNeed(p.dataOffset + first * inSize, n * inSize);
        addBytes(n * outSize);
    }
    return Status::success();
}

/// How a tied, dropped lm_head differs from the embedding that replaces it; empty when it equals it.
Result<std::string> checkTie(SourceFiles& files, const CheckpointInfo& info, const TieCheck& tie, MemoryBudget& budget,
                             const std::function<bool()>& canceled)
{
    const TensorInfo& dropped = info.tensors[tie.dropped];
    const TensorInfo& kept = info.tensors[tie.kept];
    if (dropped.shape != kept.shape || dropped.dtype != kept.dtype)
        return printableText(dropped.name) + " (" + std::string(torchName(dropped.dtype)) + " "
            + boxText(Shape(dropped.shape.size(), 0), dropped.shape) + ") differs in shape or dtype from "
            + printableText(kept.name) + " (" + std::string(torchName(kept.dtype)) + " "
            + boxText(Shape(kept.shape.size(), 0), kept.shape) + ")";
    auto a = planTensorCopy(dropped, tie.dropped, std::nullopt);
    TESSERA_TRY(a);
    auto b = planTensorCopy(kept, tie.kept, std::nullopt);
    TESSERA_TRY(b);
    const std::uint64_t held = budget.acquire(a->bytes * 2);
    struct Release {
        MemoryBudget& b;
        std::uint64_t n;
        ~Release() { b.release(n); }
    } release { budget, held };
    auto bufA = PageBuffer::allocate(a->bytes);
    TESSERA_TRY(bufA);
    TESSERA_TRY(materializeTensor(files, dropped, *a, bufA->data(), canceled));
    auto bufB = PageBuffer::allocate(b->bytes);
    TESSERA_TRY(bufB);
    TESSERA_TRY(materializeTensor(files, kept, *b, bufB->data(), canceled));
    if (std::memcmp(bufA->data(), bufB->data(), a->bytes) != 0)
        return printableText(dropped.name) + " differs from " + printableText(kept.name);
    return std::string();
}

} // namespace

Status checkTiedHead(SourceFiles& files, const CheckpointInfo& info, const MergePlan& plan, const TieCheck& tie,
                     MemoryBudget& budget, const std::function<bool()>& canceled)
{
    auto difference = checkTie(files, info, tie, budget, canceled);
    TESSERA_TRY(difference);
    if (difference->empty())
        return Status::success();
    if (tie.forced)
        return makeError(*difference + " and config.json says the embeddings are not tied: --tie-word-embedding "
                         "would replace the trained output head with the embedding. Merge without it");
    // A tied head that differs from the embedding was trained on its own: dropping it would lose it.
    const std::string& configDir = plan.config.path.empty() ? info.hfConfigDir : plan.config.path;
    const std::string config = configDir.empty() ? std::string("config.json")
                                                 : printableText((fs::path(configDir) / "config.json").string());
    return makeError(*difference + ", but " + config + " says tie_word_embeddings is true, so the merged model "
                     "would use the embedding as its output head and the trained " + printableText(info.tensors[tie.dropped].name)
                     + " would be lost. The model was trained with a head of its own: set \"tie_word_embeddings\": "
                       "false in that config.json (or give --hf_model_path a folder whose config.json says so) and "
                       "merge again");
}

bool isCanceled(const MergeRunOptions& options)
{
    return (options.progress && options.progress->isCanceled())
        || (options.cancel && options.cancel->load(std::memory_order_relaxed));
}

namespace {

/// Reads one slab of a piece (from its mapping at `base`, an MXFP4 piece's scales at `scaleBase`) into its
/// place in `dst`, converted to `dtype`, or into the fp32 accumulator `acc` of a Sum. `decoded`/`converted` are
/// buffers kept across slabs. Only memory is touched, so it can run inside a guarded read.
Status readSlab(const Piece& p, const Slab& slab, const std::uint8_t* base, const std::uint8_t* scaleBase,
                const Shape& gstr, DType dtype, std::uint8_t* dst, float* acc, std::vector<float>& decoded,
                std::vector<std::uint8_t>& converted)
{
    const std::size_t outSize = dtypeSize(dtype);
    const std::uint64_t dstBase = elementOffset(slab.globalOffsets, gstr);
    const std::uint8_t* src = base + slab.srcByteOffset;
    DType srcDtype = p.storedDtype;
    if (p.encoding != PieceEncoding::Plain) {
        // Decoded in stored order, then read like a plain piece with the same strides.
        const std::uint64_t span = boxSpanBytes(slab.shape, p.strides, 1);
        const bool convert = !acc && dtype != DType::Float32;
        auto status = decodePieceElements(p, base, scaleBase, slab.srcElement, span, decoded);
        if (status && convert) {
            converted.resize(static_cast<std::size_t>(span * outSize));
            status = convertElements(decoded.data(), DType::Float32, converted.data(), dtype, span);
        }
        if (!status)
            return status;
        src = convert ? converted.data() : reinterpret_cast<const std::uint8_t*>(decoded.data());
        srcDtype = convert ? dtype : DType::Float32;
    }
    if (!acc && srcDtype == dtype) {
        // Bytes as they are: copied run by run, or line by line when the box is transposed.
        copyBox(src, p.strides, slab.shape, outSize, dst + dstBase * outSize, gstr);
        return Status::success();
    }
    const std::size_t srcSize = dtypeSize(srcDtype);
    Status status;
    forEachRun(slab.shape, p.strides, gstr, [&](std::uint64_t s, std::uint64_t d, std::uint64_t n) {
        if (!status)
            return;
        const std::uint8_t* run = src + s * srcSize;
        if (acc && p.role == PieceRole::PartialTerm)
            status = accumulatePartial(acc + dstBase + d, run, srcDtype, n);
        else if (acc)
            status = convertElements(run, srcDtype, acc + dstBase + d, DType::Float32, n);
        else
            status = convertElements(run, srcDtype, dst + (dstBase + d) * outSize, dtype, n);
    });
    return status;
}

} // namespace

// ---------------------------------------------------------------------------------------------------------------

MemoryBudget::MemoryBudget(std::uint64_t capacity)
    : m_capacity(std::max<std::uint64_t>(capacity, 1)), m_available(m_capacity)
{
}

std::uint64_t MemoryBudget::acquire(std::uint64_t bytes)
{
    bytes = std::min(bytes, m_capacity);
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [&] { return m_available >= bytes; });
    m_available -= bytes;
    return bytes;
}

void MemoryBudget::release(std::uint64_t bytes)
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_available += bytes;
    }
    m_cv.notify_all();
}

Result<PageBuffer> PageBuffer::allocate(std::uint64_t bytes)
{
    PageBuffer buffer;
    if (bytes == 0)
        return buffer;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return makeError("cannot allocate " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    // Huge pages where the system allows them: a tensor's buffer is touched once, page by page, and a fault per 4 KiB
    // page made filling it cost more than reading the checkpoint (0.3 GB/s on a virtual machine, against 8.5 GB/s
    // in 2 MiB pages; bench_diff --shard_dim 1, which assembles every tensor).
    ::madvise(p, bytes, MADV_HUGEPAGE);
    buffer.m_data = static_cast<std::uint8_t*>(p);
    buffer.m_size = bytes;
    return buffer;
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept : m_data(other.m_data), m_size(other.m_size)
{
    other.m_data = nullptr;
    other.m_size = 0;
}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept
{
    if (this != &other) {
        if (m_data)
            ::munmap(m_data, m_size);
        m_data = other.m_data;
        m_size = other.m_size;
        other.m_data = nullptr;
        other.m_size = 0;
    }
    return *this;
}

PageBuffer::~PageBuffer()
{
    if (m_data)
        ::munmap(m_data, m_size);
}

Status materializeTensor(SourceFiles& files, const TensorInfo& t, const PlannedTensor& planned, std::uint8_t* dst,
                         const std::function<bool()>& canceled)
{
    if (planned.delta)
        return materializeFused(files, t, planned, dst, canceled);
    const Shape gstr = globalStrides(t.shape);
    PageBuffer accumulator;
    float* acc = nullptr;
    if (planned.mode == CopyMode::Sum) {
        auto buffer = PageBuffer::allocate(shapeNumel(t.shape) * sizeof(float));
        TESSERA_TRY(buffer);
        accumulator = std::move(*buffer);
        acc = reinterpret_cast<float*>(accumulator.data());
    }
    for (std::size_t index : planned.pieces) {
        const Piece& p = t.pieces[index];
        TESSERA_TRY(files.verifyStorage(p, canceled));
        auto map = files.map(p.file);
        TESSERA_TRY(map);
        std::shared_ptr<MappedFile> scaleMap; // an MXFP4 piece's scale bytes
        if (p.encoding == PieceEncoding::MXFP4) {
            auto scales = files.map(p.scaleFile);
            TESSERA_TRY(scales);
            scaleMap = *scales;
        }
        TESSERA_TRY(checkBounds(**map, scaleMap.get(), p, t.name));
        const std::uint8_t* base = (*map)->view().data() + p.dataOffset;
        const std::uint8_t* scaleBase = scaleMap ? scaleMap->view().data() + p.scaleOffset : nullptr;
        std::vector<float> decoded;          // a slab of an encoded piece, decoded
        std::vector<std::uint8_t> converted; // …and converted to the output dtype
        for (const Slab& slab : slabsOf(p)) {
            if (canceled && canceled())
                return canceledError();
            (*map)->adviseWillNeed(p.dataOffset + slab.srcByteOffset, slab.spanBytes);
            // The slab's reads of the mapping, guarded: a source truncated meanwhile is an error, not a SIGBUS.
            Status status;
            TESSERA_TRY(files.guardedRead(p.file, [&] {
                status = readSlab(p, slab, base, scaleBase, gstr, planned.dtype, dst, acc, decoded, converted);
            }, p.scaleFile));
            if (!status)
                return status.error().withContext(p.file + ": " + t.name);
            (*map)->adviseDontNeed(p.dataOffset + slab.srcByteOffset, slab.spanBytes);
        }
    }
    if (acc) {
        auto status = convertElements(acc, DType::Float32, dst, planned.dtype, shapeNumel(t.shape));
        if (!status)
            return status.error().withContext(t.name);
    }
    return Status::success();
}

namespace {

/// Phase: output files. Creates and sizes each file the run writes into (`fileUsed`); the others get an entry
/// with no descriptor, so the list stays indexed like MergePlan::files.
Result<std::vector<std::unique_ptr<OutputFile>>> openOutputFiles(const MergePlan& plan, const std::string& dir,
                                                                 const MergeRunOptions& options,
                                                                 const std::vector<bool>& fileUsed)
{
    const bool partial = options.onlyTensors != nullptr;
    std::vector<std::unique_ptr<OutputFile>> outputs;
    for (std::size_t fileIndex = 0; fileIndex < plan.files.size(); ++fileIndex) {
        const auto& f = plan.files[fileIndex];
        auto out = std::make_unique<OutputFile>();
        out->path = (fs::path(dir) / f.name).string();
        out->index = fileIndex;
        out->options = &options;
        if (!fileUsed[fileIndex]) {
            outputs.push_back(std::move(out));
            continue;
        }
        // Never through a link: the folder is the run's own, and a link there was not put there by it.
        out->fd = ::open(out->path.c_str(), O_WRONLY | O_CREAT | (partial ? 0 : O_TRUNC) | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (out->fd < 0)
            return makeError(out->path + ": cannot be created: " + std::strerror(errno));
        // The header is written last (finishOutputFiles): a file cut short by a crash or a kill has none, so it can
        // never pass for a complete model.
        if (::ftruncate(out->fd, static_cast<off_t>(f.size)) != 0)
            return makeError(out->path + ": cannot be sized to " + std::to_string(f.size) + " bytes: "
                             + std::strerror(errno));
        outputs.push_back(std::move(out));
    }
    return outputs;
}

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

/// One unit of the parallel copy.
struct WorkItem {
    std::size_t tensor;
    std::size_t piece;   ///< index into TensorInfo::pieces; kNone = whole tensor
    std::size_t replica; ///< index into PlannedTensor::replicas; kNone = not a replica check
};

/// The run's work items, and per tensor how many are left before it is done.
struct WorkItems {
    std::vector<WorkItem> items;
    std::unique_ptr<std::atomic<std::size_t>[]> remaining; ///< per plan tensor
    std::size_t emptyTensors = 0;                          ///< selected tensors with no item (nothing to copy)
    std::uint64_t selectedBytes = 0;
    std::size_t selectedTensors = 0;
};

/// Phase: work items. Every piece of a Direct tensor on its own (large tensors spread over threads), one item per
/// Gather/Sum tensor, one per replica check. Positions in the files are fixed by the plan, so the bytes written do
/// not depend on the order items finish in.
WorkItems listWorkItems(const MergePlan& plan, const MergeRunOptions& options, const std::vector<bool>& selected)
{
    WorkItems work;
    work.remaining.reset(new std::atomic<std::size_t>[plan.tensors.size()]);
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
        const auto& t = plan.tensors[i];
        std::size_t n = 0;
        if (!selected[i]) {
            work.remaining[i].store(0);
            continue;
        }
        work.selectedBytes += t.bytes;
        ++work.selectedTensors;
        if (t.mode == CopyMode::Direct && !t.delta) {
            for (auto p : t.pieces)
                work.items.push_back({ i, p, kNone }), ++n;
        } else if (!t.pieces.empty()) {
            work.items.push_back({ i, kNone, kNone }), ++n;
        }
        if (options.verifyReplicas)
            for (std::size_t r = 0; r < t.replicas.size(); ++r)
                work.items.push_back({ i, kNone, r }), ++n;
        work.remaining[i].store(n);
        if (n == 0)
            ++work.emptyTensors;
    }
    return work;
}

/// The run's progress, told to MergeRunOptions' progress and onProgress as items finish on any thread.
class ProgressReporter {
public:
    ProgressReporter(const MergePlan& plan, const MergeRunOptions& options, const WorkItems& work)
        : m_plan(plan), m_options(options)
    {
        m_state.bytesTotal = work.selectedBytes;
        m_state.tensorsTotal = work.selectedTensors;
        m_state.tensorsDone = work.emptyTensors;
    }

    void report(std::uint64_t bytes, std::size_t tensor, bool finished)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_state.bytesDone += bytes;
        m_state.tensorsDone += finished ? 1 : 0;
        m_state.currentTensor = m_plan.tensors[tensor].name;
        if (m_options.progress)
            m_options.progress->report(m_state.bytesDone, m_state.bytesTotal,
                                       std::to_string(m_state.tensorsDone) + "/" + std::to_string(m_state.tensorsTotal)
                                           + " tensors  " + m_state.currentTensor);
        if (m_options.onProgress)
            m_options.onProgress(m_state);
    }

private:
    const MergePlan& m_plan;
    const MergeRunOptions& m_options;
    std::mutex m_mutex;
    MergeProgress m_state;
};

/// What every work item of a run shares.
struct ItemContext {
    const CheckpointInfo& info;
    const MergePlan& plan;
    const std::vector<std::unique_ptr<OutputFile>>& outputs;
    SourceFiles& sources;
    MemoryBudget& budget;
    ProgressReporter& progress;
    const std::function<bool()>& stop;
};

/// Runs one work item: a replica check, a Direct piece streamed into place, or a whole tensor assembled in a buffer
/// held against the budget and written.
Status runWorkItem(const WorkItem& item, ItemContext& run)
{
    const PlannedTensor& planned = run.plan.tensors[item.tensor];
    const TensorInfo& tensor = run.info.tensors[planned.source];
    const OutputFile& out = *run.outputs[planned.file];
    Status status;
    if (item.replica != kNone) {
        const auto& [rep, prim] = planned.replicas[item.replica];
        status = verifyReplica(run.sources, tensor, tensor.pieces[rep], tensor.pieces[prim], run.stop);
    } else if (item.piece != kNone) {
        status = writeDirectPiece(run.sources, tensor, planned, tensor.pieces[item.piece], out,
                                  [&](std::uint64_t n) { run.progress.report(n, item.tensor, false); }, run.stop);
    } else {
        const std::uint64_t held = run.budget.acquire(planned.bufferBytes);
        auto buffer = PageBuffer::allocate(planned.bytes);
        if (!buffer)
            status = buffer.error().withContext(tensor.name);
        else if ((status = materializeTensor(run.sources, tensor, planned, buffer->data(), run.stop)))
            status = writeTensorBytes(out, buffer->data(), planned.bytes, planned.fileOffset, out.path + ": " + tensor.name);
        buffer = PageBuffer();
        run.budget.release(held);
        if (status)
            run.progress.report(planned.bytes, item.tensor, false);
    }
    return status;
}

/// Phase: finish. Each file the run opened gets its header (last: see openOutputFiles) when the run finishes the
/// output, is flushed when asked to and closed, each failure an error naming the file.
Status finishOutputFiles(std::vector<std::unique_ptr<OutputFile>>& outputs, const MergePlan& plan,
                         const MergeRunOptions& options)
{
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        auto& out = outputs[i];
        if (out->fd < 0)
            continue;
        const std::string& header = plan.files[i].header;
        if (options.writeFinish)
            TESSERA_TRY(writeAllAt(out->fd, reinterpret_cast<const std::uint8_t*>(header.data()), header.size(), 0,
                                  out->path));
        if (options.sync && ::fdatasync(out->fd) != 0)
            return makeError(out->path + ": cannot be flushed to disk: " + std::strerror(errno));
        const int fd = out->fd;
        out->fd = -1;
        if (::close(fd) != 0)
            return makeError(out->path + ": cannot be closed: " + std::strerror(errno));
    }
    return Status::success();
}

/// The files beside the weights a finishing run writes: the shard index, the config folder's side files (edited as
/// the plan says) and the generated files.
Status writeSideFiles(const MergePlan& plan, const std::string& dir, const MergeRunOptions& options)
{
    if (options.writeFinish && !plan.indexJson.empty())
        TESSERA_TRY(writeFileSynced((fs::path(dir) / "model.safetensors.index.json").string(), plan.indexJson));
    if (options.writeFinish)
        TESSERA_TRY(copyHfSideFiles(plan.config, dir, plan.configEdits()));
    for (const auto& [name, content] : options.writeFinish ? plan.generatedFiles : decltype(plan.generatedFiles)())
        TESSERA_TRY(writeFileSynced((fs::path(dir) / name).string(), content));
    return Status::success();
}

} // namespace

Result<MergeOutcome> writeMergedFiles(const CheckpointInfo& info, const MergePlan& plan, const std::string& dir,
                                      const MergeRunOptions& options)
{
    const auto start = std::chrono::steady_clock::now();
    MergeOutcome outcome;
    outcome.outputDir = dir;
    outcome.files = plan.outputFileNames();
    auto canceled = [&] { return isCanceled(options); };

    // A part of a split merge writes only its tensors, into the files they lie in; see MergeRunOptions.
    const bool partial = options.onlyTensors != nullptr;
    if (partial && options.onlyTensors->size() != plan.tensors.size())
        return makeError("internal: the tensor selection does not match the plan");
    std::vector<bool> selected(plan.tensors.size(), true);
    if (partial)
        selected = *options.onlyTensors;
    std::vector<bool> fileUsed(plan.files.size(), options.writeFinish);
    for (std::size_t i = 0; i < plan.tensors.size(); ++i)
        if (selected[i] && plan.tensors[i].file < fileUsed.size())
            fileUsed[plan.tensors[i].file] = true;
    auto outputs = openOutputFiles(plan, dir, options, fileUsed);
    TESSERA_TRY(outputs);

    const WorkItems work = listWorkItems(plan, options, selected);
    ProgressReporter progress(plan, options, work);
    SourceFiles sources;
    MemoryBudget budget(plan.bufferBytes);
    std::mutex errorMutex;
    std::optional<Error> firstError;
    std::atomic<bool> failed { false };
    const std::function<bool()> stop = [&] { return failed.load() || canceled(); };
    ItemContext run { info, plan, *outputs, sources, budget, progress, stop };
    parallelFor(work.items.size(), resolveThreads(static_cast<int>(options.threads)), [&](std::size_t k) {
        if (stop())
            return;
        const WorkItem& item = work.items[k];
        Status status = runWorkItem(item, run);
        if (!status) {
            std::lock_guard<std::mutex> lock(errorMutex);
            if (!firstError && !status.error().isCanceled())
                firstError = status.error();
            failed = true;
            return;
        }
        if (--work.remaining[item.tensor] == 0)
            progress.report(0, item.tensor, true);
    });
    if (firstError)
        return *firstError;
    if (canceled() || failed)
        return canceledError();

    for (const auto& tie : options.writeFinish ? plan.tieChecks : std::vector<TieCheck>())
        TESSERA_TRY(checkTiedHead(sources, info, plan, tie, budget, stop));
    TESSERA_TRY(finishOutputFiles(*outputs, plan, options));
    TESSERA_TRY(writeSideFiles(plan, dir, options));
    if (canceled())
        return canceledError();
    outcome.bytesWritten = work.selectedBytes;
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return outcome;
}

Result<MergeOutcome> mergeCheckpoints(const std::vector<MergeOutput>& outputs, const std::string& targetDir,
                                      const MergeRunOptions& options)
{
    if (outputs.empty())
        return makeError("internal: nothing to merge");
    const MergeOutput* top = nullptr;
    for (const auto& o : outputs)
        if (o.subfolder.empty())
            top = &o;
    TESSERA_TRY(checkTarget(targetDir, top ? top->plan->outputFileNames() : std::vector<std::string>()));
    // Folders of dead runs go before the checks: they hold disk space the checks count.
    auto run = StagedRun::begin(targetDir, "merge", [&] { return checkMergeTargets(outputs, targetDir); },
                                options.onNote);
    TESSERA_TRY(run);
    MergeOutcome total;
    const auto start = std::chrono::steady_clock::now();
    for (const auto& o : outputs) {
        std::string dir = run->path();
        if (!o.subfolder.empty()) {
            dir = (fs::path(dir) / o.subfolder).string();
            if (::mkdir(dir.c_str(), 0755) != 0)
                return makeError(dir + ": cannot be created: " + std::strerror(errno));
        }
        auto outcome = writeMergedFiles(*o.info, *o.plan, dir, options);
        if (!outcome && !outcome.error().isCanceled())
            return makeError(outcome.error().message + " (nothing was written to " + run->target()
                             + "; the temporary folder is removed)");
        TESSERA_TRY(outcome);
        for (const auto& f : outcome->files)
            total.files.push_back(o.subfolder.empty() ? f : o.subfolder + "/" + f);
        total.bytesWritten += outcome->bytesWritten;
        total.warnings.insert(total.warnings.end(), outcome->warnings.begin(), outcome->warnings.end());
        if (!o.subfolder.empty())
            TESSERA_TRY(syncFolder(dir));
    }
    if (options.beforePublish) {
        auto added = options.beforePublish(run->path(), total.files);
        TESSERA_TRY(added);
        total.files.insert(total.files.end(), added->begin(), added->end());
    }
    // What makes the folder a loadable model goes in last: the index (or the single file), then config.json.
    std::vector<std::string> keystones;
    if (top && !top->plan->indexJson.empty())
        keystones.push_back("model.safetensors.index.json");
    else if (top && !top->plan->files.empty())
        keystones.push_back(top->plan->files.front().name);
    keystones.push_back("config.json");
    TESSERA_TRY(run->publish(total.files, keystones));
    total.outputDir = run->target();
    total.notes = run->notes();
    total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return total;
}

Result<MergeOutcome> mergeCheckpoint(const CheckpointInfo& info, const MergePlan& plan, const std::string& targetDir,
                                     const MergeRunOptions& options)
{
    return mergeCheckpoints({ MergeOutput { &info, &plan, "" } }, targetDir, options);
}

} // namespace tessera
