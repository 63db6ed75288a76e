// SPDX-License-Identifier: GPL-3.0-or-later
// PyTorch Distributed Checkpoint folders: a pickled `.metadata` plus `__R_I.distcp` data files in which every
// tensor chunk is a complete torch.save archive at a recorded (offset, length).

#include "model/coverage.h"
#include "io/printable.h"
#include "formats/layouts.h"
#include "formats/optimizer_keys.h"
#include "io/path_kinds.h"
#include "parallel.h"
#include "pickle/torch_save.h"
#include "pickle/unpickler.h"
#include "formats/layout_registry.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

using K = PyValue::Kind;

struct StorageInfo {
    std::string relativePath;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    bool transformed = false;
};

struct ChunkRef {
    Shape offsets;
    Shape sizes;
};

struct DcpTensor {
    std::string name;
    DType dtype = DType::Unknown;
    Shape shape;
    std::vector<ChunkRef> chunks;
};

using StorageKey = std::pair<std::string, Shape>;

/// Opens each .distcp file once and shares the mapping between threads.
class FileCache {
public:
    explicit FileCache(std::string dir) : m_dir(std::move(dir)) { }
    Result<std::shared_ptr<MappedFile>> get(const std::string& relative)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        auto it = m_files.find(relative);
        if (it != m_files.end())
            return it->second;
        if (relative.empty() || relative.find("..") != std::string::npos || relative.front() == '/')
            return makeError(m_dir + ": .metadata names a data file outside the folder: '" + relative + "'");
        auto file = MappedFile::open((fs::path(m_dir) / relative).string());
        TESSERA_TRY(file);
        m_files.emplace(relative, *file);
        return *file;
    }
    std::vector<std::string> paths() const
    {
        std::vector<std::string> out;
        for (const auto& [rel, file] : m_files)
            out.push_back(file->path());
        return out;
    }

private:
    std::string m_dir;
    std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<MappedFile>> m_files;
};

Result<std::vector<DcpTensor>> readTensorEntries(const PyRef& metadata, const std::string& metaPath,
                                                 std::vector<std::string>& bytesEntries)
{
    auto sdm = metadata->attr("state_dict_metadata");
    if (!sdm || sdm->kind != K::Dict)
        return makeError(metaPath + ": no state_dict_metadata in the DCP metadata");
    std::vector<DcpTensor> tensors;
    for (const auto& [key, value] : sdm->entries) {
        DcpTensor t;
        if (!toString(key, t.name) || !value || value->kind != K::Object)
            return makeError(metaPath + ": malformed state_dict_metadata entry");
        if (value->shortName() == "BytesStorageMetadata") {
            bytesEntries.push_back(t.name);
            continue;
        }
        if (value->shortName() != "TensorStorageMetadata")
            return makeError(metaPath + ": '" + printableText(t.name) + "' has unknown storage metadata "
                             + value->qualifiedName());
        auto props = value->attr("properties");
        // TensorProperties pickles its state as a tuple (dtype, layout, requires_grad, memory_format, pin_memory).
        PyRef dtype;
        if (props && props->state && props->state->kind == K::Tuple && !props->state->items.empty())
            dtype = props->state->items[0];
        else if (props)
            dtype = props->attr("dtype");
        if (!dtype || dtype->kind != K::Dtype)
            return makeError(metaPath + ": '" + printableText(t.name) + "' has no dtype");
        t.dtype = dtype->dtype;
        if (!toIntList(value->attr("size"), t.shape))
            return makeError(metaPath + ": '" + printableText(t.name) + "' has no size");
        auto chunks = value->attr("chunks");
        if (!chunks || !chunks->isSequence())
            return makeError(metaPath + ": '" + printableText(t.name) + "' has no chunk list");
        for (const auto& chunk : chunks->items) {
            ChunkRef c;
            if (!chunk || !toIntList(chunk->attr("offsets"), c.offsets) || !toIntList(chunk->attr("sizes"), c.sizes)
                || c.offsets.size() != t.shape.size() || c.sizes.size() != t.shape.size())
                return makeError(metaPath + ": '" + printableText(t.name) + "' has a malformed chunk");
            t.chunks.push_back(std::move(c));
        }
        tensors.push_back(std::move(t));
    }
    return tensors;
}

