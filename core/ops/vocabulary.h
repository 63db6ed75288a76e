// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The words requests take, each list in one place: which --backend reads which layout, the --dtype names, the
// --lora modes and the split formats. The command line's checks and help, and the workbench's choices, read them
// here (the GGUF output types, with what each is for, are formats/gguf_types.h's ggufOutTypes()).

#include "formats/layout_registry.h"
#include "merge/gguf_plan.h"
#include "merge/lora_plan.h"
#include "model/dtype.h"
#include "ops/model_request.h"
#include "result.h"
#include "split/split_plan.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// One value of --backend and the family of layouts it reads (formats/layout_registry.h; "auto" reads every layout).
struct BackendEntry {
    std::string name;
    std::optional<LayoutFamily> family; ///< none for auto
};

/// auto, fsdp, dcp, megatron.
const std::vector<BackendEntry>& backends();
bool isBackendName(const std::string& name);
/// True when --backend `backend` reads a checkpoint of `layout`.
bool backendReads(const std::string& backend, const std::string& layout);
/// The backend a command line names for a checkpoint of `layout`: the one that reads it, or auto for a layout
/// only auto reads (a Hugging Face folder, a GGUF file).
std::string backendForLayout(const std::string& layout);
/// "auto, fsdp, dcp or megatron", for messages and help.
std::string backendNameList();

/// One --dtype a merge converts floating tensors to, by the name the flag lists (aliases such as bfloat16 are read
/// by dtypeFromUserName()).
struct DtypeEntry {
    std::string name;
    DType dtype;
};
/// bf16, fp16, fp32.
const std::vector<DtypeEntry>& outputDtypes();
/// "bf16, fp16 or fp32".
std::string outputDtypeList();
/// --dtype's value read (nullopt when not given: each tensor keeps its dtype); the error names the flag's choices.
Result<std::optional<DType>> outputDtypeValue(const std::optional<std::string>& name);

/// both, fused, adapter: the --lora modes, the default first.
const std::vector<LoraOutput>& loraOutputs();

/// --weights_from's words, the default first: model, optimizer.
struct WeightsSourceEntry {
    std::string name;
    WeightsSource source;
};
const std::vector<WeightsSourceEntry>& weightsSources();
/// "model or optimizer".
std::string weightsSourceList();
/// --weights_from's value read (the default when not given); the error names the flag's choices.
Result<WeightsSource> weightsSourceValue(const std::optional<std::string>& name);

/// fsdp, dcp, megatron, megatron-dist.
const std::vector<SplitFormat>& splitFormats();

} // namespace tessera
