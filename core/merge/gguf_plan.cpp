// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/gguf_plan.h"

#include "command_name.h"
#include "formats/gguf_mixture.h"
#include "formats/gguf_quant.h"
#include "formats/gguf_names.h"
#include "formats/gguf_tokenizer.h"
#include "io/byte_size.h"
#include "io/path_kinds.h"
#include "io/printable.h"
#include "io/text_file.h"
#include "listed_items.h"
#include "merge/checkpoint_problems.h"
#include "merge/gguf_hparams.h"
#include "merge/gguf_modelfile.h"
#include "merge/hf_output.h"
#include "publish/target_checks.h"
#include "model/rope_permute.h"
#include "text_util.h"
#include "formats/layout_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using nlohmann::json;

namespace tessera {

namespace {

/// A GGUF file's own name for its model: general.name, else the file's name without ".gguf".
std::string ggufModelName(const std::string& path)
{
    auto file = MappedFile::open(path);
    auto header = file ? parseGgufHeader((*file)->view()) : Result<GgufHeader>(file.error());
    const GgufValue* name = header ? header->find("general.name") : nullptr;
    if (name && name->asString() && !name->asString()->empty())
        return *name->asString();
    return fs::path(path).stem().string();
}

/// The model's name: a GGUF file's own (its file name is not: "X.gguf" would become "X.gguf-q8_0.gguf"), else
/// config.json's _name_or_path, else the checkpoint's folder above verl's and Megatron's own folder names (actor,
/// global_step_N, iter_N, huggingface…).
std::string defaultModelName(const json& config, const CheckpointInfo& info)
{
    if (layoutFamily(info.layout) == LayoutFamily::Gguf)
        return ggufModelName(info.root);
    const std::string& root = info.root;
    if (config.contains("_name_or_path") && config["_name_or_path"].is_string()) {
        const std::string n = fs::path(config["_name_or_path"].get<std::string>()).filename().string();
        if (!n.empty() && n != "." && n != "..")
            return n;
    }
    fs::path p = absoluteNormal(fs::path(root));
    while (!p.empty() && p != p.parent_path()) {
        const std::string n = p.filename().string();
        const bool generic = n.empty() || n == "actor" || n == "critic" || n == "huggingface" || n == "model"
            || n == "dist_ckpt" || n == "release" || n.rfind("global_step_", 0) == 0 || n.rfind("iter_", 0) == 0
            || n.rfind("checkpoint-", 0) == 0;
        if (!generic)
            return n;
        p = p.parent_path();
    }
    return "model";
}

/// `s` as a file name's stem: no folder separators, spaces or colons, and nothing a terminal would act on when the
/// folder is listed (control characters, bytes that are not UTF-8), each replaced by '_'.
std::string safeFileStem(std::string s)
{
    for (char& c : s)
        if (c == '/' || c == '\\' || c == ' ' || c == ':')
            c = '_';
    // With backslashes gone, every "\x" printableText() leaves is one of its escapes of a byte.
    const std::string printable = printableText(s);
    std::string stem;
    for (std::size_t i = 0; i < printable.size(); ++i) {
        if (printable.compare(i, 2, "\\x") == 0) {
            stem += '_';
            i += 3;
        } else {
            stem += printable[i];
        }
    }
    return stem.empty() ? "model" : stem;
}

/// llama 3's rope_freqs: per rotary frequency the factor its wavelength gets (convert_hf_to_gguf's
/// generate_extra_tensors), in float32 like torch computes the frequencies.
std::string llama3RopeFactors(double theta, std::int64_t headDim, const json& scaling)
{
    const double factor = scaling.value("factor", 8.0);
    const double low = scaling.value("low_freq_factor", 1.0);
    const double high = scaling.value("high_freq_factor", 4.0);
    const double oldContext = scaling.value("original_max_position_embeddings", 8192.0);
    const double lowWavelen = oldContext / low, highWavelen = oldContext / high;
    std::string bytes;
    for (std::int64_t i = 0; i < headDim; i += 2) {
        const float exponent = static_cast<float>(i) / static_cast<float>(headDim);
        const float freq = 1.0f / std::pow(static_cast<float>(theta), exponent);
        const double wavelen = 2 * M_PI / static_cast<double>(freq);
        double f;
        if (wavelen < highWavelen)
            f = 1;
        else if (wavelen > lowWavelen)
            f = factor;
        else {
            const double smooth = (oldContext / wavelen - low) / (high - low);
            f = 1 / ((1 - smooth) / factor + smooth);
        }
        const float v = static_cast<float>(f);
        bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
    return bytes;
}

/// True for the tensors convert_hf_to_gguf writes as F32 whatever the output type: 1-D tensors, norms and the MoE
/// router.
bool staysF32(const std::string& name, const Shape& shape)
{
    return shape.size() <= 1 || endsWith(name, "_norm.weight") || endsWith(name, "ffn_gate_inp.weight")
        || endsWith(name, "ffn_gate_inp_shexp.weight");
}

/// One output tensor before layout.
struct Pending {
    std::string name;
    TensorInfo view;        ///< under the GGUF name, pieces re-indexed
    Shape shape;            ///< the GGUF tensor's shape in PyTorch order (ggml dims reversed)
    std::vector<std::string> sources;
    std::string transform;
    std::optional<std::string> generatedBytes;
};

/// What choosing a tensor's ggml type looks at; made from a planned tensor as from a pending one, so the plan and
/// the sizes of the other output types (ggufFileSizesByType) are typed by the same functions.
struct TypingInput {
    std::string name;
    std::vector<std::uint64_t> dims;  ///< ggml order
    bool keptF32 = false;             ///< generated, or one of the tensors that stay F32 (staysF32)
    DType dtype = DType::Unknown;     ///< the checkpoint's dtype
};

std::vector<TypingInput> typingInputs(const std::vector<Pending>& pending)
{
    std::vector<TypingInput> inputs;
    for (const auto& p : pending) {
        std::vector<std::uint64_t> dims;
        for (auto it = p.shape.rbegin(); it != p.shape.rend(); ++it)
            dims.push_back(static_cast<std::uint64_t>(*it));
        inputs.push_back({ p.name, std::move(dims), p.generatedBytes || staysF32(p.name, p.shape), p.view.dtype });
    }
    return inputs;
}

std::vector<TypingInput> typingInputs(const GgufPlan& plan)
{
    std::vector<TypingInput> inputs;
    for (const auto& t : plan.tensors)
        inputs.push_back({ t.info.name, t.info.dims, t.keptF32,
                           t.keptF32 ? DType::Float32 : plan.view.tensors[t.viewIndex].dtype });
    return inputs;
}

/// The plain type a tensor that is not quantized is written in: F32 when it is kept F32, else `plain`.
GgmlType plainTypeOf(const TypingInput& t, GgmlType plain)
{
    return t.keptF32 ? GgmlType::F32 : plain;
}

/// The plain export a quantized file is made from, as `llama-quantize` would be given it: bf16 (or f16) when every
/// tensor that would be written in that type holds it, else f32. Which one only matters for the tensors the
/// mixture leaves alone; the others are quantized from the same float32 values either way.
GgmlType losslessPlainType(const std::vector<TypingInput>& inputs)
{
    for (GgmlType candidate : { GgmlType::BF16, GgmlType::F16 }) {
        const DType dtype = ggmlType(candidate).plainDtype;
        bool all = true, any = false;
        for (const auto& t : inputs)
            if (!t.keptF32) {
                any = true;
                all = all && t.dtype == dtype;
            }
        if (any && all)
            return candidate;
    }
    return GgmlType::F32;
}

/// The warning for tensors written in a fallback type: how many, and what they became.
std::string fallbackWarning(const std::map<std::string, std::size_t>& became, const char* whose)
{
    std::size_t count = 0;
    std::string types;
    for (const auto& [name, n] : became) {
        count += n;
        types += (types.empty() ? "" : ", ") + name + " ×" + std::to_string(n);
    }
    return std::to_string(count) + " tensor(s) have rows that are not whole blocks of their type and are written "
        + "in a type of smaller blocks (" + types + "), as " + whose + " does";
}

/// Each tensor's type for a plain or Q8_0-only output type: F32 where a tensor is kept F32, else the output
/// type's, or its fallback when the rows are not whole blocks of it, as llama.cpp's converter writes them.
std::vector<GgmlType> plainTypes(const std::vector<TypingInput>& inputs, GgmlType wanted,
                                 std::map<std::string, std::size_t>& became)
{
    std::vector<GgmlType> types;
    for (const auto& t : inputs) {
        GgmlType type = plainTypeOf(t, wanted);
        if (type == wanted) {
            type = ggmlTypeForRows(wanted, t.dims.empty() ? 1 : t.dims[0]);
            if (type != wanted)
                ++became[ggmlType(type).name];
        }
        types.push_back(type);
    }
    return types;
}

/// Each tensor's type for a quantized output type: llama.cpp's mixture (formats/gguf_mixture.h) over the plain
/// export it would be made from.
Result<std::vector<GgmlType>> mixtureTypes(const std::vector<TypingInput>& inputs, const GgufOutTypeInfo& outType,
                                           const GgufMixtureModel& model, std::map<std::string, std::size_t>& became)
{
    const GgmlType plain = losslessPlainType(inputs);
    std::vector<GgufMixtureTensor> tensors;
    for (const auto& t : inputs)
        tensors.push_back({ t.name, t.dims, plainTypeOf(t, plain) });
    auto choices = ggufMixtureTypes(outType, model, tensors);
    TESSERA_TRY(choices);
    std::vector<GgmlType> types;
    for (const auto& choice : *choices) {
        if (choice.fellBack)
            ++became[ggmlType(choice.type).name];
        types.push_back(choice.type);
    }
    return types;
}

/// The tensors' infos for the layout, in `inputs`' order, each with the ggml type `outType` writes it in; a
/// warning when some fell back to smaller blocks.
Result<std::vector<GgufTensorInfo>> typedTensorInfos(const std::vector<TypingInput>& inputs,
                                                     const GgufOutTypeInfo& outType, const GgufMixtureModel& model,
                                                     std::vector<std::string>& warnings)
{
    std::map<std::string, std::size_t> became;
    std::vector<GgmlType> types;
    if (outType.tensorTypeInfo().quantized()) {
        auto mixed = mixtureTypes(inputs, outType, model, became);
        TESSERA_TRY(mixed);
        types = std::move(*mixed);
    } else {
        types = plainTypes(inputs, outType.tensorType, became);
    }
    if (!became.empty())
        warnings.push_back(fallbackWarning(became, outType.tensorTypeInfo().quantized() ? "llama.cpp's quantizer"
                                                                                        : "llama.cpp's converter"));
    std::vector<GgufTensorInfo> infos;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        GgufTensorInfo ti;
        ti.name = inputs[k].name;
        ti.dims = inputs[k].dims;
        ti.type = static_cast<std::uint32_t>(types[k]);
        infos.push_back(std::move(ti));
    }
    return infos;
}

/// How each laid-out tensor gets into the file: generated ones from memory, quantized ones assembled in their
/// dtype and quantized into their type's blocks (GgufPlan::quantized), the rest streamed by the merge engine as
/// plain floats of their type (GgufPlan::merge). Moves each tensor's view into plan.view.
Status planTensorWrites(GgufPlan& plan, std::vector<Pending>& pending, const std::vector<TypingInput>& inputs,
                        const std::vector<GgufTensorInfo>& infos, const GgufLayout& layout)
{
    plan.fileSize = layout.fileSize;
    MergePlan& merge = plan.merge;
    PlannedFile file;
    file.name = plan.fileName;
    file.size = layout.fileSize;
    file.header = layout.header;
    for (std::size_t k = 0; k < pending.size(); ++k) {
        Pending& p = pending[k];
        GgufPlannedTensor out;
        out.info = infos[k];
        out.sources = p.sources;
        out.transform = p.transform;
        out.keptF32 = inputs[k].keptF32;
        if (p.generatedBytes) {
            plan.generated.push_back({ layout.fileOffsets[k], *p.generatedBytes });
            plan.tensors.push_back(std::move(out));
            continue;
        }
        out.viewIndex = plan.view.tensors.size();
        plan.view.tensors.push_back(std::move(p.view));
        const TensorInfo& view = plan.view.tensors.back();
        const GgmlTypeInfo& type = out.typeInfo();
        auto planned = planTensorCopy(view, out.viewIndex,
                                      type.quantized() ? std::nullopt : std::optional<DType>(type.plainDtype));
        if (!planned)
            return planned.error();
        planned->file = 0;
        planned->fileOffset = layout.fileOffsets[k];
        plan.largestTensorBytes = std::max(plan.largestTensorBytes, view.nbytes());
        if (type.quantized()) {
            plan.quantized.push_back({ std::move(*planned), type.type, out.info.bytes });
        } else {
            merge.bufferBytes = std::max(merge.bufferBytes, planned->bufferBytes);
            merge.largestTensorBytes = std::max(merge.largestTensorBytes, planned->bytes);
            merge.totalBytes += planned->bytes;
            file.tensors.push_back(merge.tensors.size());
            merge.tensors.push_back(std::move(*planned));
        }
        plan.tensors.push_back(std::move(out));
    }
    merge.files.push_back(std::move(file));
    merge.diskBytes = plan.fileSize;
    return Status::success();
}

/// What the config folder says that the later steps of planGgufMerge() need.
struct GgufModelConfig {
    std::string configFile;  ///< config.json's path, for messages
    std::string configText;  ///< its text; the tokenizer step reads it again
    json config;
    std::string hfArch;      ///< config.json's architectures[0]; "" when it names none
    GgufArchitecture arch;
    GgufHparams hp;
    HfConfigFacts facts;
};

/// The architecture config.json names, or an error naming the ones Tessera can write.
Result<GgufArchitecture> ggufArchitectureOf(const std::string& hfArch, const std::string& configFile)
{
    const auto arch = ggufArchitectureFor(hfArch);
    if (!arch) {
        std::string known;
        for (const auto& a : ggufSupportedHfArchitectures())
            known += (known.empty() ? "" : ", ") + a;
        return makeError(configFile + ": architecture " + (hfArch.empty() ? std::string("(none given)") : hfArch)
                         + " cannot be written as GGUF by Tessera (it writes " + known + ")");
    }
    return *arch;
}

/// Phase: the config folder, config.json, the architecture and its hyperparameters; sets the plan's config,
/// architecture, output type, model name and file name.
Result<GgufModelConfig> readModelConfig(const CheckpointInfo& info, const GgufOptions& options, GgufPlan& plan)
{
    GgufModelConfig model;
    auto folder = listConfigFolder(options.hfConfigDir.empty() ? info.hfConfigDir : options.hfConfigDir);
    TESSERA_TRY(folder);
    plan.config = std::move(*folder);
    if (plan.config.empty())
        return makeError("no config.json was found next to the checkpoint; GGUF needs the model's config and tokenizer "
                         "(give their folder with --hf_model_path)");
    for (const auto& skipped : plan.config.skipped)
        plan.warnings.push_back(skipped);
    model.configFile = plan.config.pathOf("config.json");
    auto configText = plan.config.readText("config.json");
    TESSERA_TRY(configText);
    model.configText = std::move(*configText);
    model.config = json::parse(model.configText, nullptr, false);
    const json& config = model.config;
    if (config.is_discarded() || !config.is_object())
        return makeError(model.configFile + ": not a valid JSON object");
    if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty()
        && config["architectures"][0].is_string())
        model.hfArch = config["architectures"][0].get<std::string>();
    auto arch = ggufArchitectureOf(model.hfArch, model.configFile);
    TESSERA_TRY(arch);
    model.arch = std::move(*arch);
    plan.architecture = model.arch.name;
    auto hp = readGgufHparams(config, model.arch, model.configFile);
    TESSERA_TRY(hp);
    model.hp = std::move(*hp);
    auto facts = readHfConfig(plan.config);
    TESSERA_TRY(facts);
    model.facts = std::move(*facts);
    plan.outType = options.outType.value_or(kDefaultGgufOutType);
    plan.modelName = options.name.empty() ? defaultModelName(config, info) : options.name;
    plan.fileName = safeFileStem(plan.modelName) + "-" + ggufOutTypeName(plan.outType) + ".gguf";
    return model;
}

/// The checkpoint's tensors under llama.cpp's names, before layout, and every reason some cannot be written.
struct MappedTensors {
    std::vector<Pending> pending;
    std::map<std::string, std::size_t> stackIndex; ///< stacked GGUF name → index into pending
    std::map<std::string, std::map<int, std::size_t>> experts; ///< stacked GGUF name → expert → source tensor
    const TensorInfo* embedding = nullptr;
    const TensorInfo* tiedHead = nullptr; ///< dropped: the engine checks it equals the embedding (a TieCheck)
    std::vector<std::string> errors;
};

/// A tensor that is no expert's, under its GGUF name `name`: q/k rows permuted for llama.cpp's rotary layout where
/// the architecture wants it, the shared expert's gate squeezed to a vector. Nullopt (and an error) when the rows
/// cannot be permuted.
std::optional<Pending> renamedTensor(const TensorInfo& t, const std::string& name, const GgufModelConfig& model,
                                     std::vector<std::string>& errors)
{
    Pending p { name, t, t.shape, { t.name }, "", std::nullopt };
    p.view.name = name;
    const bool isQ = endsWith(name, "attn_q.weight") || endsWith(name, "attn_q.bias");
    const bool isK = endsWith(name, "attn_k.weight") || endsWith(name, "attn_k.bias");
    if (model.arch.permuteQK && (isQ || isK)) {
        const std::int64_t heads = isQ ? model.hp.heads : model.hp.kvHeads;
        auto permuted = permuteRotaryRows(t, heads, name);
        if (!permuted) {
            errors.push_back(permuted.error().message);
            return std::nullopt;
        }
        p.view = std::move(*permuted);
        p.transform = "rotary permutation (" + std::to_string(heads) + " heads)";
    }
    if (endsWith(name, "ffn_gate_inp_shexp.weight") && t.shape.size() == 2 && t.shape[0] == 1) {
        // [1, hidden] → [hidden]: llama.cpp holds the shared expert's gate as a vector.
        TensorInfo squeezed = t;
        squeezed.name = name;
        squeezed.shape = { t.shape[1] };
        squeezed.pieces.clear();
        for (Piece q : t.pieces) {
            if (q.shape.size() != 2)
                continue;
            q.offsets.erase(q.offsets.begin());
            q.shape.erase(q.shape.begin());
            q.strides.erase(q.strides.begin());
            squeezed.pieces.push_back(std::move(q));
        }
        p.view = std::move(squeezed);
        p.shape = { t.shape[1] };
    }
    return p;
}

/// Maps the checkpoint's tensor `i` into `out`: skipped, dropped (a tied head, told in `dropped`), refused (an
/// error), remembered as an expert of a stacked tensor, or renamed.
void mapTensor(const CheckpointInfo& info, std::size_t i, const GgufModelConfig& model, bool tied,
               std::vector<std::string>& dropped, MappedTensors& out)
{
    const TensorInfo& t = info.tensors[i];
    const auto mapped = ggufTensorName(t.name);
    if (!mapped) {
        out.errors.push_back(printableText(t.name) + ": llama.cpp's " + model.arch.name
                             + " architecture has no tensor for it");
        return;
    }
    if (mapped->skip)
        return;
    if (t.name == "model.embed_tokens.weight")
        out.embedding = &t;
    if (t.name == "lm_head.weight" && tied) {
        dropped.push_back("lm_head.weight (tied to model.embed_tokens.weight; llama.cpp uses token_embd)");
        out.tiedHead = &t;
        return;
    }
    if (!isFloatingPoint(t.dtype) || dtypeSize(t.dtype) < 2) {
        out.errors.push_back(printableText(t.name) + ": a " + std::string(torchName(t.dtype))
                             + " tensor; GGUF export writes "
                             "floating-point weights only");
        return;
    }
    if (mapped->expert >= 0) {
        if (!model.arch.moe) {
            out.errors.push_back(printableText(t.name) + ": an expert weight, but " + model.hfArch
                                 + " is not a mixture-of-experts model");
            return;
        }
        if (!out.experts[mapped->name].emplace(mapped->expert, i).second)
            out.errors.push_back(printableText(t.name) + ": expert " + std::to_string(mapped->expert)
                                 + " appears twice");
        if (!out.stackIndex.count(mapped->name)) {
            out.stackIndex[mapped->name] = out.pending.size();
            out.pending.push_back(Pending { mapped->name, {}, {}, {}, {}, std::nullopt });
        }
        return;
    }
    if (auto p = renamedTensor(t, mapped->name, model, out.errors))
        out.pending.push_back(std::move(*p));
}

/// One stacked tensor [experts, rows, cols] for the projection `name`: each expert's boxes moved to its slice.
/// Stops at the first expert missing or unlike expert 0 (an error).
void stackExperts(const std::string& name, const std::map<int, std::size_t>& byExpert, const CheckpointInfo& info,
                  const GgufHparams& hp, Pending& p, std::vector<std::string>& errors)
{
    const std::int64_t count = static_cast<std::int64_t>(byExpert.size());
    if (hp.experts > 0 && count != hp.experts) {
        errors.push_back(name + ": " + std::to_string(count) + " experts found, config.json says "
                         + std::to_string(hp.experts));
        return;
    }
    const TensorInfo& first = info.tensors[byExpert.begin()->second];
    p.view.name = name;
    p.view.dtype = first.dtype;
    p.view.shape = { count };
    p.view.shape.insert(p.view.shape.end(), first.shape.begin(), first.shape.end());
    p.shape = p.view.shape;
    p.transform = std::to_string(count) + " experts stacked";
    std::int64_t expected = 0;
    for (const auto& [e, index] : byExpert) {
        const TensorInfo& t = info.tensors[index];
        if (e != expected) {
            errors.push_back(name + ": expert " + std::to_string(expected) + " is missing");
            return;
        }
        ++expected;
        if (t.shape != first.shape || t.dtype != first.dtype) {
            errors.push_back(printableText(t.name) + ": " + shapeToString(t.shape) + " "
                             + std::string(torchName(t.dtype))
                             + " differs from expert 0's " + shapeToString(first.shape) + " "
                             + std::string(torchName(first.dtype)));
            return;
        }
        p.sources.push_back(t.name);
        for (Piece q : t.pieces) {
            const auto span = static_cast<std::int64_t>(shapeNumel(q.shape));
            q.offsets.insert(q.offsets.begin(), e);
            q.shape.insert(q.shape.begin(), 1);
            q.strides.insert(q.strides.begin(), span); // a dim of size 1: its stride is never used
            p.view.pieces.push_back(std::move(q));
        }
    }
}

/// Phase: the tensors under llama.cpp's names, in the checkpoint's order, experts stacked.
MappedTensors mapTensors(const CheckpointInfo& info, const GgufModelConfig& model, bool tied,
                         std::vector<std::string>& dropped)
{
    MappedTensors out;
    for (std::size_t i = 0; i < info.tensors.size(); ++i)
        mapTensor(info, i, model, tied, dropped, out);
    for (auto& [name, byExpert] : out.experts)
        stackExperts(name, byExpert, info, model.hp, out.pending[out.stackIndex[name]], out.errors);
    return out;
}

/// The architecture's hyperparameters as llama.cpp's metadata keys, in convert_hf_to_gguf's order.
void addHparamMetadata(GgufPlan& plan, const GgufModelConfig& model, std::uint64_t vocabRows)
{
    const std::string a = model.arch.name;
    const GgufHparams& hp = model.hp;
    auto& md = plan.metadata;
    auto u32 = [](std::int64_t v) { return GgufValue::u32(static_cast<std::uint32_t>(v)); };
    md.push_back({ "general.architecture", GgufValue::string(a) });
    md.push_back({ "general.type", GgufValue::string("model") });
    md.push_back({ "general.name", GgufValue::string(plan.modelName) });
    md.push_back({ a + ".block_count", u32(hp.layers) });
    md.push_back({ a + ".context_length", u32(hp.context) });
    md.push_back({ a + ".embedding_length", u32(hp.hidden) });
    if (hp.ffn > 0)
        md.push_back({ a + ".feed_forward_length", u32(hp.ffn) });
    md.push_back({ a + ".attention.head_count", u32(hp.heads) });
    md.push_back({ a + ".attention.head_count_kv", u32(hp.kvHeads) });
    md.push_back({ a + ".rope.freq_base", GgufValue::f32(static_cast<float>(hp.theta)) });
    md.push_back({ a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(hp.eps)) });
    if (model.arch.moe) {
        md.push_back({ a + ".expert_count", u32(hp.experts) });
        md.push_back({ a + ".expert_used_count", u32(hp.expertsUsed) });
        if (hp.expertFfn > 0)
            md.push_back({ a + ".expert_feed_forward_length", u32(hp.expertFfn) });
        if (hp.sharedFfn > 0)
            md.push_back({ a + ".expert_shared_feed_forward_length", u32(hp.sharedFfn) });
    }
    md.push_back({ "general.file_type", GgufValue::u32(ggufOutType(plan.outType).fileType) });
    md.push_back({ a + ".vocab_size", u32(static_cast<std::int64_t>(vocabRows)) });
    md.push_back({ a + ".rope.dimension_count", u32(hp.headDim) });
    md.push_back({ a + ".attention.key_length", u32(hp.headDim) });
    md.push_back({ a + ".attention.value_length", u32(hp.headDim) });
}

