// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The shared fixtures as the mapping and merge page tests load them, and a count of mapping rows by status.

#include "checkpointptr.h"
#include "mapping/megatron_mapping.h"
#include "models/mappingmodel.h"
#include "formats/scan.h"
#include "testutil.h"

#include <QTest>

#include <memory>
#include <string>

namespace tessera::test {

inline const char* const kLegacy = "megatron_legacy_qwen2_tp2_pp2/global_step_10/actor";
inline const char* const kDist = "megatron_dist_llama_tp2_pp2/global_step_10/actor";

/// The shared fixture `name` (relative to fixturesDir()), scanned; a scan error ends the test program.
/// The checkpoint at `path`, scanned as the workbench shares it.
inline ui::CheckpointPtr scanPath(const std::string& path)
{
    auto scanned = scanCheckpoint(path);
    if (!scanned)
        qFatal("%s", scanned.error().message.c_str());
    return std::make_shared<const CheckpointInfo>(std::move(scanned).value());
}

/// The shared fixture `name`, scanned.
inline ui::CheckpointPtr scanFixture(const std::string& name) { return scanPath(fixture(name)); }

/// How many of `model`'s rows have `status`.
inline int countStatus(const ui::MappingModel& model, MappingStatus status)
{
    int n = 0;
    for (int r = 0; r < model.rowCount(); ++r)
        n += model.index(r, 0).data(ui::MappingModel::StatusRole).toInt() == int(status);
    return n;
}

} // namespace tessera::test
