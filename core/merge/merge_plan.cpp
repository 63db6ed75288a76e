// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/merge_plan.h"

#include "listed_items.h"

#include "merge/box_copy.h"
#include "merge/checkpoint_problems.h"
#include "io/byte_size.h"
#include "io/printable.h"
#include "io/regular_file.h"
#include "model/convert.h"
#include "merge/hf_output.h"
#include "merge/lora_fuse.h"
#include "model/placement.h"
#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"
#include "text_util.h"
#include "formats/layout_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// The file `t`'s name was read from, for messages about the name: a DCP folder's .metadata (its .distcp files hold
/// only bytes), else the file of its first piece, escaped.
std::string nameSourceFile(const CheckpointInfo& info, const TensorInfo& t)
{
    if (t.pieces.empty())
        return printableText(info.root);
    const fs::path file = t.pieces.front().file;
    return printableText(file.extension() == ".distcp" ? (file.parent_path() / ".metadata").string() : file.string());
}

/// The input embedding a tied lm_head.weight must equal.
std::optional<std::size_t> findEmbedding(const CheckpointInfo& info)
{
    for (const char* name : { "model.embed_tokens.weight", "transformer.wte.weight", "model.decoder.embed_tokens.weight",
                              "embed_tokens.weight", "transformer.word_embeddings.weight" })
        for (std::size_t i = 0; i < info.tensors.size(); ++i)
            if (info.tensors[i].name == name)
                return i;
    return std::nullopt;
}

} // namespace

Result<PlannedTensor> planTensorCopy(const TensorInfo& t, std::size_t index, std::optional<DType> dtype)
{
    PlannedTensor p;
    p.name = t.name;
    p.source = index;
    p.sourceDtype = t.dtype;
    p.shape = t.outputShape(); // what the file says; the boxes are in t.shape
    p.dtype = convertedDtype(t.dtype, dtype);
    if (safetensorsCode(p.dtype).empty())
        return makeError(printableText(t.name) + ": dtype " + std::string(torchName(p.dtype))
                         + " cannot be stored in safetensors");
    p.bytes = t.numel() * dtypeSize(p.dtype);

    bool partial = false;
    std::vector<std::size_t> primaries;
    for (std::size_t i = 0; i < t.pieces.size(); ++i) {
        const Piece& piece = t.pieces[i];
        if (shapeNumel(piece.shape) == 0)
            continue; // empty shards (uneven Shard, DCP's out-of-bounds empty chunks) contribute nothing
        if (piece.storedDtype != t.dtype && !(canConvert(piece.storedDtype, p.dtype)))
            return makeError(printableText(t.name) + ": piece in " + piece.file + " is "
                             + std::string(torchName(piece.storedDtype))
                             + ", which cannot be converted to " + std::string(torchName(p.dtype)));
        switch (piece.role) {
        case PieceRole::Primary:
            p.pieces.push_back(i);
            primaries.push_back(i);
            break;
        case PieceRole::PartialTerm:
            p.pieces.push_back(i);
            partial = true;
            break;
        case PieceRole::Replica:
            break;
        }
    }
    for (std::size_t i = 0; i < t.pieces.size(); ++i) {
        const Piece& piece = t.pieces[i];
        if (piece.role != PieceRole::Replica || piece.encoding != PieceEncoding::Plain)
            continue; // replicas are compared byte for byte; an encoded one (never written by training) is skipped
        for (std::size_t j : primaries)
            if (t.pieces[j].offsets == piece.offsets && t.pieces[j].shape == piece.shape) {
                p.replicas.emplace_back(i, j);
                break;
            }
    }
    if (partial) {
        if (t.placement.find("Partial(") != std::string::npos && t.placement.find("Partial(sum)") == std::string::npos)
            return makeError(printableText(t.name) + ": placement " + printableText(t.placement)
                             + " is not a sum; only Partial(sum) can be merged");
        if (!isFloatingPoint(t.dtype) || dtypeSize(t.dtype) < 2)
            return makeError(printableText(t.name) + ": Partial placement on a " + std::string(torchName(t.dtype))
                             + " tensor cannot be summed (only float16, bfloat16, float32 and float64 can)");
        p.mode = CopyMode::Sum;
        p.bufferBytes = p.bytes + t.numel() * 4;
        return p;
    }
    bool direct = true;
    for (std::size_t i : p.pieces) {
        const Piece& piece = t.pieces[i];
        if (!boxIsContiguousInTensor(piece.offsets, piece.shape, t.shape) || !isContiguous(piece.shape, piece.strides)
            || piece.encoding != PieceEncoding::Plain)
            direct = false; // an encoded piece (Q8_0, MXFP4) is decoded on its way, never copied as bytes
    }
    p.mode = direct ? CopyMode::Direct : CopyMode::Gather;
    p.bufferBytes = direct ? 0 : p.bytes;
    return p;
}