/// config.json's rope_scaling: linear and yarn as metadata keys, llama 3's as the generated rope_freqs tensor
/// (appended to `pending`), any other type refused.
Status addRopeScaling(GgufPlan& plan, const GgufModelConfig& model, std::vector<Pending>& pending)
{
    const json& config = model.config;
    if (!config.contains("rope_scaling") || !config["rope_scaling"].is_object())
        return Status::success();
    const std::string a = model.arch.name;
    const GgufHparams& hp = model.hp;
    auto& md = plan.metadata;
    auto u32 = [](std::int64_t v) { return GgufValue::u32(static_cast<std::uint32_t>(v)); };
    const json& rs = config["rope_scaling"];
    const std::string type = rs.contains("rope_type") && rs["rope_type"].is_string() ? rs["rope_type"].get<std::string>()
        : rs.contains("type") && rs["type"].is_string()                            ? rs["type"].get<std::string>()
                                                                                    : "";
    const double factor = rs.contains("factor") && rs["factor"].is_number() ? rs["factor"].get<double>() : 1.0;
    if (type == "linear" || type == "yarn") {
        md.push_back({ a + ".rope.scaling.type", GgufValue::string(type) });
        md.push_back({ a + ".rope.scaling.factor", GgufValue::f32(static_cast<float>(factor)) });
        if (type == "yarn" && rs.contains("original_max_position_embeddings")
            && rs["original_max_position_embeddings"].is_number_integer())
            md.push_back({ a + ".rope.scaling.original_context_length",
                           u32(rs["original_max_position_embeddings"].get<std::int64_t>()) });
    } else if (type == "llama3" && a == "llama") {
        pending.push_back(Pending { "rope_freqs.weight", {}, { hp.headDim / 2 }, {}, "generated (llama 3 rope scaling)",
                                    llama3RopeFactors(hp.theta, hp.headDim, rs) });
    } else if (!type.empty() && type != "default") {
        return makeError(model.configFile + ": rope_scaling type '" + type + "' cannot be written for llama.cpp's " + a
                         + " architecture (linear, yarn" + (a == "llama" ? ", llama3" : "") + " can)");
    }
    return Status::success();
}