Result<std::map<StorageKey, StorageInfo>> readStorageData(const PyRef& metadata, const std::string& metaPath)
{
    auto sd = metadata->attr("storage_data");
    if (!sd || sd->kind != K::Dict)
        return makeError(metaPath + ": no storage_data in the DCP metadata (written by a custom storage writer?)");
    std::map<StorageKey, StorageInfo> out;
    for (const auto& [key, value] : sd->entries) {
        StorageKey k;
        if (!key || key->kind != K::Object || !toString(key->attr("fqn"), k.first))
            return makeError(metaPath + ": malformed storage_data key");
        toIntList(key->attr("offset"), k.second); // absent for byte entries
        StorageInfo info;
        std::int64_t offset = 0, length = 0;
        if (!value || !toString(value->attr("relative_path"), info.relativePath) || !toInt(value->attr("offset"), offset)
            || !toInt(value->attr("length"), length) || offset < 0 || length < 0)
            return makeError(metaPath + ": malformed storage entry for '" + k.first + "'");
        info.offset = static_cast<std::uint64_t>(offset);
        info.length = static_cast<std::uint64_t>(length);
        auto transforms = value->attr("transform_descriptors");
        info.transformed = transforms && transforms->isSequence() && !transforms->items.empty();
        out[k] = info;
    }
    return out;
}

/// What every tensor of a scan is read from: the folder, its .metadata, the storage entries and the data files.
struct DcpSources {
    const std::string& root;
    const std::string& metaPath;
    const std::map<StorageKey, StorageInfo>& storage;
    FileCache& files;
};

/// One chunk of `entry` as a piece of `tensor`: its storage entry, the torch.save item at that entry's byte range,
/// checked against what .metadata says of the chunk. What is wrong goes to `problems`, and no piece is added.
void addChunkPiece(TensorInfo& tensor, const DcpTensor& entry, const ChunkRef& chunk, DcpSources& sources,
                   std::vector<Problem>& problems)
{
    auto fail = [&](const std::string& file, const std::string& message) {
        problems.push_back({ file, entry.name, message });
    };
    auto it = sources.storage.find({ entry.name, chunk.offsets });
    if (it == sources.storage.end()) {
        fail(sources.metaPath, "a chunk at offsets " + std::to_string(chunk.offsets.size()) + "-d has no storage entry");
        return;
    }
    const StorageInfo& where = it->second;
    const std::string path = (fs::path(sources.root) / where.relativePath).string();
    if (where.transformed) {
        fail(path, "the chunk is stored with a stream transform (e.g. zstd), which Tessera does not read yet");
        return;
    }
    auto file = sources.files.get(where.relativePath);
    if (!file) {
        fail(path, file.error().message);
        return;
    }
    const std::string itemName = path + " @" + std::to_string(where.offset);
    auto archive = TorchSaveFile::open(*file, where.offset, where.length, itemName);
    if (!archive) {
        fail(path, archive.error().message + " (the byte range " + sources.metaPath + " gives for this chunk)");
        return;
    }
    const auto& root = archive->root();
    if (!root || root->kind != K::Tensor) {
        fail(path, "the chunk item is not a tensor");
        return;
    }
    const TensorRef& local = *root->tensor;
    if (local.shape != chunk.sizes) {
        fail(path, "the stored chunk's shape does not match the sizes in .metadata");
        return;
    }
    if (local.dtype != entry.dtype) {
        fail(path, "the stored chunk is " + std::string(torchName(local.dtype)) + " but .metadata says "
                       + std::string(torchName(entry.dtype)));
        return;
    }
    auto piece = archive->piece(local, chunk.offsets);
    if (!piece) {
        fail(path, piece.error().message);
        return;
    }
    // DCP file names are __{rank}_{i}.distcp; the rank is informative only.
    const std::string base = fs::path(where.relativePath).filename().string();
    if (base.size() > 2 && base.compare(0, 2, "__") == 0)
        piece->rank = std::atoi(base.c_str() + 2);
    tensor.pieces.push_back(std::move(*piece));
}

