// SPDX-License-Identifier: GPL-3.0-or-later
// Reading one mp_rank_* folder's file: the state dicts flattened, Transformer Engine's extra state counted and
// left out, every other value interpreted as a plain per-rank tensor.

#include "formats/megatron_rank_folder.h"
#include "formats/megatron_names.h"
#include "io/printable.h"
#include "pickle/saved_tensor.h"

#include <unordered_set>

namespace tessera {

namespace {

using K = PyValue::Kind;

/// Longest flattened parameter name accepted; real ones are under 200 characters.
constexpr std::size_t kMaxFlatNameLength = 64 * 1024;

/// Megatron-LM nests nothing in mcore state dicts, but older models did (`language_model.encoder…`): flatten.
/// Each nested dict is entered once: a pickle can refer to one dict from many places ("billion laughs": 30
/// levels of two references each name 2^30 tensors in 2 KB), which no state dict does. Iterative, so the work is
/// bounded by the values actually in the file.
Status flatten(const PyRef& root, std::vector<std::pair<std::string, PyRef>>& out)
{
    struct Frame {
        std::vector<std::pair<std::string, PyRef>> items;
        std::size_t next = 0;
        std::string prefix;
    };
    std::unordered_set<const PyValue*> entered { root.get() };
    std::vector<Frame> stack;
    stack.push_back({ stateDictItems(root), 0, std::string() });
    while (!stack.empty()) {
        Frame& frame = stack.back();
        if (frame.next == frame.items.size()) {
            stack.pop_back();
            continue;
        }
        auto& [name, value] = frame.items[frame.next++];
        if (frame.prefix.size() + name.size() > kMaxFlatNameLength)
            return makeError("a parameter name is longer than " + std::to_string(kMaxFlatNameLength)
                             + " characters; this is not a state dict");
        std::string full = frame.prefix + name;
        if (value && value->kind == K::Dict && !isMegatronExtraState(name)) {
            if (!entered.insert(value.get()).second)
                return makeError("the state dict refers to the same nested dict ('" + printableText(full)
                                 + "') more than once; a saved model never does");
            PyRef nested = value; // `frame` may move when the stack grows
            stack.push_back({ stateDictItems(nested), 0, full + "." });
        } else {
            out.emplace_back(std::move(full), value);
        }
    }
    return Status::success();
}

void readChunk(MegatronRankFolder& rank, const PyRef& dict)
{
    std::vector<MegatronLocalTensor> tensors;
    std::vector<std::pair<std::string, PyRef>> items;
    if (auto flat = flatten(dict, items); !flat) {
        rank.problems.push_back({ rank.path, "", flat.error().message });
        return;
    }
    for (const auto& [name, value] : items) {
        // Transformer Engine's FP8 metadata: uint8 tensors, BytesIO objects or None, never model weights.
        if (isMegatronExtraState(name)) {
            ++rank.skippedExtraState;
            continue;
        }
        if (const std::string why = megatronIndexProblem(name); !why.empty()) {
            rank.problems.push_back({ rank.path, name, why });
            continue;
        }
        auto saved = interpretSavedTensor(value, *rank.archive);
        if (!saved) {
            rank.problems.push_back({ rank.path, name, saved.error().message });
            continue;
        }
        if (!saved->has_value())
            continue;
        if ((*saved)->kind != SavedTensor::Kind::Plain) {
            rank.problems.push_back({ rank.path, name, "holds a DTensor or ShardedTensor; Megatron per-rank files "
                                                       "hold plain per-rank slices, so Tessera cannot place it" });
            continue;
        }
        tensors.push_back({ name, (*saved)->local });
    }
    rank.chunks.push_back(std::move(tensors));
}

} // namespace

/// Reads one folder's pickle: the list of state dicts (verl) or the dict with model/model0… and args (Megatron-LM).
void readMegatronRankFolder(MegatronRankFolder& rank)
{
    auto archive = TorchSaveFile::open(rank.path);
    if (!archive) {
        rank.problems.push_back({ rank.path, "", archive.error().message });
        return;
    }
    rank.archive = std::make_shared<TorchSaveFile>(std::move(*archive));
    const PyRef& root = rank.archive->root();
    if (root && root->kind == K::List) {
        for (std::size_t i = 0; i < root->items.size(); ++i) {
            if (!root->items[i] || root->items[i]->kind != K::Dict) {
                rank.problems.push_back({ rank.path, "", "item " + std::to_string(i) + " of the list is not a state "
                                                             "dict (found " + (root->items[i] ? root->items[i]->repr(1) : "nothing") + ")" });
                return;
            }
            readChunk(rank, root->items[i]);
        }
    } else if (root && root->kind == K::Dict) {
        rank.args = root->get("args");
        if (auto model = root->get("model")) {
            readChunk(rank, model);
        } else if (root->get("model0")) {
            for (int i = 0;; ++i) {
                auto chunk = root->get("model" + std::to_string(i));
                if (!chunk)
                    break;
                readChunk(rank, chunk);
            }
        } else {
            // A bare state dict (a hand-made per-rank save): one stage.
            readChunk(rank, root);
        }
    } else {
        rank.problems.push_back({ rank.path, "", "the file holds neither a list of state dicts nor a dict with "
                                                 "'model' (found " + (root ? root->repr(1) : std::string("nothing")) + ")" });
        return;
    }
    rank.readable = true;
}


} // namespace tessera
