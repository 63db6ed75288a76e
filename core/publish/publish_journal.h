// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The journal of a publish: the names a staging folder moves into its target, written and flushed before the
// first move. Before it is on disk, nothing in the target has changed; once it is, the publish is decided, and
// whoever comes next — the same run after an error it cannot undo, or a later run after a kill — completes it by
// applying the journal again (rolling forward). Every move is a rename within one file system, and applying the
// journal twice is the same as applying it once, so a kill at any instant leaves the target either as it was or,
// after the next run, exactly as the publish meant it to be; it never shows a complete-looking mix.

#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct PublishJournal {
    /// Top-level names in the staging folder to move into the target, in move order: the keystones (the names
    /// that make the folder look like a complete model: the index or the single model file, then config.json)
    /// come last, and the old keystones are moved aside before anything else moves.
    std::vector<std::string> names;
    std::vector<std::string> keystones;
};

/// The bookkeeping names inside a staging folder; never published.
bool isJournalBookkeeping(const std::string& name);

/// Writes the journal into `staging` and flushes it (and the folder) to disk: from here on the publish is decided.
Status commitJournal(const std::string& staging, const PublishJournal& journal);

/// The committed journal of `staging`; nullopt when none was committed (a journal half written does not count).
std::optional<PublishJournal> readJournal(const std::string& staging);

/// Applies the journal: each name still in `staging` replaces the one in `target` (the old one kept in the
/// staging folder's `.replaced/`), old keystones first. Idempotent. Flushes the target folder.
Status applyJournal(const std::string& staging, const std::string& target, const PublishJournal& journal);

/// Undoes what applyJournal() did so far: the new files go back into `staging`, the replaced ones back into the
/// target. Returns false when something could not be put back (the journal then stays, to be rolled forward).
bool undoJournal(const std::string& staging, const std::string& target, const PublishJournal& journal);

/// Removes the journal and what the publish left in `staging`: the replaced files, and a journal begun but never
/// committed. The journal goes last, so a kill meanwhile leaves a journal that is simply applied again.
Status clearJournal(const std::string& staging);

} // namespace tessera
