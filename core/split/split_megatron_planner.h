// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The Megatron split's planner, shared by its three parts: split_megatron.cpp reads the model backwards through
// the mapping rules and places each Megatron tensor; split_megatron_boxes.cpp finds what fills each rank's local
// tensors by mapping the planned checkpoint forward; split_megatron_files.cpp lays them out as the layout's files.
// Not an interface of its own: planMegatronSplit (split_megatron.h) is the one way in.

#include "formats/megatron_names.h"
#include "io/regex.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_rules.h"
#include "merge/merge_plan.h"
#include "model/checkpoint.h"
#include "result.h"
#include "split/split_plan.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::megatron_plan {

using Captures = std::map<std::string, std::string>;

/// One planned Megatron tensor (global name, global numbering) and the model tensors it is made of.
struct MegatronTensor {
    std::string name;
    std::size_t rule = 0;
    Captures captures;
    std::vector<std::optional<std::size_t>> parts; ///< model tensor per hf template of the rule
    MappingTransform transform = MappingTransform::Copy;
    DType dtype = DType::Unknown;
    Shape shape;
    MegatronTpSplit split = MegatronTpSplit::Replicated;
    int stage = 0, virtualStage = 0;      ///< pipeline stage and virtual stage holding it
    std::string localName;                ///< the name in its rank file (local layer and expert numbers)
    std::optional<std::int64_t> epRank;   ///< the expert rank holding it; nullopt = every expert rank
    std::optional<std::size_t> copyOf;    ///< a tied output layer: the embedding it copies
};

/// The layers one (pipeline stage, virtual stage) model chunk holds: [begin, begin + count) in global numbering.
struct PipelineChunk {
    int stage = 0, virtualStage = 0;
    std::int64_t begin = 0, count = 0;
};

/// fragments[mi][r]: what fills rank r's local tensor of megatron[mi].
using RankFragments = std::vector<std::vector<std::vector<SplitFragment>>>;

/// A rule's Hugging Face templates as regexes, with the fields each one captures.
struct CompiledRule {
    std::vector<Regex> hf;
    std::vector<std::vector<std::string>> fields;
};

struct LayerStack; // split_megatron_files.cpp

/// A vision-language model nests its GPT model under `language_model.`; the name inside it.
std::string inLanguageModel(const std::string& name);

/// A config variable, or `fallback` when config.json has none.
std::int64_t var(const ConfigVars& vars, const std::string& name, std::int64_t fallback = 0);

/// planMegatronSplit's steps over the state they share: the options, the model read through the mapping rules,
/// and the planned Megatron tensors each step fills in further. A step adds what it finds wrong to `errors`;
/// fail() makes them the one error the plan returns.
struct MegatronPlanner {
    MegatronPlanner(const MergePlan& m, const SplitOptions& o)
        : model(m), options(o), tp(o.tp), pp(o.pp), vpp(o.vpp), ep(o.ep), dist(o.format == SplitFormat::MegatronDist)
    {
    }

    Result<SplitPlan> run();

    const MergePlan& model;
    const SplitOptions& options;
    const int tp, pp, vpp, ep;
    const bool dist;
    std::vector<std::string> errors;

    MappingRuleSet rules;
    ConfigVars vars;
    std::map<std::string, std::size_t> modelIndex; ///< model tensor name → index
    bool valueModel = false, tied = false;
    std::vector<MegatronTensor> megatron;
    std::map<std::pair<std::size_t, Captures>, std::size_t> groups; ///< (rule, captures) → its Megatron tensor
    bool gated = false;
    std::string lm;                    ///< "language_model." in a vision-language model
    std::int64_t layers = 0, experts = 0, groupsKv = 0;
    std::vector<PipelineChunk> chunks;
    std::vector<Shape> localShapes;    ///< per Megatron tensor: its shape on one TP rank
    RankFragments fragments;

private:
    // split_megatron.cpp: the steps in run()'s order, and what they share.
    Error fail();
    void checkOptions();
    Status loadRules();
    Result<std::vector<CompiledRule>> compileRules() const;
    Status readModelBackwards();
    bool matchTensor(std::size_t i, const std::vector<CompiledRule>& compiled);
    std::vector<Captures> eachExpert(std::size_t r, std::size_t i, const Captures& captures);
    void chooseSpellings();
    Status renameUnstackedLayers();
    void globalShapes();
    void globalShape(MegatronTensor& t, std::int64_t vocabPad);
    std::optional<std::size_t> findTensor(const std::string& name) const;
    void addTiedOutputLayer();
    void placeTensors();
    void splitOverTp(MegatronTensor& t);
    void placeOnStage(MegatronTensor& t);
    const PipelineChunk* chunkOf(std::int64_t layer) const;
    std::string onExpertRank(MegatronTensor& t, const std::string& rest);
    // split_megatron_boxes.cpp: what of which model tensor fills each rank's local tensors.
    CheckpointInfo plannedCheckpoint();
    TensorInfo plannedTensor(std::size_t mi, const std::string& root) const;
    Result<MappingResult> mapBack(const CheckpointInfo& planned);
    Status collectFragments(const MappingResult& mapped);
    void addFragments(const TensorInfo& h, std::size_t source);
    // split_megatron_files.cpp: the files of the placed tensors, and the plan's description.
    SplitPlan planFiles() const;
    void planDistFiles(SplitPlan& plan, const std::vector<std::size_t>& order) const;
    std::map<std::string, LayerStack> layerStacks() const;
    void addDistItems(SplitFile& file, std::size_t mi, int r, const std::map<std::string, LayerStack>& stacks) const;
    void planRankFiles(SplitPlan& plan, const std::vector<std::size_t>& order) const;
    SplitFile rankFile(int s, int e, int r, const std::vector<std::size_t>& order, const std::string& iterationFolder,
                       const std::string& megatronLmItems) const;
    void describePlan(SplitPlan& plan) const;
};

} // namespace tessera::megatron_plan