/// The tokenizer's metadata, and the files it read (after config.json) as the plan's embedded files.
Status addTokenizer(GgufPlan& plan, const GgufModelConfig& model, std::uint64_t vocabRows)
{
    auto tokenizer = readGgufTokenizer(plan.config, vocabRows, model.configText);
    TESSERA_TRY(tokenizer);
    for (auto& kv : tokenizer->metadata)
        plan.metadata.push_back(std::move(kv));
    plan.tokenizerSummary = tokenizer->summary;
    plan.embeddedFiles = { "config.json" };
    plan.embeddedFiles.insert(plan.embeddedFiles.end(), tokenizer->filesRead.begin(), tokenizer->filesRead.end());
    for (const auto& w : tokenizer->warnings)
        plan.warnings.push_back(w);
    return Status::success();
}

/// Phase: metadata — the hyperparameters, rope scaling, the quantization version and the tokenizer.
Status planMetadata(GgufPlan& plan, const GgufModelConfig& model, std::uint64_t vocabRows,
                    std::vector<Pending>& pending)
{
    addHparamMetadata(plan, model, vocabRows);
    TESSERA_TRY(addRopeScaling(plan, model, pending));
    plan.metadata.push_back({ "general.quantization_version", GgufValue::u32(kGgmlQuantizationVersion) });
    return addTokenizer(plan, model, vocabRows);
}

