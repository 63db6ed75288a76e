// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QString>

namespace tessera {
struct PreparedMerge;
}

namespace tessera::ui {

/// What a merge of the loaded checkpoint would refuse, read from the one plan the Merge page prepares with its
/// flags and the Mapping view's rules (prepareMerge(), as `tessera merge` finds it): the Summary, the tree and the
/// status bar all show this answer, never one of their own.
struct MergeVerdict {
    bool known = false;      ///< a plan of the loaded checkpoint is on screen
    QString refusal;         ///< why the merge would stop before writing, from the checkpoint or its mapping
    int mappingProblems = 0; ///< mapping rows that need attention (unmapped, missing, duplicate, shape mismatch…)

    bool refused() const { return !refusal.isEmpty(); }
    /// One line for the status bar and the tree: "a merge would refuse it (12 mapping problems)", or empty.
    QString shortText() const;
};

/// The verdict of `prepared` (the Merge page's plan) about `checkpoint`; unknown when the plan is of another
/// checkpoint or there is none yet. A refused output folder or format is the Merge page's own business.
MergeVerdict mergeVerdict(const tessera::PreparedMerge* prepared, const CheckpointPtr& checkpoint);

} // namespace tessera::ui
