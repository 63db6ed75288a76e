// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_preview.h"
#include "text_util.h"

#include <map>
#include <set>

namespace tessera {

namespace {
/// A preview's layout: "planned " and the split's format ("planned dcp"), a name no reader gives.
constexpr char kPreviewPrefix[] = "planned ";
} // namespace

bool isSplitPlacementPreview(const CheckpointInfo& info) { return startsWith(info.layout, kPreviewPrefix); }

CheckpointInfo splitPlacementPreview(const SplitPlan& plan, const MergePlan& model)
{
    CheckpointInfo info;
    info.layout = kPreviewPrefix + std::string(splitFormatName(plan.format));
    info.root = "(planned split)";
    info.parallel.worldSize = plan.worldSize;
    info.notes["layout"] = plan.layout;
    for (const auto& t : model.tensors) {
        TensorInfo out;
        out.name = t.name;
        out.dtype = t.dtype;
        out.shape = t.shape;
        info.tensors.push_back(std::move(out));
    }
    std::vector<std::set<std::pair<Shape, Shape>>> held(model.tensors.size());
    std::vector<std::set<std::string>> holders(model.tensors.size());
    for (const auto& f : plan.files) {
        info.files.push_back(f.name);
        for (const auto& t : f.tensors)
            for (const auto& fr : t.fragments) {
                TensorInfo& into = info.tensors[fr.source];
                if (!fr.sourceBoxShape.empty() && into.savedShape.empty()) {
                    // Drawn in the index space its boxes are in (GPT-OSS's interleaved gate/up columns).
                    into.savedShape = into.shape;
                    into.shape = fr.sourceBoxShape;
                }
                Piece p;
                p.file = f.name;
                p.rank = f.rank;
                p.offsets = fr.sourceOffsets;
                p.shape = fr.shape;
                p.storedDtype = t.spec.dtype;
                p.storageRecord = t.spec.name;
                p.role = held[fr.source].insert({ fr.sourceOffsets, fr.shape }).second ? PieceRole::Primary
                                                                                       : PieceRole::Replica;
                holders[fr.source].insert(t.spec.name);
                info.tensors[fr.source].pieces.push_back(std::move(p));
            }
    }
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        std::string in;
        for (const auto& h : holders[i])
            in += (in.empty() ? "" : ", ") + h;
        info.tensors[i].placement = in == info.tensors[i].name ? plan.layout : "in " + in;
    }
    return info;
}

} // namespace tessera