/// The engine's budget holds the largest gathered tensor; conversions stage 16 MiB per thread; a quantized
/// tensor is assembled in its dtype and quantized into its blocks after the rest, alone, each thread converting a
/// slab of it to float32 at a time.
void estimateMemory(GgufPlan& plan, unsigned threads)
{
    MergePlan& merge = plan.merge;
    std::uint64_t quantBuffer = 0;
    for (const auto& q : plan.quantized)
        quantBuffer = std::max(quantBuffer, q.copy.bytes + q.bytes + std::max(1u, threads) * quantizeSlabBytes(q.type));
    const std::uint64_t streaming = merge.bufferBytes + std::max(1u, threads) * kMergeChunkBytes + kMergeChunkBytes;
    merge.memoryBytes = streaming;
    plan.memoryBytes = std::max(streaming, quantBuffer + kMergeChunkBytes);
}

/// What llama.cpp's quantizer reads from the file's metadata to choose each tensor's type.
GgufMixtureModel mixtureModelOf(const GgufPlan& plan, const GgufModelConfig& model)
{
    const auto count = [](std::int64_t n) { return static_cast<std::uint64_t>(std::max<std::int64_t>(0, n)); };
    return { plan.architecture, count(model.hp.layers), count(model.hp.heads), count(model.hp.kvHeads),
             count(model.hp.experts) };
}