namespace {

std::string dtypeList(const std::vector<PlannedTensor>& tensors)
{
    std::map<std::string, int> counts;
    for (const auto& t : tensors)
        counts[std::string(torchName(t.dtype))]++;
    std::string s;
    for (const auto& [name, n] : counts)
        s += (s.empty() ? "" : ", ") + name + " ×" + std::to_string(n);
    return s;
}

} // namespace

const char* copyModeName(CopyMode mode)
{
    switch (mode) {
    case CopyMode::Direct:
        return "direct";
    case CopyMode::Gather:
        return "gather";
    case CopyMode::Sum:
        return "sum";
    }
    return "?";
}

bool isPeftTensorName(const std::string& name)
{
    for (const char* marker : { ".base_layer.", ".lora_A.", ".lora_B.", ".lora_embedding_A", ".lora_embedding_B",
                                ".lora_magnitude_vector" })
        if (name.find(marker) != std::string::npos)
            return true;
    return false;
}

std::vector<std::string> MergePlan::outputFileNames() const
{
    std::vector<std::string> names;
    for (const auto& f : files)
        names.push_back(f.name);
    if (!indexJson.empty())
        names.push_back("model.safetensors.index.json");
    for (const auto& s : config.files)
        names.push_back(s);
    for (const auto& g : generatedFiles)
        if (std::find(names.begin(), names.end(), g.first) == names.end())
            names.push_back(g.first);
    return names;
}