/// One tensor of .metadata with a piece per chunk, and the gaps or overlaps of its chunks.
void readDcpTensor(TensorInfo& tensor, const DcpTensor& entry, DcpSources& sources, std::vector<Problem>& problems)
{
    tensor.name = entry.name;
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    if (entry.chunks.size() > 1)
        tensor.placement = std::to_string(entry.chunks.size()) + " chunks";
    for (const auto& chunk : entry.chunks)
        addChunkPiece(tensor, entry, chunk, sources, problems);
    // The global shape and the chunks both come from .metadata, so a gap or overlap is its description's.
    for (const auto& message : checkCoverage(tensor))
        problems.push_back({ sources.metaPath, entry.name, message });
}

/// Reads every tensor on the worker threads, then adds them and their problems to `info` in .metadata's order.
Status readDcpTensors(const std::vector<DcpTensor>& entries, DcpSources& sources, int threads, Progress& progress,
                      CheckpointInfo& info)
{
    std::vector<TensorInfo> tensors(entries.size());
    std::vector<std::vector<Problem>> problems(entries.size());
    std::atomic<std::size_t> done { 0 };
    std::mutex progressMutex;
    parallelFor(entries.size(), resolveThreads(threads), [&](std::size_t i) {
        if (progress.isCanceled())
            return;
        readDcpTensor(tensors[i], entries[i], sources, problems[i]);
        std::lock_guard<std::mutex> lock(progressMutex);
        progress.report(++done, entries.size(), entries[i].name);
    });
    if (progress.isCanceled())
        return canceledError();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        info.tensors.push_back(std::move(tensors[i]));
        for (auto& p : problems[i])
            info.problems.push_back(std::move(p));
    }
    return Status::success();
}

/// torchtitan saves the model's keys beside its training state (`optimizer`, `lr_scheduler`, `dataloader`,
/// `train_state`): the optimizer's tensors go to info.optimizer, the rest of that state is counted, and `tensors`
/// keeps the model alone, which a merge writes.
void separateTrainingState(CheckpointInfo& info, const std::vector<std::string>& nonTensorEntries)
{
    moveOptimizerTensors(info, OptimizerState::Layout::TorchFlattened, torchFlattenedOptimizerKey);
    std::map<std::string, std::size_t> entries; // training-state entry → its keys that are not the optimizer's
    std::vector<TensorInfo> model;
    std::set<std::string> dropped;
    for (auto& t : info.tensors) {
        const std::string entry = torchtitanStateEntry(t.name);
        if (entry.empty()) {
            model.push_back(std::move(t));
            continue;
        }
        ++entries[entry];
        dropped.insert(t.name);
    }
    info.tensors = std::move(model);
    std::vector<Problem> problems;
    for (auto& p : info.problems)
        if (!dropped.count(p.tensor))
            problems.push_back(std::move(p));
    info.problems = std::move(problems);
    for (const auto& name : nonTensorEntries) {
        const std::string entry = torchtitanStateEntry(name);
        if (entry == "optimizer")
            ++info.optimizer.otherEntries;
        else if (!entry.empty())
            ++entries[entry];
    }
    if (info.optimizer.layout == OptimizerState::Layout::TorchFlattened)
        info.optimizer.noMasterWeights = "its optimizer is torch.optim's state, which keeps no copy of "
                                         "the weights (the model's keys are the weights it trains): merge without "
                                         "--weights_from optimizer";
    std::string listed;
    for (const auto& [entry, count] : entries)
        listed += (listed.empty() ? "" : ", ") + entry + " (" + std::to_string(count) + ")";
    if (!listed.empty())
        info.notes["training_state"] = listed + ", not part of the model";
}

} // namespace