/// Phase: layout and the merge engine's plan — the tensors' types and offsets, how each is written, the tied
/// head's check, the view's files and the memory estimate.
Status planLayout(GgufPlan& plan, MappedTensors& mapped, const CheckpointInfo& info, const GgufOptions& options,
                  const GgufModelConfig& model)
{
    const bool configTies = model.facts.tieWordEmbeddings;
    plan.mixtureModel = mixtureModelOf(plan, model);
    const std::vector<TypingInput> inputs = typingInputs(mapped.pending);
    auto infos = typedTensorInfos(inputs, ggufOutType(plan.outType), plan.mixtureModel, plan.warnings);
    TESSERA_TRY(infos);
    auto layout = layoutGgufFile(plan.metadata, *infos);
    TESSERA_TRY(layout);
    TESSERA_TRY(planTensorWrites(plan, mapped.pending, inputs, *infos, *layout));
    // A dropped head must equal the embedding, as a merge checks it; both are read only for that comparison.
    if (mapped.tiedHead && mapped.embedding) {
        plan.view.tensors.push_back(*mapped.tiedHead);
        plan.view.tensors.push_back(*mapped.embedding);
        const std::size_t n = plan.view.tensors.size();
        plan.merge.tieChecks.push_back({ n - 2, n - 1, options.forceTieWordEmbeddings && !configTies });
    }
    plan.view.layout = info.layout;
    plan.view.root = info.root;
    plan.view.hfConfigDir = plan.config.path;
    plan.view.files = info.files;
    plan.view.parallel = info.parallel;
    estimateMemory(plan, options.threads);
    return Status::success();
}

} // namespace

