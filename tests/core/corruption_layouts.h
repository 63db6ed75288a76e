// SPDX-License-Identifier: GPL-3.0-or-later
// The checkpoint layouts the corruption matrix damages: for each, the smallest fixture of that layout and the
// files inside it that the cases break.
#pragma once

#include <string>
#include <vector>

namespace tessera::test {

/// How a layout's files are built, which decides the cases that apply to it.
enum class FileKind {
    TorchSave,   ///< per-rank torch.save ZIPs (verl FSDP, Megatron per-rank): data.pkl and data/ records
    Dcp,         ///< a pickled .metadata plus .distcp files of concatenated torch.save items
    Safetensors, ///< Hugging Face safetensors files
};

struct Layout {
    std::string name;        ///< first part of every case name
    FileKind kind = FileKind::TorchSave;
    std::string fixture;   ///< the folder copied for every case (absolute), empty for a generated one
    std::string localDir;  ///< what --local_dir names, relative to the copy
    std::string rank0;     ///< the file most cases damage, relative to the copy
    std::string rank1;     ///< another rank's file (removed, replaced by a foreign one, made to disagree)
    std::string metadata;  ///< DCP's pickled .metadata, if any
    std::string config;    ///< config.json, if the merge copies one
    std::string tracker;   ///< latest_checkpointed_iteration.txt, if any
    std::string index;     ///< model.safetensors.index.json, for a sharded Hugging Face folder
    std::string foreignRank; ///< absolute path of a same-layout file from another run, put in place of rank1
};

} // namespace tessera::test