Result<CheckpointInfo> scanDcpEntries(const std::string& dir, int threads, Progress& progress,
                                      std::vector<std::string>& nonTensorEntries)
{
    CheckpointInfo info;
    info.layout = layout_names::kDcp;
    info.root = absoluteNormal(dir).string();
    const std::string metaPath = (fs::path(info.root) / ".metadata").string();
    auto metaFile = MappedFile::open(metaPath);
    TESSERA_TRY(metaFile);
    auto metadata = unpickle((*metaFile)->view(), metaPath);
    TESSERA_TRY(metadata);
    if (!*metadata || (*metadata)->kind != K::Object)
        return makeError(metaPath + ": not a DCP Metadata object");
    std::vector<std::string>& bytesEntries = nonTensorEntries;
    bytesEntries.clear();
    auto entries = readTensorEntries(*metadata, metaPath, bytesEntries);
    TESSERA_TRY(entries);
    auto storage = readStorageData(*metadata, metaPath);
    TESSERA_TRY(storage);
    if (!bytesEntries.empty())
        info.notes["non_tensor_entries"] = std::to_string(bytesEntries.size());

    FileCache files(info.root);
    DcpSources sources { info.root, metaPath, *storage, files };
    TESSERA_TRY(readDcpTensors(*entries, sources, threads, progress, info));
    info.files.push_back(metaPath);
    for (auto& path : files.paths())
        info.files.push_back(path);
    int maxRank = -1;
    for (const auto& t : info.tensors)
        for (const auto& p : t.pieces)
            maxRank = std::max(maxRank, p.rank);
    info.parallel.worldSize = maxRank + 1;
    return info;
}

Result<CheckpointInfo> scanDcp(const std::string& dir, int threads, Progress& progress)
{
    std::vector<std::string> nonTensorEntries;
    auto info = scanDcpEntries(dir, threads, progress, nonTensorEntries);
    TESSERA_TRY(info);
    separateTrainingState(*info, nonTensorEntries);
    return info;
}

Result<DcpTrainingEntries> scanDcpTrainingEntries(const std::string& dir, int threads, Progress& progress)
{
    DcpTrainingEntries out;
    std::vector<std::string> nonTensorEntries;
    auto all = scanDcpEntries(dir, threads, progress, nonTensorEntries);
    TESSERA_TRY(all);
    out.tensors = std::move(*all);
    std::vector<TensorInfo> training;
    for (auto& t : out.tensors.tensors)
        if (!torchtitanStateEntry(t.name).empty())
            training.push_back(std::move(t));
    out.tensors.tensors = std::move(training);
    std::vector<Problem> problems;
    for (auto& p : out.tensors.problems)
        if (p.tensor.empty() || !torchtitanStateEntry(p.tensor).empty())
            problems.push_back(std::move(p));
    out.tensors.problems = std::move(problems);

    const std::string metaPath = (fs::path(out.tensors.root) / ".metadata").string();
    auto metaFile = MappedFile::open(metaPath);
    TESSERA_TRY(metaFile);
    auto metadata = unpickle((*metaFile)->view(), metaPath);
    TESSERA_TRY(metadata);
    auto storage = readStorageData(*metadata, metaPath);
    TESSERA_TRY(storage);
    const PyRef planner = (*metadata)->attr("planner_data");
    auto pathOf = [&](const std::string& fqn) -> PyRef {
        return planner && planner->kind == K::Dict ? planner->get(fqn) : nullptr;
    };
    for (const auto& t : out.tensors.tensors)
        out.plannerPaths[t.name] = pathOf(t.name);
    for (const auto& fqn : nonTensorEntries) {
        auto it = storage->find({ fqn, {} });
        if (it == storage->end())
            return makeError(metaPath + ": the entry '" + printableText(fqn) + "' has no storage entry");
        const std::string& relative = it->second.relativePath;
        const fs::path file = fs::path(out.tensors.root) / relative;
        if (relative.empty() || relative.find("..") != std::string::npos || relative.front() == '/')
            return makeError(metaPath + ": '" + printableText(fqn) + "' is stored outside the folder");
        std::error_code ec;
        const auto size = fs::file_size(file, ec);
        if (ec || it->second.offset > size || it->second.length > size - it->second.offset)
            return makeError(file.string() + ": shorter than the entry '" + printableText(fqn) + "' .metadata places in it");
        out.bytes.push_back({ fqn, file.string(), it->second.offset, it->second.length, pathOf(fqn) });
    }
    return out;
}

} // namespace tessera
