// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge_report.h"

#include "io/crc32.h"
#include "io/durable_file.h"
#include "io/mapped_file.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

std::string hex32(std::uint32_t v)
{
    char text[9];
    std::snprintf(text, sizeof text, "%08x", v);
    return text;
}

} // namespace

Result<std::vector<std::string>> writeMergeReport(const std::string& dir, const std::string& targetDir,
                                                  const std::vector<MergeOutput>& outputs,
                                                  const std::vector<std::string>& files,
                                                  const std::vector<MappingRow>& mapping)
{
    std::map<std::string, const MappingRow*> ruleOf;
    for (const auto& row : mapping)
        if (!row.target.empty())
            ruleOf.emplace(row.target, &row);
    nlohmann::json models = nlohmann::json::array();
    std::uint64_t totalSize = 0;
    for (const auto& o : outputs) {
        nlohmann::json model = mergePlanToJson(*o.plan, *o.info);
        model["folder"] = o.subfolder;
        const fs::path folder = fs::path(dir) / o.subfolder;
        std::map<std::size_t, std::shared_ptr<MappedFile>> mapped;
        for (std::size_t i = 0; i < o.plan->tensors.size(); ++i) {
            const PlannedTensor& t = o.plan->tensors[i];
            auto& entry = model["tensors"][i];
            if (auto it = ruleOf.find(t.name); it != ruleOf.end()) {
                entry["source"] = it->second->source;
                entry["rule"] = it->second->rule;
                entry["transform"] = it->second->transform;
            }
            auto& file = mapped[t.file];
            if (!file) {
                auto opened = MappedFile::open((folder / o.plan->files[t.file].name).string());
                TESSERA_TRY(opened);
                file = *opened;
            }
            auto bytes = file->view().slice(t.fileOffset, t.bytes);
            TESSERA_TRY(bytes);
            entry["crc32"] = hex32(crc32Update(0, bytes->data(), bytes->size()));
            file->adviseDontNeed(t.fileOffset, t.bytes);
        }
        totalSize += o.plan->totalBytes;
        models.push_back(std::move(model));
    }
    std::vector<std::string> listed = files;
    listed.push_back(kMergeReportFile);
    nlohmann::json report { { "tessera_version", TESSERA_VERSION },
                            { "target_dir", targetDir },
                            { "files", listed },
                            { "total_size", totalSize },
                            { "models", models } };
    // In the staging folder, published with the model: a reader never sees half a report, or a model without it.
    TESSERA_TRY(writeFileSynced((fs::path(dir) / kMergeReportFile).string(),
                                report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"));
    return std::vector<std::string> { kMergeReportFile };
}

} // namespace tessera::cli