Result<GgufPlan> planGgufMerge(const CheckpointInfo& info, const GgufOptions& options)
{
    TESSERA_TRY(refuseCheckpointProblems(info, "exported"));
    if (!info.loraDeltas.empty())
        return makeError(info.root + ": a LoRA checkpoint; merge it into a Hugging Face folder first (" + commandName()
                         + " merge --lora fused) and export that folder as GGUF");
    if (info.tensors.empty())
        return makeError(info.root + ": the checkpoint holds no tensors");
    GgufPlan plan;
    auto model = readModelConfig(info, options, plan);
    TESSERA_TRY(model);

    // --- Tensors under llama.cpp's names --------------------------------------------------------------------
    const bool tied = options.forceTieWordEmbeddings || model->facts.tieWordEmbeddings;
    // Before anything is derived from its numbers (head counts, rope_freqs' length): config.json must describe
    // the tensors as llama.cpp will read them.
    TESSERA_TRY(checkGgufHparams(model->hp, model->arch, info, tied, model->configFile));
    MappedTensors mapped = mapTensors(info, *model, tied, plan.dropped);
    if (!mapped.errors.empty())
        return makeError("cannot write " + model->hfArch + " as GGUF (" + model->arch.name + "): "
                         + std::to_string(mapped.errors.size())
                         + " tensor(s) llama.cpp cannot take:" + listedItems(mapped.errors, 20));
    if (!mapped.embedding)
        return makeError(info.root + ": model.embed_tokens.weight is missing; llama.cpp needs the token embedding");
    const TensorInfo& embedding = *mapped.embedding;
    const std::uint64_t vocabRows = static_cast<std::uint64_t>(embedding.shape.empty() ? 0 : embedding.shape[0]);

    // --- Metadata ---------------------------------------------------------------------------------------------
    TESSERA_TRY(planMetadata(plan, *model, vocabRows, mapped.pending));

    // --- Layout and the merge engine's plan -----------------------------------------------------------------
    TESSERA_TRY(planLayout(plan, mapped, info, options, *model));
    GgufModelfile modelfile = ggufModelfile(plan.fileName, plan.config, plan.metadata);
    plan.merge.generatedFiles = { { kModelfileName, std::move(modelfile.text) } };
    plan.warnings.insert(plan.warnings.end(), modelfile.warnings.begin(), modelfile.warnings.end());
    return plan;
}