namespace {

/// Which of the checkpoint's tensors a merge reads how: LoRA factors consumed by a delta are read, not written.
struct LoraSelection {
    std::map<std::string, std::size_t> byName;          ///< tensor name → index in info.tensors
    std::vector<bool> skip;                             ///< per tensor: not written
    std::map<std::size_t, const LoraDelta*> deltaFor;   ///< weight's index → the LoRA update fused into it
};

/// Phase: the LoRA updates matched to the tensors they name; refused, with every reason, when one names a tensor
/// the checkpoint does not have or a weight has two.
Result<LoraSelection> matchLoraDeltas(const CheckpointInfo& info)
{
    LoraSelection s;
    for (std::size_t i = 0; i < info.tensors.size(); ++i)
        s.byName.emplace(info.tensors[i].name, i);
    s.skip.assign(info.tensors.size(), false);
    std::vector<std::string> errors;
    for (const auto& d : info.loraDeltas) {
        const auto w = s.byName.find(d.weight), a = s.byName.find(d.a), b = s.byName.find(d.b);
        if (w == s.byName.end() || a == s.byName.end() || b == s.byName.end()) {
            errors.push_back(printableText(d.weight)
                             + ": its LoRA update names a tensor the checkpoint does not have ("
                             + printableText(w == s.byName.end() ? d.weight : a == s.byName.end() ? d.a : d.b) + ")");
            continue;
        }
        if (!s.deltaFor.emplace(w->second, &d).second)
            errors.push_back(printableText(d.weight) + ": more than one LoRA update");
        s.skip[a->second] = s.skip[b->second] = true;
    }
    if (!errors.empty()) {
        return makeError("cannot fuse the LoRA adapter:" + listedItems(errors, 20));
    }
    return s;
}

/// Refuses PEFT names left after the LoRA factors: they would put the adapter-wrapped model under the wrong names.
Status refusePeftNames(const CheckpointInfo& info, const std::vector<bool>& skip, const MergeOptions& options)
{
    std::vector<std::string> peft;
    if (!options.keepPeftNames)
        for (std::size_t i = 0; i < info.tensors.size(); ++i)
            if (!skip[i] && isPeftTensorName(info.tensors[i].name))
                peft.push_back(info.tensors[i].name);
    if (!peft.empty())
        return makeError(info.root + ": this is a LoRA/PEFT checkpoint (" + std::to_string(peft.size())
                         + " tensors like '" + printableText(peft.front())
                         + "'). Merging it as is would write the adapter-wrapped base model under the wrong names, "
                           "so it is refused; merge it with its LoRA adapter read (tessera merge does so by default)");
    return Status::success();
}

/// Phase: the config folder (its files copied, its skipped ones warned about) and what its config.json says.
Result<HfConfigFacts> readMergeConfig(const CheckpointInfo& info, const MergeOptions& options, MergePlan& plan)
{
    const std::string configDir = options.hfConfigDir.empty() ? info.hfConfigDir : options.hfConfigDir;
    if (!configDir.empty()) {
        // A config.json that is a FIFO or a device must fail here, not count as "no config.json".
        const fs::path configJson = fs::path(configDir) / "config.json";
        std::error_code ec;
        if (fs::exists(configJson, ec) && !fs::is_regular_file(configJson, ec))
            return makeError(configJson.string() + ": is " + describeFileKind(configJson.string())
                             + ", not a regular file");
    }
    auto folder = listConfigFolder(configDir);
    TESSERA_TRY(folder);
    plan.config = std::move(*folder);
    for (const auto& skipped : plan.config.skipped)
        plan.warnings.push_back(skipped);
    auto config = readHfConfig(plan.config);
    TESSERA_TRY(config);
    if (options.expectConfig && (plan.config.path.empty() || !config->found))
        plan.warnings.push_back("no config.json found (pass --hf_model_path): the output holds only the weights");
    return config;
}

/// Phase: ties. transformers re-ties lm_head to the embedding on load, and v5 refuses both on disk: a tied
/// lm_head.weight is skipped and checked against the embedding instead.
void dropTiedHead(const CheckpointInfo& info, const MergeOptions& options, const HfConfigFacts& config,
                  MergePlan& plan, std::vector<bool>& skip)
{
    const bool tied = options.forceTieWordEmbeddings || config.tieWordEmbeddings;
    if (!tied)
        return;
    const auto embed = findEmbedding(info);
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        if (info.tensors[i].name != "lm_head.weight")
            continue;
        if (!embed) {
            plan.warnings.push_back("word embeddings are tied but no input embedding was found; lm_head.weight "
                                    "is written");
            break;
        }
        skip[i] = true;
        // Forced against an untied config.json: the config must say so too, or transformers would give the
        // model a fresh random lm_head when it loads it.
        const bool forced = !config.tieWordEmbeddings;
        plan.tieChecks.push_back({ i, *embed, forced });
        plan.configTied = plan.configTied || (forced && config.found);
        plan.dropped.push_back("lm_head.weight (tied to " + info.tensors[*embed].name + ")");
    }
    // Forced on a checkpoint without any lm_head: the config must say tied too, or transformers would give the
    // model a fresh random head.
    if (options.forceTieWordEmbeddings && !config.tieWordEmbeddings && config.found && !info.find("lm_head.weight"))
        plan.configTied = true;
}

/// Plans the copy of tensor `i` (its LoRA update fused in, if it has one); an error message when it cannot be
/// written.
Result<PlannedTensor> planOneTensor(const CheckpointInfo& info, std::size_t i, const MergeOptions& options,
                                    const LoraSelection& lora)
{
    // Refused here, by the file the name was read from: the safetensors header would refuse it later, by the
    // name of the output file, which the user cannot fix.
    if (const Status name = checkSafetensorsTensorName(info.tensors[i].name); !name)
        return makeError(nameSourceFile(info, info.tensors[i]) + ": " + name.error().message);
    auto planned = planTensorCopy(info.tensors[i], i, options.dtype);
    if (!planned)
        return planned.error();
    if (auto d = lora.deltaFor.find(i); d != lora.deltaFor.end()) {
        const std::size_t a = lora.byName.at(d->second->a), b = lora.byName.at(d->second->b);
        auto delta = planLoraDelta(*planned, info.tensors[i], info.tensors[a], a, info.tensors[b], b,
                                   d->second->scale, d->second->transposed);
        if (!delta)
            return delta.error();
        planned->delta = std::make_shared<const PlannedDelta>(std::move(*delta));
        planned->bufferBytes = loraFuseBufferBytes(*planned);
    }
    return planned;
}

/// Phase: every written tensor's copy, in the checkpoint's order; refused with every tensor that cannot be.
Status planTensors(const CheckpointInfo& info, const MergeOptions& options, const LoraSelection& lora,
                   MergePlan& plan)
{
    std::vector<std::string> errors;
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        if (lora.skip[i])
            continue;
        auto planned = planOneTensor(info, i, options, lora);
        if (!planned) {
            errors.push_back(planned.error().message);
            continue;
        }
        if (planned->delta)
            ++plan.fusedTensors;
        plan.tensors.push_back(std::move(*planned));
    }
    if (!errors.empty()) {
        return makeError("cannot merge " + std::to_string(errors.size()) + " tensor(s):" + listedItems(errors, 20));
    }
    return Status::success();
}

