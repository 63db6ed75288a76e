// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/gguf_parts.h"
#include "io/printable.h"

#include "formats/gguf_file.h"
#include "io/durable_file.h"
#include "io/fnv_hash.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

/// The GGUF file in the merge engine's terms, with every tensor a part writes: the streamed ones (GgufPlan::merge)
/// and the quantized ones (GgufPlan::quantized), each `bytes` long up to the next tensor's aligned offset.
struct GgufParts::View {
    MergePlan plan;
    struct Origin {
        bool quantized = false;
        std::size_t index = 0;         ///< into GgufPlan::merge.tensors or GgufPlan::quantized
        std::uint64_t dataBytes = 0;   ///< the tensor's own bytes; the rest up to `bytes` is zero padding
    };
    std::vector<Origin> origins;       ///< per plan tensor
};

namespace {

std::uint64_t alignedEnd(std::uint64_t offset, std::uint64_t bytes)
{
    const std::uint64_t end = offset + bytes;
    return (end + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment;
}

/// Writes the zero padding after each selected tensor and tells `run.onTensorBytes`, so the blocks a part
/// reports tile its ranges and its CRC-32s need no read-back. The bytes are zero in every file anyway (sized with
/// ftruncate and never written otherwise); writing them makes a part's ranges its own.
Status writePadding(const GgufParts::View& view, const std::string& path, const MergeRunOptions& run)
{
    static const std::uint8_t zeros[kGgufAlignment] = {};
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return makeError(path + ": cannot be opened for writing: " + std::strerror(errno));
    Status status;
    for (std::size_t i = 0; status && i < view.plan.tensors.size(); ++i) {
        if (!(*run.onlyTensors)[i])
            continue;
        const PlannedTensor& t = view.plan.tensors[i];
        const std::uint64_t pad = t.bytes - view.origins[i].dataBytes;
        if (pad == 0)
            continue;
        const std::uint64_t at = t.fileOffset + view.origins[i].dataBytes;
        status = writeAllAt(fd, zeros, pad, at, path + ": " + t.name);
        if (status && run.onTensorBytes)
            run.onTensorBytes(0, at, zeros, pad);
    }
    if (status && run.sync && ::fdatasync(fd) != 0)
        status = makeError(path + ": cannot be flushed to disk: " + std::strerror(errno));
    ::close(fd);
    return status;
}

} // namespace

Result<GgufParts> planGgufParts(const GgufPlan& gguf, unsigned parts)
{
    if (gguf.merge.files.size() != 1)
        return makeError("internal: a GGUF plan without its one file");
    auto view = std::make_shared<GgufParts::View>();
    MergePlan& p = view->plan;
    p.checkpoint = gguf.merge.checkpoint;
    // planParts() hashes the layout into the set's id: the export's options and its generated tensors' bytes (the
    // header, hashed too, holds the types and general.name as well; this says so outright).
    FnvHash generated;
    for (const auto& g : gguf.generated)
        generated.add(g.fileOffset).add(g.bytes);
    p.layout = "gguf outtype=" + std::string(ggufOutTypeName(gguf.outType)) + " name=" + gguf.modelName
        + " generated=" + generated.hex();
    PlannedFile file;
    file.name = gguf.fileName;
    file.size = gguf.fileSize;
    file.header = gguf.merge.files.front().header;

    // Every written tensor in file order, counted up to its aligned end.
    std::vector<GgufParts::View::Origin> origins;
    for (std::size_t i = 0; i < gguf.merge.tensors.size(); ++i)
        origins.push_back({ false, i, gguf.merge.tensors[i].bytes });
    // A quantized tensor's bytes are whole blocks of its type (the plan sized them from the table of types); a
    // part writes it whole, so it is never cut inside a row.
    for (std::size_t k = 0; k < gguf.quantized.size(); ++k)
        origins.push_back({ true, k, gguf.quantized[k].bytes });
    auto planned = [&](const GgufParts::View::Origin& o) -> const PlannedTensor& {
        return o.quantized ? gguf.quantized[o.index].copy : gguf.merge.tensors[o.index];
    };
    std::stable_sort(origins.begin(), origins.end(), [&](const auto& a, const auto& b) {
        return planned(a).fileOffset < planned(b).fileOffset;
    });
    for (const auto& o : origins) {
        PlannedTensor t = planned(o);
        t.file = 0;
        t.bytes = alignedEnd(t.fileOffset, o.dataBytes) - t.fileOffset;
        if (t.fileOffset + t.bytes > gguf.fileSize)
            return makeError("internal: GGUF tensor " + printableText(t.name) + " ends past the file");
        p.totalBytes += t.bytes;
        p.largestTensorBytes = std::max(p.largestTensorBytes, t.bytes);
        file.tensors.push_back(p.tensors.size());
        p.tensors.push_back(std::move(t));
    }
    p.files.push_back(std::move(file));
    p.generatedFiles = gguf.merge.generatedFiles; // the Modelfile, written by the finishing part
    p.diskBytes = gguf.fileSize;
    view->origins = std::move(origins);

    GgufParts result;
    result.view = view;
    result.outputs.push_back({ &gguf.view, &view->plan, "" });
    auto assignment = planParts(result.outputs, parts);
    TESSERA_TRY(assignment);
    result.plan = std::move(*assignment);

    const GgufPlan* export_ = &gguf;
    result.writing.write = [export_, view](const MergeOutput&, const std::string& dir,
                                           const MergeRunOptions& run) -> Result<MergeOutcome> {
        if (!run.onlyTensors || run.onlyTensors->size() != view->plan.tensors.size())
            return makeError("internal: a GGUF part without its tensor selection");
        std::vector<bool> plain(export_->merge.tensors.size(), false), quantized(export_->quantized.size(), false);
        std::uint64_t bytes = 0;
        for (std::size_t i = 0; i < view->origins.size(); ++i)
            if ((*run.onlyTensors)[i]) {
                const auto& o = view->origins[i];
                (o.quantized ? quantized : plain)[o.index] = true;
                bytes += view->plan.tensors[i].bytes;
            }
        GgufSelection selection { &plain, &quantized, run.writeFinish };
        auto outcome = writeGgufTensors(*export_, dir, selection, run);
        TESSERA_TRY(outcome);
        if (bytes > 0)
            TESSERA_TRY(writePadding(*view, (fs::path(dir) / export_->fileName).string(), run));
        outcome->bytesWritten = bytes;
        return outcome;
    };
    result.writing.checkTarget = [export_](const std::string& targetDir) { return checkGgufTarget(*export_, targetDir); };
    result.writing.keystones = { gguf.fileName };
    return result;
}

Result<PartOutcome> runGgufPart(const GgufParts& parts, unsigned part, const std::string& targetDir,
                                const MergeRunOptions& options)
{
    return runMergePart(parts.outputs, parts.plan, part, targetDir, options, parts.writing);
}

} // namespace tessera
