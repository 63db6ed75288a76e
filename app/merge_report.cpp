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

Status writeMergeReport(const std::string& targetDir, const std::vector<MergeOutput>& outputs,
                        const MergeOutcome& outcome, const std::vector<MappingRow>& mapping)
{
    std::map<std::string, const MappingRow*> ruleOf;
    for (const auto& row : mapping)
        if (!row.target.empty())
            ruleOf.emplace(row.target, &row);
    nlohmann::json models = nlohmann::json::array();
    for (const auto& o : outputs) {
        nlohmann::json model = mergePlanToJson(*o.plan, *o.info);
        model["folder"] = o.subfolder;
        const fs::path dir = fs::path(targetDir) / o.subfolder;
        std::map<std::size_t, std::shared_ptr<MappedFile>> files;
        for (std::size_t i = 0; i < o.plan->tensors.size(); ++i) {
            const PlannedTensor& t = o.plan->tensors[i];
            auto& entry = model["tensors"][i];
            if (auto it = ruleOf.find(t.name); it != ruleOf.end()) {
                entry["source"] = it->second->source;
                entry["rule"] = it->second->rule;
                entry["transform"] = it->second->transform;
            }
            auto& file = files[t.file];
            if (!file) {
                auto mapped = MappedFile::open((dir / o.plan->files[t.file].name).string());
                TESSERA_TRY(mapped);
                file = *mapped;
            }
            auto bytes = file->view().slice(t.fileOffset, t.bytes);
            TESSERA_TRY(bytes);
            entry["crc32"] = hex32(crc32Update(0, bytes->data(), bytes->size()));
            file->adviseDontNeed(t.fileOffset, t.bytes);
        }
        models.push_back(std::move(model));
    }
    nlohmann::json report { { "tessera_version", TESSERA_VERSION },
                            { "target_dir", outcome.outputDir },
                            { "files", outcome.files },
                            { "total_size", outcome.bytesWritten },
                            { "seconds", outcome.seconds },
                            { "warnings", outcome.warnings },
                            { "notes", outcome.notes },
                            { "models", models } };
    // Written under a temporary name and renamed, so a reader never sees half a report.
    const fs::path path = fs::path(targetDir) / kMergeReportFile;
    const std::string temp = path.string() + ".tmp";
    TESSERA_TRY(writeFileSynced(temp, report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"));
    std::error_code ec;
    fs::rename(temp, path, ec);
    if (ec)
        return makeError(path.string() + ": cannot be written: " + ec.message());
    return syncFolder(targetDir);
}

} // namespace tessera::cli
