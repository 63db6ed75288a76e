// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/saved_tensor.h"

namespace tessera {

namespace {

using K = PyValue::Kind;

bool isObject(const PyRef& v, const char* shortName)
{
    return v && v->kind == K::Object && v->shortName() == shortName;
}

Error bad(const TorchSaveFile& file, const std::string& what)
{
    return makeError(file.displayName() + ": " + what);
}

Result<Placement> readPlacement(const PyRef& v, const TorchSaveFile& file)
{
    if (!v || v->kind != K::Object)
        return bad(file, "a DTensor placement is not an object: " + (v ? v->repr() : "None"));
    const std::string kind = v->shortName();
    std::int64_t dim = 0;
    if (kind == "Shard" || kind == "_StridedShard") {
        if (!toInt(v->attr("dim"), dim))
            return bad(file, kind + " placement without a dim");
        // Checked before narrowing: Shard(dim=2^40) must not become Shard(0).
        if (dim < 0 || dim > 1024)
            return bad(file, kind + " placement on dim " + std::to_string(dim) + ", which no tensor has");
        if (kind == "Shard")
            return Placement::shard(static_cast<int>(dim));
        std::int64_t splitFactor = 0;
        if (!toInt(v->attr("split_factor"), splitFactor) || splitFactor < 1)
            return bad(file, "_StridedShard placement without a valid split_factor");
        return Placement::stridedShard(static_cast<int>(dim), splitFactor);
    }
    if (kind == "Replicate")
        return Placement::replicate();
    if (kind == "Partial" || kind == "_Partial") {
        std::string op = "sum";
        auto reduceOp = v->attr("reduce_op");
        if (reduceOp && reduceOp->isStr())
            op = reduceOp->text;
        else if (reduceOp && reduceOp->kind == K::Object) {
            // ≤2.3: a c10d ReduceOp.RedOpType enum, REDUCE(cls, (value,)); SUM is 0.
            std::int64_t code = -1;
            if (reduceOp->args && !reduceOp->args->items.empty() && toInt(reduceOp->args->items[0], code))
                op = code == 0 ? "sum" : "reduce_op_" + std::to_string(code);
        }
        return Placement::partial(op);
    }
    return bad(file, "unknown DTensor placement '" + v->qualifiedName() + "'");
}

Result<DeviceMesh> readMesh(const PyRef& meshValue, const TorchSaveFile& file, Shape& coordinate)
{
    if (!isObject(meshValue, "DeviceMesh"))
        return bad(file, "DTensor spec without a DeviceMesh");
    DeviceMesh mesh;
    auto meshTensor = meshValue->attr("mesh");
    if (meshTensor && meshTensor->kind == K::Tensor) {
        // torch 2.2–2.8: the full rank layout as an int tensor.
        mesh.shape = meshTensor->tensor->shape;
        auto ranks = file.readIntTensor(*meshTensor->tensor);
        TESSERA_TRY(ranks);
        mesh.ranks = std::move(*ranks);
    } else if (auto layout = meshValue->attr("_layout")) {
        // Newer torch: a _MeshLayout(shape, stride) plus a _rank_map tensor.
        if (!toIntList(layout->attr("shape"), mesh.shape))
            return bad(file, "DeviceMesh layout without a flat shape (nested mesh layouts are not supported)");
        auto rankMap = meshValue->attr("_rank_map");
        if (rankMap && rankMap->kind == K::Tensor) {
            auto ranks = file.readIntTensor(*rankMap->tensor);
            TESSERA_TRY(ranks);
            mesh.ranks = std::move(*ranks);
        }
    } else {
        return bad(file, "DeviceMesh without a rank layout");
    }
    for (const char* key : { "mesh_dim_names", "_mesh_dim_names" }) {
        auto names = meshValue->attr(key);
        if (names && names->isSequence())
            for (const auto& n : names->items) {
                std::string s;
                toString(n, s);
                mesh.dimNames.push_back(s);
            }
    }
    auto coord = meshValue->attr("_coordinate_on_dim");
    if (coord && coord->isSequence())
        toIntList(coord, coordinate);
    std::int64_t expected = 1;
    for (auto d : mesh.shape)
        expected *= d;
    if (!mesh.ranks.empty() && static_cast<std::int64_t>(mesh.ranks.size()) != expected)
        return bad(file, "DeviceMesh rank layout does not match its shape");
    return mesh;
}

Result<SavedTensor> readDTensor(const PyRef& v, const TorchSaveFile& file)
{
    SavedTensor t;
    t.kind = SavedTensor::Kind::DTensor;
    // args = (cls, dtype, size, stride, storage_offset, layout, device, requires_grad)
    const auto& args = v->args->items;
    if (args.size() >= 3 && args[1] && args[1]->kind == K::Dtype)
        t.dtype = args[1]->dtype;
    if (args.size() >= 3)
        toIntList(args[2], t.globalShape);
    auto localValue = v->attr("_local_tensor");
    if (!localValue || localValue->kind != K::Tensor)
        return bad(file, "DTensor without a local tensor");
    t.local = *localValue->tensor;
    auto spec = v->attr("_spec");
    if (!isObject(spec, "DTensorSpec"))
        return bad(file, "DTensor without a DTensorSpec");
    auto mesh = readMesh(spec->attr("mesh"), file, t.coordinate);
    TESSERA_TRY(mesh);
    t.mesh = std::move(*mesh);
    auto placements = spec->attr("placements");
    if (!placements || !placements->isSequence())
        return bad(file, "DTensorSpec without placements");
    for (const auto& p : placements->items) {
        auto placement = readPlacement(p, file);
        TESSERA_TRY(placement);
        t.placements.push_back(*placement);
    }
    // TensorMeta(shape, stride, dtype) repeats the global shape; prefer it over the wrapper's size.
    auto meta = spec->attr("tensor_meta");
    if (isObject(meta, "TensorMeta") && meta->args && meta->args->items.size() >= 3) {
        Shape shape;
        if (toIntList(meta->args->items[0], shape))
            t.globalShape = shape;
        if (meta->args->items[2] && meta->args->items[2]->kind == K::Dtype)
            t.dtype = meta->args->items[2]->dtype;
    }
    if (t.dtype == DType::Unknown)
        t.dtype = t.local.dtype;
    if (t.placements.size() != t.mesh.shape.size())
        return bad(file, "DTensor has " + std::to_string(t.placements.size()) + " placements for a "
                             + std::to_string(t.mesh.shape.size()) + "-d mesh");
    return t;
}

Result<SavedTensor> readShardedTensor(const PyRef& v, const TorchSaveFile& file)
{
    SavedTensor t;
    t.kind = SavedTensor::Kind::ShardedTensor;
    const auto& args = v->args->items;
    if (args.size() >= 3 && args[1] && args[1]->kind == K::Dtype)
        t.dtype = args[1]->dtype;
    if (args.size() >= 3)
        toIntList(args[2], t.globalShape);
    // state = (local_shards, metadata, pg_state, sharding_spec, init_rrefs)
    const auto& state = v->state;
    if (!state || state->kind != K::Tuple || state->items.size() < 2)
        return bad(file, "ShardedTensor without its state");
    const auto& localShards = state->items[0];
    if (localShards && localShards->isSequence()) {
        for (const auto& shard : localShards->items) {
            if (!isObject(shard, "Shard"))
                return bad(file, "ShardedTensor local shard is not a Shard");
            auto tensor = shard->attr("tensor");
            auto meta = shard->attr("metadata");
            SavedTensor::Shard s;
            if (!tensor || tensor->kind != K::Tensor || !meta || !toIntList(meta->attr("shard_offsets"), s.offsets))
                return bad(file, "ShardedTensor shard without a tensor or offsets");
            s.tensor = *tensor->tensor;
            t.shards.push_back(std::move(s));
        }
    }
    const auto& metadata = state->items[1];
    if (metadata && metadata->kind == K::Object) {
        Shape size;
        if (toIntList(metadata->attr("size"), size))
            t.globalShape = size;
        auto all = metadata->attr("shards_metadata");
        if (all && all->isSequence())
            for (const auto& m : all->items) {
                Shape offsets, sizes;
                if (m && toIntList(m->attr("shard_offsets"), offsets) && toIntList(m->attr("shard_sizes"), sizes))
                    t.allShardBoxes.emplace_back(offsets, sizes);
            }
        auto props = metadata->attr("tensor_properties");
        if (props && props->state && props->state->kind == K::Tuple && !props->state->items.empty()
            && props->state->items[0] && props->state->items[0]->kind == K::Dtype)
            t.dtype = props->state->items[0]->dtype;
    }
    if (t.dtype == DType::Unknown && !t.shards.empty())
        t.dtype = t.shards.front().tensor.dtype;
    return t;
}

} // namespace

Result<std::optional<SavedTensor>> interpretSavedTensor(const PyRef& value, const TorchSaveFile& file)
{
    if (!value)
        return std::optional<SavedTensor> {};
    if (value->kind == K::Tensor) {
        if (!value->tensor->storage)
            return bad(file, "a meta tensor (no data was saved)");
        SavedTensor t;
        t.kind = SavedTensor::Kind::Plain;
        t.local = *value->tensor;
        t.dtype = t.local.dtype;
        t.globalShape = t.local.shape;
        return std::optional<SavedTensor>(std::move(t));
    }
    if (value->kind != K::Object)
        return std::optional<SavedTensor> {};
    const std::string kind = value->shortName();
    if (kind == "DTensor") {
        auto t = readDTensor(value, file);
        TESSERA_TRY(t);
        return std::optional<SavedTensor>(std::move(*t));
    }
    if (kind == "ShardedTensor") {
        auto t = readShardedTensor(value, file);
        TESSERA_TRY(t);
        return std::optional<SavedTensor>(std::move(*t));
    }
    if (value->module == "torch._utils" && kind.rfind("_rebuild_", 0) == 0)
        return bad(file, "unsupported tensor kind (" + kind + "): quantized, sparse and nested tensors cannot be merged");
    // A tensor subclass around plain data (e.g. a Parameter subclass): keep the data.
    if (value->args && value->args->items.size() == 1 && value->args->items[0]
        && value->args->items[0]->kind == K::Tensor && value->state)
        return interpretSavedTensor(value->args->items[0], file);
    return std::optional<SavedTensor> {};
}

std::vector<std::pair<std::string, PyRef>> stateDictItems(const PyRef& dict)
{
    std::vector<std::pair<std::string, PyRef>> items;
    if (!dict || dict->kind != K::Dict)
        return items;
    items.reserve(dict->entries.size());
    for (const auto& [key, value] : dict->entries) {
        std::string name;
        if (toString(key, name))
            items.emplace_back(std::move(name), value);
    }
    return items;
}

std::string describeSavedPlacement(const SavedTensor& tensor)
{
    if (tensor.kind == SavedTensor::Kind::ShardedTensor)
        return "ShardedTensor, " + std::to_string(tensor.allShardBoxes.size()) + " shards";
    if (tensor.kind != SavedTensor::Kind::DTensor)
        return {};
    return describePlacements(tensor.placements, tensor.mesh.shape, tensor.mesh.dimNames);
}

} // namespace tessera