/// Phase: quantization. Tessera writes no quantized tensor of its own: a model whose MXFP4 experts it decodes, or
/// one trained from a quantized base (a config.json from the Hub's MXFP4 or FP8 release, --hf_model_path), comes
/// out unquantized, and config.json must stop saying otherwise or transformers would look for the quantized
/// tensors. A Hugging Face folder's other tensors are copied as they are, quantized ones included, so its config
/// stays.
Status planDequantizedConfig(const CheckpointInfo& info, const HfConfigFacts& config, MergePlan& plan)
{
    if (config.quantization.empty())
        return Status::success();
    bool decoded = false;
    for (const auto& t : plan.tensors)
        for (const auto& piece : info.tensors[t.source].pieces)
            decoded = decoded || piece.encoding == PieceEncoding::MXFP4;
    plan.configDequantized = decoded || !isHuggingFaceLayout(info.layout);
    // Quantized codes copied as they are would then be read as weights of their own.
    std::vector<std::string> raw;
    for (const auto& t : plan.tensors)
        if (plan.configDequantized && t.dtype == DType::UInt8
            && (endsWith(t.name, "_blocks") || endsWith(t.name, "_scales")))
            raw.push_back(t.name);
    if (!raw.empty())
        return makeError("config.json's quantization_config (" + config.quantization + ") is dropped, since the "
                         "weights are written unquantized, but these are quantized codes that would be written as "
                         "they are:" + listedItems(raw, 10));
    return Status::success();
}

/// With --dtype: config.json's torch_dtype, and a warning for (up to about ten) tensors that keep their own.
void noteKeptDtypes(const MergeOptions& options, MergePlan& plan)
{
    if (!options.dtype)
        return;
    plan.configDtype = options.dtype;
    for (const auto& t : plan.tensors)
        if (t.dtype != *options.dtype) {
            plan.warnings.push_back(printableText(t.name) + " keeps its dtype " + std::string(torchName(t.dtype))
                                    + " (only floating-point tensors are converted)");
            if (plan.warnings.size() > 10)
                break;
        }
}

/// The tensors' indices per output file: Hugging Face's shard split over the state dict order, or all in the one
/// file --single-file names. Also sums the plan's tensor bytes and buffers.
std::vector<std::vector<std::size_t>> shardGroups(MergePlan& plan, const MergeOptions& options)
{
    std::vector<std::uint64_t> sizes;
    for (const auto& t : plan.tensors) {
        sizes.push_back(t.bytes);
        plan.totalBytes += t.bytes;
        plan.largestTensorBytes = std::max(plan.largestTensorBytes, t.bytes);
        plan.bufferBytes = std::max(plan.bufferBytes, t.bufferBytes);
    }
    if (!options.singleFileName.empty()) {
        std::vector<std::size_t> all(plan.tensors.size());
        for (std::size_t i = 0; i < all.size(); ++i)
            all[i] = i;
        return { all };
    }
    return splitIntoShards(sizes, options.maxShardSize);
}

/// Phase: files. Hugging Face's shard split over the state dict order, then each file laid out as safetensors
/// does; the index when there are several.
Status planFiles(MergePlan& plan, const MergeOptions& options)
{
    const auto groups = shardGroups(plan, options);
    std::vector<std::pair<std::string, std::string>> weightMap;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        PlannedFile file;
        file.name = options.singleFileName.empty() ? shardFileName(g, groups.size()) : options.singleFileName;
        std::vector<SafetensorsEntry> entries;
        for (std::size_t idx : groups[g]) {
            const auto& t = plan.tensors[idx];
            entries.push_back({ t.name, t.dtype, t.shape });
        }
        auto layout = planSafetensorsFile(entries, { { "format", "pt" } });
        if (!layout)
            return layout.error().withContext(file.name);
        for (std::size_t k = 0; k < groups[g].size(); ++k) {
            auto& t = plan.tensors[groups[g][k]];
            t.file = g;
            t.fileOffset = layout->dataOffsets[k];
            weightMap.emplace_back(t.name, file.name);
        }
        file.header = layout->header;
        file.size = layout->fileSize;
        file.tensors = groups[g];
        std::sort(file.tensors.begin(), file.tensors.end(), [&](std::size_t a, std::size_t b) {
            return plan.tensors[a].fileOffset < plan.tensors[b].fileOffset;
        });
        plan.diskBytes += file.size;
        plan.files.push_back(std::move(file));
    }
    if (plan.files.size() > 1) {
        plan.indexJson = makeShardIndexJson(plan.totalBytes, weightMap);
        plan.diskBytes += plan.indexJson.size();
    }
    return Status::success();
}

