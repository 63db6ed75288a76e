// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Where a merged model came from: the merge_report.json that `tessera merge --save_intermediate` leaves in its
// folder, read back so the summary and the tree can say which checkpoint, rule and pieces each tensor came from.

#include "model/checkpoint.h"

#include <QHash>
#include <QString>

namespace tessera::ui {

struct Provenance {
    bool found = false;
    QString checkpoint;              ///< the merged checkpoint's folder
    QString layout;                  ///< its layout ("verl-fsdp", "hf (mapped from megatron-legacy)")
    QString version;                 ///< the Tessera version that merged it
    QHash<QString, QString> tensors; ///< tensor name → "from … (rule …, transform …), CRC-32 …"
};

/// The provenance of a Hugging Face folder, from its merge_report.json; `found` is false for other layouts,
/// folders without one, and reports that are not valid JSON.
Provenance readProvenance(const tessera::CheckpointInfo& info);

} // namespace tessera::ui
