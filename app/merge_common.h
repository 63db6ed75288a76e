// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What `tessera merge`, `test` and `split` print of a prepare (core/ops): its messages, its --debug log, why it
// stops, and how a run that did not finish ends.

#include "cli_args.h"
#include "debug_log.h"
#include "terminal_progress.h"

#include "ops/prepare_model.h"

#include <string>
#include <vector>

namespace tessera::cli {

/// Prints each message as "tessera <command>: warning: …" or "…: note: …", unless `silent` (--json, --quiet).
void printMessages(const std::string& command, const std::vector<PrepareMessage>& messages, bool silent);

/// --debug: the stages a prepare took, the checkpoint as read, the name of every tensor it writes, the adapter and
/// every tensor's plan.
void logPrepared(DebugLog& debug, const PreparedModel& model);

/// The spine of every command that prepares (merge, test, split): `prepare(request, context)` with the scans'
/// progress on the terminal, then what it found printed and logged. The caller stops on the result's refusal.
template <typename Request, typename Prepare>
auto prepareForCommand(const std::string& command, const Request& request, DebugLog& debug, Prepare prepare)
{
    TerminalProgress scanning("Scanning", TerminalProgress::Unit::Items, request.silent());
    PrepareContext context;
    context.progress = &scanning;
    auto prepared = prepare(request, context);
    scanning.finish();
    logPrepared(debug, prepared.model);
    printMessages(command, prepared.model.messages, request.silent());
    return prepared;
}

/// Reports `refusal` as reportFailure() does; returns its exit code (2 for a usage error, else 1).
int reportRefusal(const ArgParser& parser, const Refusal& refusal);

/// What a failed run says: "canceled; nothing was written" when it was canceled, else its error.
std::string runFailureText(const Error& error);

} // namespace tessera::cli