/// The disk the copied and generated side files take, and the memory estimate.
void countSideFilesAndMemory(MergePlan& plan, const MergeOptions& options)
{
    for (const auto& name : plan.config.files) {
        std::error_code ec;
        plan.diskBytes += fs::file_size(plan.config.pathOf(name), ec);
    }
    for (const auto& [name, content] : plan.generatedFiles)
        plan.diskBytes += content.size();
    const bool converting = options.dtype.has_value();
    plan.memoryBytes = plan.bufferBytes + std::max(1u, options.threads) * (converting ? kMergeChunkBytes : 0)
        + kMergeChunkBytes;
}

} // namespace

Result<MergePlan> planMerge(const CheckpointInfo& info, const MergeOptions& options)
{
    TESSERA_TRY(refuseCheckpointProblems(info, "merged"));
    if (isMegatronLayout(info.layout))
        return makeError(info.root + ": a Megatron checkpoint (" + info.layout
                         + ") needs its names and fused weights mapped to Hugging Face's; merging it is not supported "
                           "by this engine yet");
    // LoRA factors consumed by a delta are read, not written; any other PEFT name would put the adapter-wrapped
    // model under the wrong names.
    auto lora = matchLoraDeltas(info);
    TESSERA_TRY(lora);
    TESSERA_TRY(refusePeftNames(info, lora->skip, options));
    if (info.tensors.empty())
        return makeError(info.root + ": the checkpoint holds no tensors");

    MergePlan plan;
    plan.checkpoint = info.root;
    plan.layout = info.layout;
    auto config = readMergeConfig(info, options, plan);
    TESSERA_TRY(config);
    plan.generatedFiles = options.generatedFiles;
    dropTiedHead(info, options, *config, plan, lora->skip);
    TESSERA_TRY(planTensors(info, options, *lora, plan));
    TESSERA_TRY(planDequantizedConfig(info, *config, plan));
    noteKeptDtypes(options, plan);
    TESSERA_TRY(planFiles(plan, options));
    countSideFilesAndMemory(plan, options);
    return plan;
}

nlohmann::json mergePlanToJson(const MergePlan& plan, const CheckpointInfo& info)
{
    nlohmann::json j;
    j["checkpoint"] = plan.checkpoint;
    j["layout"] = plan.layout;
    j["config_dir"] = plan.config.path;
    j["copied_files"] = plan.config.files;
    if (plan.configDtype)
        j["config_torch_dtype"] = std::string(torchName(*plan.configDtype));
    j["config_tie_word_embeddings"] = plan.configTied;
    j["config_dequantized"] = plan.configDequantized;
    j["total_size"] = plan.totalBytes;
    j["disk_bytes"] = plan.diskBytes;
    j["memory_bytes"] = plan.memoryBytes;
    j["largest_tensor_bytes"] = plan.largestTensorBytes;
    j["dropped"] = plan.dropped;
    j["lora_fused"] = plan.fusedTensors;
    j["warnings"] = plan.warnings;
    auto files = nlohmann::json::array();
    for (const auto& f : plan.files) {
        nlohmann::json names = nlohmann::json::array();
        for (auto t : f.tensors)
            names.push_back(plan.tensors[t].name);
        files.push_back({ { "name", f.name }, { "size", f.size }, { "header_bytes", f.header.size() },
                          { "tensors", names } });
    }
    j["files"] = files;
    auto tensors = nlohmann::json::array();
    for (const auto& t : plan.tensors) {
        const TensorInfo& src = info.tensors[t.source];
        auto steps = nlohmann::json::array();
        for (auto i : t.pieces) {
            const Piece& p = src.pieces[i];
            steps.push_back({ { "file", p.file }, { "rank", p.rank },
                              { "role", p.role == PieceRole::PartialTerm ? "partial_term" : "primary" },
                              { "box", boxText(p.offsets, p.shape) }, { "byte_offset", p.dataOffset },
                              { "dtype", std::string(torchName(p.storedDtype)) } });
        }
        tensors.push_back({ { "name", t.name },
                            { "shape", t.shape },
                            { "source_dtype", std::string(torchName(t.sourceDtype)) },
                            { "dtype", std::string(torchName(t.dtype)) },
                            { "bytes", t.bytes },
                            { "placement", src.placement },
                            { "file", plan.files[t.file].name },
                            { "file_offset", t.fileOffset },
                            { "mode", copyModeName(t.mode) },
                            { "buffer_bytes", t.bufferBytes },
                            { "replicas", t.replicas.size() },
                            { "steps", steps } });
        if (t.delta)
            tensors.back()["lora"] = { { "a", t.delta->a.name }, { "b", t.delta->b.name }, { "scale", t.delta->scale },
                                       { "rank", t.delta->a.shape.empty() ? 0 : t.delta->a.shape[0] },
                                       { "transposed", t.delta->transposed } };
    }
    j["tensors"] = tensors;
    return j;
}