std::vector<std::pair<GgufOutType, std::uint64_t>> ggufFileSizesByType(const GgufPlan& plan)
{
    const std::vector<TypingInput> inputs = typingInputs(plan);
    std::vector<std::pair<GgufOutType, std::uint64_t>> sizes;
    for (const auto& type : ggufOutTypes()) {
        std::vector<std::string> warnings;
        auto infos = typedTensorInfos(inputs, type, plan.mixtureModel, warnings);
        // general.file_type's value differs between the types, never its size: the plan's header serves them all.
        auto layout = infos ? layoutGgufFile(plan.metadata, *infos) : Result<GgufLayout>(infos.error());
        sizes.emplace_back(type.id, layout ? layout->fileSize : 0);
    }
    return sizes;
}

std::vector<GgmlTypeCount> ggufTypeCounts(const GgufPlan& plan)
{
    std::vector<GgmlTypeCount> counts;
    for (const auto& t : plan.tensors) {
        auto it = std::find_if(counts.begin(), counts.end(), [&](const GgmlTypeCount& c) { return c.type == t.info.type; });
        if (it == counts.end())
            it = counts.insert(counts.end(), GgmlTypeCount { t.info.type, 0, 0 });
        it->tensors += 1;
        it->bytes += t.info.bytes;
    }
    // What the file is mostly made of comes first; equal bytes (empty tensors) in ggml's numbering, so the line is
    // the same on every run.
    std::sort(counts.begin(), counts.end(), [](const GgmlTypeCount& a, const GgmlTypeCount& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.type < b.type;
    });
    return counts;
}

