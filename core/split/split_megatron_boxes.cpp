// SPDX-License-Identifier: GPL-3.0-or-later
// The Megatron split's boxes: the placed Megatron tensors (split_megatron.cpp) described as the reader would
// describe the planned checkpoint, mapped back to the model exactly as a merge maps it, and each mapped piece
// turned into the fragment of a model tensor that fills a rank's local tensor.
#include "split/split_megatron_planner.h"

#include "io/printable.h"
#include "formats/layout_registry.h"
#include "listed_items.h"
#include "merge/box_copy.h"

#include <set>

namespace tessera::megatron_plan {

namespace {

/// Synthetic byte offsets of the planned Megatron tensors: (tensor, TP rank) in the high bits, the byte inside
/// the rank's local tensor in the low 40 (a terabyte per local tensor).
constexpr int kLocalBits = 40;

/// What of the model tensor `source` its mapping back from the planned Megatron checkpoint (`back`) does not
/// carry, as a message; empty when it carries all of it. Rows past config.json's vocab_size are what this is
/// about: Megatron pads the vocabulary itself and a merge keeps vocab_size rows, so any others would be lost.
std::string partLeftOut(const PlannedTensor& source, const TensorInfo& back, const ConfigVars& vars)
{
    if (back.outputShape() == source.shape)
        return {};
    const std::int64_t vocab = var(vars, "vocab_size", -1);
    if (!source.shape.empty() && !back.outputShape().empty() && back.outputShape()[0] == vocab && source.shape[0] > vocab)
        return source.name + " has " + std::to_string(source.shape[0]) + " rows but config.json's vocab_size is "
            + std::to_string(vocab) + ": a Megatron checkpoint keeps vocab_size rows (padded to a multiple of "
            "--make_vocab_size_divisible_by × TP with rows of its own) and a merge gives back vocab_size rows, so "
            "rows " + std::to_string(vocab) + "–" + std::to_string(source.shape[0] - 1) + " would be lost. If they "
            "are tokens of the model, set vocab_size to " + std::to_string(source.shape[0]) + " in config.json; "
            "or split it as FSDP or DCP, which keep every row";
    return source.name + " " + shapeToString(source.shape) + " maps back from the Megatron checkpoint as "
        + shapeToString(back.outputShape()) + ": the rest of it would be lost";
}

} // namespace

/// The planned checkpoint as the reader would describe it, with synthetic offsets, mapped exactly as a
/// merge maps it: each mapped piece is a box of a model tensor inside one rank's local tensor.
CheckpointInfo MegatronPlanner::plannedCheckpoint()
{
    CheckpointInfo planned;
    planned.layout = layout_names::kMegatronLegacy;
    planned.root = "(planned split)";
    planned.hfConfigDir = model.config.path;
    planned.parallel.tensorParallel = tp;
    planned.parallel.pipelineParallel = pp;
    planned.parallel.virtualPipeline = vpp;
    planned.parallel.expertParallel = ep;
    planned.parallel.worldSize = tp * pp * ep;
    planned.notes["num_layers"] = std::to_string(layers);
    localShapes.assign(megatron.size(), Shape {});
    for (std::size_t mi = 0; mi < megatron.size(); ++mi) {
        const MegatronTensor& m = megatron[mi];
        Shape local = m.shape;
        if (m.split == MegatronTpSplit::Columns)
            local[1] /= tp;
        else if (m.split != MegatronTpSplit::Replicated)
            local[0] /= tp;
        localShapes[mi] = local;
        if (m.copyOf)
            continue; // mapped as the embedding it copies
        planned.tensors.push_back(plannedTensor(mi, planned.root));
    }
    return planned;
}

/// megatron[mi] as the reader would describe it: a piece per box each TP rank holds, its bytes at
/// (mi, rank) << kLocalBits in the file `root`.
TensorInfo MegatronPlanner::plannedTensor(std::size_t mi, const std::string& root) const
{
    const MegatronTensor& m = megatron[mi];
    const Shape& local = localShapes[mi];
    TensorInfo t;
    t.name = m.name;
    t.dtype = m.dtype;
    t.shape = m.shape;
    const std::size_t esize = dtypeSize(m.dtype);
    const Shape strides = globalStrides(local);
    std::uint64_t rowBytes = esize;
    for (std::size_t d = 1; d < local.size(); ++d)
        rowBytes *= static_cast<std::uint64_t>(local[d]);
    const int holders = m.split == MegatronTpSplit::Replicated ? 1 : tp;
    for (int r = 0; r < holders; ++r) {
        const std::uint64_t base = (static_cast<std::uint64_t>(mi) * static_cast<std::uint64_t>(tp) + r) << kLocalBits;
        auto piece = [&](Shape offsets, Shape box, std::uint64_t byteOffset) {
            Piece p;
            p.file = root;
            p.rank = r;
            p.offsets = std::move(offsets);
            p.shape = std::move(box);
            p.strides = strides;
            p.storedDtype = m.dtype;
            p.dataOffset = base + byteOffset;
            p.storageBegin = base;
            p.storageBytes = rowBytes * static_cast<std::uint64_t>(local.empty() ? 1 : local[0]);
            t.pieces.push_back(std::move(p));
        };
        Shape offsets(local.size(), 0);
        switch (m.split) {
        case MegatronTpSplit::Replicated:
            piece(offsets, local, 0);
            break;
        case MegatronTpSplit::Rows:
            offsets[0] = r * local[0];
            piece(offsets, local, 0);
            break;
        case MegatronTpSplit::Columns:
            offsets[1] = r * local[1];
            piece(offsets, local, 0);
            break;
        case MegatronTpSplit::GluRows: {
            const std::int64_t half = local[0] / 2;
            Shape box = local;
            box[0] = half;
            offsets[0] = r * half;
            piece(offsets, box, 0);
            offsets[0] = tp * half + r * half;
            piece(offsets, box, static_cast<std::uint64_t>(half) * rowBytes);
            break;
        }
        }
    }
    return t;
}

/// The planned checkpoint mapped back to the model by the forward mapping; an error unless every row maps.
Result<MappingResult> MegatronPlanner::mapBack(const CheckpointInfo& planned)
{
    MappingOptions mappingOptions;
    mappingOptions.configDir = model.config.path;
    mappingOptions.userRulesFile = options.userRulesFile;
    mappingOptions.userRulesText = options.userRulesText;
    mappingOptions.valueModel = valueModel;
    auto mapped = mapMegatronToHf(planned, mappingOptions);
    TESSERA_TRY(mapped);
    for (const auto& row : mapped->rows)
        if (row.status != MappingStatus::Ok && row.status != MappingStatus::Tied)
            errors.push_back(printableText(row.source.empty() ? row.target : row.source) + ": "
                             + mappingStatusName(row.status)
                             + (row.detail.empty() ? "" : " (" + row.detail + ")"));
    for (const auto& p : mapped->problems)
        errors.push_back(p.text());
    if (!errors.empty()) {
        errors.insert(errors.begin(), "the planned Megatron checkpoint does not map back to the model:");
        return fail();
    }
    return mapped;
}

/// What fills each rank's local tensors, from the mapped pieces; an error when a model tensor would not be written
/// whole.
Status MegatronPlanner::collectFragments(const MappingResult& mapped)
{
    fragments.assign(megatron.size(), std::vector<std::vector<SplitFragment>>(tp));
    std::set<std::size_t> covered;
    for (const TensorInfo& h : mapped.mapped.tensors) {
        auto it = modelIndex.find(h.name);
        if (it == modelIndex.end())
            continue; // e.g. a tied head the merge drops
        // Only what maps back is written: a tensor that maps back smaller would lose the rest, silently zeroed.
        if (const std::string lost = partLeftOut(model.tensors[it->second], h, vars); !lost.empty()) {
            errors.push_back(lost);
            continue;
        }
        covered.insert(it->second);
        addFragments(h, it->second);
    }
    if (!errors.empty())
        return fail();
    std::vector<std::string> uncovered;
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (!covered.count(i) && !(tied && model.tensors[i].name == "lm_head.weight"))
            uncovered.push_back(printableText(model.tensors[i].name));
    if (!uncovered.empty()) {
        errors.push_back("these tensors would not be written:" + listedItems(uncovered, 6));
        return fail();
    }
    for (std::size_t mi = 0; mi < megatron.size(); ++mi) {
        if (megatron[mi].copyOf)
            fragments[mi] = fragments[*megatron[mi].copyOf];
        if (megatron[mi].split == MegatronTpSplit::Replicated)
            for (int r = 1; r < tp; ++r)
                fragments[mi][static_cast<std::size_t>(r)] = fragments[mi][0];
    }
    return Status::success();
}

/// The pieces of mapped tensor h (model tensor `source`) as fragments of the local tensors their synthetic
/// offsets name.
void MegatronPlanner::addFragments(const TensorInfo& h, std::size_t source)
{
    const std::size_t esize = dtypeSize(h.dtype);
    for (const Piece& p : h.pieces) {
        const std::uint64_t key = p.dataOffset >> kLocalBits;
        const std::size_t mi = static_cast<std::size_t>(key / static_cast<std::uint64_t>(tp));
        const std::size_t r = static_cast<std::size_t>(key % static_cast<std::uint64_t>(tp));
        SplitFragment f;
        f.source = source;
        f.sourceOffsets = p.offsets;
        f.shape = p.shape;
        f.localElement = (p.dataOffset & ((std::uint64_t(1) << kLocalBits) - 1)) / esize;
        f.localStrides = p.strides;
        if (!h.savedShape.empty())
            f.sourceBoxShape = h.shape;
        fragments[mi][r].push_back(std::move(f));
    }
}

} // namespace tessera::megatron_plan
