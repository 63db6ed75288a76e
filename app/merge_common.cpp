// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge_common.h"

#include "terminal_text.h"

#include "mapping/megatron_mapping.h"
#include "ops/name_mapping.h"

namespace tessera::cli {

void printMessages(const std::string& command, const std::vector<PrepareMessage>& messages, bool silent)
{
    if (silent)
        return;
    for (const auto& m : messages)
        printMessage(command, m.kind == PrepareMessage::Kind::Warning ? "warning" : "note", m.text);
}

void logPrepared(DebugLog& debug, const PreparedModel& model)
{
    if (!debug.enabled())
        return;
    debug.stagesTaken(model.stageSeconds);
    if (!model.checkpoint)
        return;
    debug.checkpoint(*model.checkpoint);
    if (model.mapping) {
        debug.mapping(*model.mapping);
    } else if (auto names = nameMapping(*model.checkpoint, model.settings.mapping)) {
        debug.mapping(*names);
    }
    if (model.lora)
        debug.line(model.lora->summary);
    for (const auto& o : model.outputs())
        debug.plan(*o.plan, *o.info, o.subfolder);
}

int reportRefusal(const ArgParser& parser, const Refusal& refusal)
{
    return reportFailure(parser, refusal.error.message, refusal.usage ? ExitUsage : ExitProblems);
}

std::string runFailureText(const Error& error)
{
    return error.isCanceled() ? "canceled; nothing was written" : error.message;
}

} // namespace tessera::cli