std::string ggufTypeCountsText(const GgufPlan& plan)
{
    std::string text;
    for (const auto& c : ggufTypeCounts(plan))
        text += (text.empty() ? "" : ", ") + ggmlTypeName(c.type) + " ×" + std::to_string(c.tensors);
    return text;
}

std::string ggufPlanSummary(const GgufPlan& plan, bool listTensors)
{
    std::ostringstream out;
    // Names, paths and metadata come from the checkpoint's files: each is escaped where it is put in a line.
    out << "Checkpoint  " << printableText(plan.merge.checkpoint) << " (" << plan.merge.layout << ")\n";
    out << "GGUF        " << plan.architecture << ", " << ggufOutTypeName(plan.outType) << ", " << plan.tensors.size()
        << " tensors, " << plan.metadata.size() << " metadata keys\n";
    std::size_t permuted = 0, stacked = 0;
    for (const auto& t : plan.tensors) {
        permuted += t.transform.rfind("rotary", 0) == 0 ? 1 : 0;
        stacked += t.transform.find("experts stacked") != std::string::npos ? 1 : 0;
    }
    out << "Types       " << ggufTypeCountsText(plan) << "\n";
    if (permuted)
        out << "Rotary      " << permuted << " q/k tensors with rows permuted for llama.cpp's rotary layout\n";
    if (stacked)
        out << "Experts     " << stacked << " stacked expert tensors\n";
    out << "Tokenizer   " << printableText(plan.tokenizerSummary) << "\n";
    std::string embedded;
    for (const auto& name : plan.embeddedFiles)
        embedded += (embedded.empty() ? "" : ", ") + printableText(name);
    out << "Read        " << embedded << " (carried in the file's metadata)\n";
    out << "Output      " << printableText(plan.fileName) << "  " << formatBytes(plan.fileSize) << "\n";
    out << "            " << kModelfileName << " beside it, for `ollama create NAME -f " << kModelfileName << "`\n";
    out << "Config      " << printableText(plan.config.path) << "\n";
    for (const auto& d : plan.dropped)
        out << "Not written " << printableText(d) << "\n";
    out << "Disk        " << formatBytes(plan.fileSize) << "\n";
    out << "Memory      about " << formatBytes(plan.memoryBytes) << " (largest tensor "
        << formatBytes(plan.largestTensorBytes) << ")\n";
    for (const auto& w : plan.warnings)
        out << "Warning     " << printableText(w) << "\n";
    if (listTensors)
        for (const auto& t : plan.tensors) {
            std::string dims;
            for (auto d : t.info.dims)
                dims += (dims.empty() ? "" : ", ") + std::to_string(d);
            std::string sources;
            if (!t.sources.empty())
                sources = t.sources.front() + (t.sources.size() > 1 ? " … (" + std::to_string(t.sources.size()) + ")" : "");
            out << "  " << printableText(t.info.name) << "  " << ggmlTypeName(t.info.type) << " [" << dims << "]  ← "
                << (sources.empty() ? "(generated)" : printableText(sources))
                << (t.transform.empty() ? "" : ", " + printableText(t.transform))
                << "  @" << t.info.offset << "\n";
        }
    return out.str();
}

json ggufPlanToJson(const GgufPlan& plan)
{
    json tensors = json::array();
    for (const auto& t : plan.tensors)
        tensors.push_back({ { "name", t.info.name }, { "type", ggmlTypeName(t.info.type) }, { "dims", t.info.dims },
                            { "offset", t.info.offset }, { "bytes", t.info.bytes }, { "sources", t.sources },
                            { "transform", t.transform } });
    json metadata = json::object();
    for (const auto& kv : plan.metadata)
        metadata[kv.key] = kv.value.summary(200);
    return { { "format", "gguf" },
             { "architecture", plan.architecture },
             { "outtype", ggufOutTypeName(plan.outType) },
             { "file", plan.fileName },
             { "files", plan.outputFileNames() },
             { "file_size", plan.fileSize },
             { "memory_bytes", plan.memoryBytes },
             { "largest_tensor_bytes", plan.largestTensorBytes },
             { "tokenizer", plan.tokenizerSummary },
             { "embedded_files", plan.embeddedFiles },
             { "metadata", metadata },
             { "tensors", tensors },
             { "dropped", plan.dropped },
             { "warnings", plan.warnings } };
}

Status checkGgufTarget(const GgufPlan& plan, const std::string& targetDir)
{
    TESSERA_TRY(checkTarget(targetDir, plan.outputFileNames()));
    TESSERA_TRY(checkTargetApart(targetDir, mergeSourceFolders({ MergeOutput { &plan.view, &plan.merge, "" } })));
    if (auto free = freeDiskBytes(targetDir); free && *free < plan.fileSize)
        return makeError("the export writes " + std::to_string(plan.fileSize) + " bytes but only "
                         + std::to_string(*free) + " are free on the disk holding "
                         + absoluteNormal(targetDir).string());
    return Status::success();
}

} // namespace tessera
