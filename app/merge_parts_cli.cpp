// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge_parts_cli.h"

#include "ops/part_spec.h"
#include "program.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "io/byte_size.h"
#include "io/printable.h"
#include "merge/gguf_parts.h"
#include "merge/merge_parts.h"
#include "publish/part_set.h"
#include "split/split_parts.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace tessera::cli {

namespace {

std::string joined(const std::vector<unsigned>& parts)
{
    std::string text;
    for (auto k : parts)
        text += (text.empty() ? "" : ", ") + std::to_string(k);
    return text;
}

/// "1 tensor", "3 tensors".
std::string count(std::size_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string seconds(double s)
{
    std::ostringstream out;
    out << std::fixed << std::setprecision(s < 10 ? 2 : 1) << s << " s";
    return out.str();
}

std::string dump(const nlohmann::json& j) { return jsonText(j); }

int fail(const ArgParser& parser, const std::string& message, int code = ExitProblems)
{
    return reportFailure(parser, message, code);
}

/// A host as a record names it, for one line: escaped, and cut where no host name goes (HOST_NAME_MAX is 64).
std::string shownHost(const std::string& host)
{
    constexpr std::size_t kLongest = 255;
    if (host.empty())
        return "an unknown host";
    return printableText(host.substr(0, kLongest)) + (host.size() > kLongest ? "…" : "");
}

/// "pid 1234", or "pid unknown" when the file gave none that a pid can be.
std::string shownPid(const PartProcess& p)
{
    return "pid " + (p.pid ? std::to_string(*p.pid) : std::string("unknown"));
}

int statusOf(const ArgParser& parser)
{
    const std::string target = parser.value("status");
    const bool json = parser.isSet("json");
    if (target.empty())
        return fail(parser, "--status: needs the target folder of the split " + parser.command(), ExitUsage);
    if (parser.isSet("discard")) {
        auto discarded = PartSet::discardAll(target);
        if (!discarded)
            return fail(parser, discarded.error().message);
        for (const auto& note : *discarded)
            printMessage(parser.command(), "note", note);
    }
    const auto sets = PartSet::status(target);
    bool pending = false;
    nlohmann::json j { { "target", target }, { "sets", nlohmann::json::array() } };
    std::ostringstream text;
    for (const auto& s : sets) {
        pending = true;
        nlohmann::json done = nlohmann::json::array();
        for (const auto& r : s.done)
            done.push_back({ { "part", r.part }, { "bytes", r.bytes }, { "seconds", r.seconds },
                             { "host", r.process.host },
                             { "pid", r.process.pid ? nlohmann::json(*r.process.pid) : nlohmann::json() } });
        std::string finisher;
        if (s.finisher)
            finisher = s.finisher->host + (s.finisher->pid ? " " + std::to_string(*s.finisher->pid) : "");
        j["sets"].push_back({ { "folder", s.folder }, { "id", s.id }, { "parts", s.parts },
                              { "total_bytes", s.totalBytes }, { "done", done }, { "missing", s.missing },
                              { "finisher", finisher }, { "finisher_alive", s.finisherAlive } });
        text << "Parts of " << parser.command() << " " << s.id << " into " << printableText(target) << " ("
             << printableText(s.folder) << "):\n";
        if (s.parts == 0) {
            text << "  its plan.json is missing or unreadable; run any part again to rewrite it\n";
            continue;
        }
        text << "  " << s.parts << " parts, " << formatBytes(s.totalBytes) << "; " << s.done.size() << " done, "
             << s.missing.size() << " missing\n";
        std::size_t d = 0;
        for (unsigned k = 0; k < s.parts; ++k) {
            const std::string bytes = k < s.shareBytes.size() ? formatBytes(s.shareBytes[k]) : "?";
            if (d < s.done.size() && s.done[d].part == k) {
                const auto& r = s.done[d++];
                text << "  part " << k << ": done (" << bytes << ", " << seconds(r.seconds) << " on "
                     << shownHost(r.process.host) << ", " << shownPid(r.process) << ")\n";
            } else {
                text << "  part " << k << ": missing (" << bytes << ")\n";
            }
        }
        if (!s.missing.empty())
            text << "  missing: part" << (s.missing.size() > 1 ? "s " : " ") << joined(s.missing) << "; run "
                 << (s.missing.size() > 1 ? "them" : "it") << " with the same options ("
                 << (s.missing.size() > 1 ? "--part K/" + std::to_string(s.parts)
                                          : "--part " + std::to_string(s.missing.front()) + "/" + std::to_string(s.parts))
                 << ") to complete the merge; the target is published when the last one finishes\n";
        else if (s.finisher && s.finisherAlive)
            text << "  every part is done; " << shownHost(s.finisher->host) << " (" << shownPid(*s.finisher)
                 << ") is publishing the model\n";
        else
            text << "  every part is done but the model was not published (the publishing process stopped); run any "
                    "part again to publish it\n";
    }
    if (!sets.empty() && !json)
        text << "A job that will not be finished can be discarded: tessera " << parser.command() << " --status "
             << printableText(target) << " --discard\n";
    if (sets.empty()) {
        const bool model = std::filesystem::exists(std::filesystem::path(target) / "config.json");
        text << "No parts of a merge or split are under way for " << printableText(target)
             << (model ? " (it holds a model)" : "") << "\n";
    }
    if (json)
        std::cout << dump(j) << "\n";
    else
        std::cout << text.str();
    return pending ? ExitProblems : ExitOk;
}

std::string rangeText(const PartRange& r, const std::vector<MergeOutput>& outputs)
{
    const auto& f = outputs[r.output].plan->files[r.file];
    if (r.tensors.size() == f.tensors.size())
        return printableText(r.path) + " (" + formatBytes(r.end - r.begin) + " of tensors, the whole file)";
    return printableText(r.path) + " bytes " + std::to_string(r.begin) + "–" + std::to_string(r.end) + " ("
        + count(r.tensors.size(), "tensor") + ", " + formatBytes(r.end - r.begin) + ")";
}

nlohmann::json shareJson(const PartShare& s)
{
    auto ranges = nlohmann::json::array();
    std::size_t tensors = 0;
    for (const auto& r : s.ranges) {
        ranges.push_back({ { "path", r.path }, { "begin", r.begin }, { "end", r.end }, { "tensors", r.tensors.size() } });
        tensors += r.tensors.size();
    }
    return { { "bytes", s.bytes }, { "tensors", tensors }, { "whole_files", s.wholeFiles }, { "ranges", ranges } };
}

/// How a job in parts names itself: the dry run's heading ("Merge") and the progress line's verb ("Merging").
struct PartsWording {
    std::string heading;
    std::string verb;
};

/// One part of a split merge or GGUF export (or with --dry-run, its assignment): `outputs` assigned by `plan`,
/// written as `writing` says (the merge engine by default), `checkTarget` as the dry run checks the target.
int runParts(const ArgParser& parser, unsigned threads, DebugLog& debug, const PartSpec& spec, const std::vector<MergeOutput>& outputs,
             const PartsPlan& plan, const PartWriting& writing, const std::vector<std::string>& warnings,
             const std::function<Status()>& checkTarget, const PartsWording& wording, const std::string& target)
{
    const bool json = parser.isSet("json");
    const bool quiet = parser.isSet("quiet") || json;
    const PartShare& mine = plan.shares[spec.part];
    std::size_t tensors = 0;
    for (const auto& r : mine.ranges)
        tensors += r.tensors.size();
    const std::string label = "part " + std::to_string(spec.part) + "/" + std::to_string(spec.parts);

    if (parser.isSet("dry_run")) {
        if (auto usable = checkTarget(); !usable)
            return fail(parser, usable.error().message);
        if (json) {
            nlohmann::json shares = nlohmann::json::array();
            for (const auto& s : plan.shares)
                shares.push_back(shareJson(s));
            std::cout << dump({ { "id", plan.id }, { "part", spec.part }, { "parts", spec.parts },
                                { "source", spec.source }, { "total_bytes", plan.totalBytes },
                                { "largest_tensor_bytes", plan.largestTensorBytes }, { "shares", shares } })
                      << "\n";
            return ExitOk;
        }
        std::cout << wording.heading << " in parts " << plan.id << ": " << formatBytes(plan.totalBytes)
                  << " of tensors in " << spec.parts << " parts (this process: " << label << ", from " << spec.source << ")\n";
        for (unsigned k = 0; k < spec.parts; ++k) {
            const auto& s = plan.shares[k];
            std::cout << (k == spec.part ? "* " : "  ") << "part " << k << ": " << formatBytes(s.bytes) << "\n";
            for (const auto& r : s.ranges)
                std::cout << "      " << rangeText(r, outputs) << "\n";
        }
        return ExitOk;
    }

    if (!quiet)
        for (const auto& w : warnings)
            printMessage("merge", "warning", w);
    MergeRunOptions run;
    run.threads = threads;
    run.verifyReplicas = parser.isSet("verify_replicas");
    TerminalProgress progress(wording.verb + " " + label, TerminalProgress::Unit::Bytes, quiet);
    run.progress = &progress;
    run.onNote = [quiet](const std::string& note) {
        if (!quiet)
            printMessage("merge", "note", note);
    };
    auto outcome = runMergePart(outputs, plan, spec.part, target, run, writing);
    progress.finish();
    debug.stage("write part");
    if (!outcome) {
        const bool canceled = outcome.error().isCanceled();
        return fail(parser, label + ": " + (canceled ? "canceled; the target was not touched, and running this part "
                                                     "again completes it"
                                                   : outcome.error().message + " (the target was not touched; the "
                                                     "parts' shared folder is kept, so running this part again "
                                                     "completes the merge)"));
    }
    for (const auto& w : outcome->warnings)
        printMessage("merge", "warning", w);
    const std::string absTarget = std::filesystem::absolute(target).lexically_normal().string();
    if (json) {
        std::cout << dump({ { "id", plan.id }, { "part", spec.part }, { "parts", spec.parts },
                            { "source", spec.source }, { "tensors", tensors }, { "share_bytes", mine.bytes },
                            { "bytes_written", outcome->bytesWritten }, { "already_done", outcome->alreadyDone },
                            { "seconds", outcome->seconds }, { "missing", outcome->missing },
                            { "published", outcome->published },
                            { "completed_earlier_publish", outcome->completedEarlier },
                            { "publishing_elsewhere", outcome->finishingElsewhere },
                            { "output_dir", outcome->published ? absTarget : "" }, { "files", outcome->files },
                            { "set_folder", outcome->setFolder }, { "warnings", outcome->warnings },
                            { "notes", outcome->notes } })
                  << "\n";
        return ExitOk;
    }
    if (parser.isSet("quiet"))
        return ExitOk;
    if (outcome->completedEarlier)
        std::cout << "Part " << spec.part << "/" << spec.parts << ": every part was done and the job's publish of "
                  << printableText(absTarget) << " is complete\n";
    else if (outcome->alreadyDone)
        std::cout << "Part " << spec.part << "/" << spec.parts << ": already done (" << count(tensors, "tensor")
                  << ", " << formatBytes(mine.bytes) << ", checked against its CRC-32s)\n";
    else
        std::cout << "Part " << spec.part << "/" << spec.parts << " (" << spec.source << "): wrote "
                  << count(tensors, "tensor") << " (" << formatBytes(outcome->bytesWritten) << ") in "
                  << seconds(outcome->seconds) << "\n";
    if (outcome->published && !outcome->completedEarlier) {
        std::cout << "All " << spec.parts << " parts are done: published " << printableText(absTarget) << "\n";
        for (const auto& f : outcome->files)
            std::cout << "  " << printableText(f) << "\n";
    } else if (outcome->finishingElsewhere) {
        std::cout << "All " << spec.parts << " parts are done; another process is publishing "
                  << printableText(absTarget) << "\n";
    } else {
        std::cout << "Waiting for part" << (outcome->missing.size() > 1 ? "s " : " ") << joined(outcome->missing)
                  << " of " << spec.parts << "; the last one to finish publishes " << printableText(absTarget)
                  << " ('" << kProgram.name << " merge --status " << printableText(target) << "' shows where the merge is)\n";
    }
    return ExitOk;
}

} // namespace

int runPartStatus(const ArgParser& parser) { return statusOf(parser); }

int runMergePartCommand(const ArgParser& parser, const PreparedMerge& prepared, DebugLog& debug)
{
    const PartSpec& spec = *prepared.settings.part;
    const std::string target = prepared.request.target();
    const unsigned threads = prepared.model.settings.threads;
    if (prepared.gguf) { // byte ranges of its one file
        const GgufPlan& plan = *prepared.gguf;
        auto parts = planGgufParts(plan, spec.parts);
        if (!parts)
            return fail(parser, parts.error().message);
        return runParts(parser, threads, debug, spec, parts->outputs, parts->plan, parts->writing, plan.warnings,
                        [&] { return checkGgufTarget(plan, target); }, { "GGUF export", "Exporting" }, target);
    }
    const auto outputs = prepared.outputs();
    if (outputs.empty())
        return fail(parser, "--part: nothing to write into " + target);
    auto plan = planParts(outputs, spec.parts);
    if (!plan)
        return fail(parser, plan.error().message);
    std::vector<std::string> warnings;
    for (const auto& o : outputs)
        warnings.insert(warnings.end(), o.plan->warnings.begin(), o.plan->warnings.end());
    return runParts(parser, threads, debug, spec, outputs, *plan, PartWriting {}, warnings,
                    [&] { return checkMergeTargets(outputs, target); }, { "Merge", "Merging" }, target);
}

int runSplitPartCommand(const ArgParser& parser, const PartSpec& part, const CheckpointInfo& info,
                        const MergePlan& model, const SplitPlan& plan, const std::string& target)
{
    const bool json = parser.isSet("json");
    const bool quiet = parser.isSet("quiet") || json;
    const PartSpec* spec = &part;
    auto parts = planSplitParts(info, model, plan, spec->parts);
    if (!parts)
        return fail(parser, parts.error().message);
    std::size_t files = 0;
    for (auto owner : parts->owner)
        files += owner == spec->part ? 1 : 0;
    const std::string label = "part " + std::to_string(spec->part) + "/" + std::to_string(spec->parts);
    if (parser.isSet("dry_run")) {
        if (auto usable = checkSplitTarget(info, model, plan, target); !usable)
            return fail(parser, usable.error().message);
        nlohmann::json shares = nlohmann::json::array();
        for (unsigned k = 0; k < spec->parts; ++k) {
            nlohmann::json names = nlohmann::json::array();
            for (std::size_t fi = 0; fi < plan.files.size(); ++fi)
                if (parts->owner[fi] == k)
                    names.push_back(plan.files[fi].name);
            shares.push_back({ { "bytes", parts->shareBytes[k] }, { "files", names } });
        }
        if (json) {
            std::cout << dump({ { "id", parts->id }, { "part", spec->part }, { "parts", spec->parts },
                                { "source", spec->source }, { "total_bytes", parts->totalBytes }, { "shares", shares } })
                      << "\n";
            return ExitOk;
        }
        std::cout << "Split " << parts->id << ": " << plan.files.size() << " files, " << formatBytes(parts->totalBytes)
                  << " in " << spec->parts << " parts (this process: " << label << ", from " << spec->source << ")\n";
        for (unsigned k = 0; k < spec->parts; ++k) {
            std::cout << (k == spec->part ? "* " : "  ") << "part " << k << ": " << formatBytes(parts->shareBytes[k])
                      << "\n";
            for (const auto& name : shares[k]["files"])
                std::cout << "      " << printableText(name.get<std::string>()) << "\n";
        }
        return ExitOk;
    }
    if (!quiet) {
        for (const auto& w : model.warnings)
            printMessage("split", "warning", w);
        for (const auto& w : plan.warnings)
            printMessage("split", "note", w);
    }
    TerminalProgress progress("Splitting " + label, TerminalProgress::Unit::Bytes, quiet);
    SplitRunOptions run;
    run.progress = &progress;
    run.onNote = [quiet](const std::string& note) {
        if (!quiet)
            printMessage("split", "note", note);
    };
    auto outcome = runSplitPart(info, model, plan, *parts, spec->part, target, run);
    progress.finish();
    if (!outcome) {
        const bool canceled = outcome.error().isCanceled();
        return fail(parser, label + ": " + (canceled ? "canceled; the target was not touched, and running this part "
                                                       "again completes it"
                                                     : outcome.error().message + " (the target was not touched; "
                                                       "running this part again completes the split)"));
    }
    if (json) {
        std::cout << dump({ { "id", parts->id }, { "part", spec->part }, { "parts", spec->parts },
                            { "source", spec->source }, { "files_written", outcome->filesWritten },
                            { "bytes_written", outcome->bytesWritten }, { "already_done", outcome->alreadyDone },
                            { "seconds", outcome->seconds }, { "missing", outcome->missing },
                            { "published", outcome->published },
                            { "completed_earlier_publish", outcome->completedEarlier },
                            { "publishing_elsewhere", outcome->finishingElsewhere },
                            { "output_dir", outcome->outputDir }, { "files", outcome->files },
                            { "set_folder", outcome->setFolder }, { "notes", outcome->notes } })
                  << "\n";
        return ExitOk;
    }
    if (parser.isSet("quiet"))
        return ExitOk;
    if (outcome->completedEarlier)
        std::cout << "Part " << spec->part << "/" << spec->parts << ": every part was done and the job's publish of "
                  << printableText(outcome->outputDir) << " is complete\n";
    else if (outcome->alreadyDone)
        std::cout << "Part " << spec->part << "/" << spec->parts << ": already done (" << count(files, "file")
                  << ", checked against their CRC-32s)\n";
    else
        std::cout << "Part " << spec->part << "/" << spec->parts << " (" << spec->source << "): wrote "
                  << count(outcome->filesWritten, "file") << " (" << formatBytes(outcome->bytesWritten) << ") in "
                  << seconds(outcome->seconds) << "\n";
    if (outcome->published && !outcome->completedEarlier) {
        std::cout << "All " << spec->parts << " parts are done: published " << printableText(outcome->outputDir)
                  << "\n";
        for (const auto& f : outcome->files)
            std::cout << "  " << printableText(f) << "\n";
    }
    else if (outcome->finishingElsewhere)
        std::cout << "All " << spec->parts << " parts are done; another process is publishing "
                  << printableText(target) << "\n";
    else
        std::cout << "Waiting for part" << (outcome->missing.size() > 1 ? "s " : " ") << joined(outcome->missing)
                  << " of " << spec->parts << " ('" << kProgram.name << " split --status " << printableText(target)
                  << "' shows where the split is)\n";
    return ExitOk;
}

} // namespace tessera::cli