std::string mergePlanSummary(const MergePlan& plan, const CheckpointInfo& info, bool listTensors)
{
    std::ostringstream out;
    // Names, paths and the messages quoting them come from the checkpoint's files: each is escaped where it is put
    // in a line, so a name cannot forge one.
    out << "Checkpoint  " << printableText(plan.checkpoint) << " (" << plan.layout << ")\n";
    std::size_t direct = 0, gather = 0, sum = 0, replicas = 0;
    for (const auto& t : plan.tensors) {
        if (!t.delta)
            (t.mode == CopyMode::Direct ? direct : t.mode == CopyMode::Gather ? gather : sum)++;
        replicas += t.replicas.size();
    }
    out << "Tensors     " << plan.tensors.size() << " (" << formatBytes(plan.totalBytes) << "; " << dtypeList(plan.tensors)
        << ")\n";
    out << "Copy        " << direct << " streamed straight into place, " << gather << " gathered, " << sum
        << " summed (Partial)";
    if (plan.fusedTensors)
        out << ", " << plan.fusedTensors << " fused with their LoRA update";
    if (replicas)
        out << "; " << replicas << " replica pieces skipped";
    out << "\n";
    if (plan.fusedTensors)
        out << "LoRA        the " << plan.fusedTensors << " fused weights are W + (B·A)·scale, computed in fp32 and "
            << "rounded once\n";
    out << "Output      ";
    for (std::size_t i = 0; i < plan.files.size(); ++i)
        out << (i ? "\n            " : "") << plan.files[i].name << "  " << formatBytes(plan.files[i].size) << " ("
            << plan.files[i].tensors.size() << " tensors)";
    if (!plan.indexJson.empty())
        out << "\n            model.safetensors.index.json";
    out << "\n";
    if (!plan.config.path.empty()) {
        out << "Config      " << printableText(plan.config.path) << "\n";
        std::string names;
        for (const auto& s : plan.config.files)
            names += (names.empty() ? "" : ", ") + printableText(s);
        out << "Copied      " << (names.empty() ? "(none)" : names) << "\n";
        if (plan.configDtype)
            out << "            config.json torch_dtype set to " << torchName(*plan.configDtype) << "\n";
        if (plan.configTied)
            out << "            config.json tie_word_embeddings set to true (--tie-word-embedding)\n";
        if (plan.configDequantized)
            out << "            config.json quantization_config removed (the weights are written unquantized)\n";
    }
    for (const auto& d : plan.dropped)
        out << "Not written " << printableText(d) << "\n";
    out << "Disk        " << formatBytes(plan.diskBytes) << "\n";
    out << "Memory      about " << formatBytes(plan.memoryBytes) << " (largest tensor "
        << formatBytes(plan.largestTensorBytes) << ")\n";
    for (const auto& w : plan.warnings)
        out << "Warning     " << printableText(w) << "\n";
    if (listTensors)
        for (const auto& t : plan.tensors) {
            const TensorInfo& src = info.tensors[t.source];
            out << "  " << printableText(t.name) << "  " << torchName(t.dtype) << " " << formatShape(t.shape) << "  "
                << copyModeName(t.mode) << (t.delta ? " + LoRA" : "") << ", " << t.pieces.size() << " piece(s)"
                << (src.placement.empty() ? "" : ", " + printableText(src.placement)) << " → "
                << plan.files[t.file].name << "@" << t.fileOffset << "\n";
        }
    return out.str();
}

} // namespace tessera
