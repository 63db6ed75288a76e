// SPDX-License-Identifier: GPL-3.0-or-later
#include "mappingjob.h"

#include "mapping/lora.h"

#include "mapping/megatron_mapping.h"
#include "merge/merge_plan.h"

#include <QDir>
#include <QElapsedTimer>
#include <QRegularExpression>
#include <QTemporaryFile>
#include <QtConcurrent>

#include <nlohmann/json.hpp>

#include <exception>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace tessera::ui {

namespace {

void replaceAll(std::string& text, const std::string& from, const std::string& to)
{
    if (from.empty())
        return;
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
}

/// 1-based line and column of UTF-8 byte `offset` in `text`.
std::pair<int, int> lineAndColumn(const std::string& text, std::size_t offset)
{
    int line = 1;
    int column = 1;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
            ++column;
        }
    }
    return { line, column };
}

/// The line of `"id": "<id>"` for a rule error that names a rule id in parentheses ("rules[2] (qkv): …").
int lineOfRuleId(const QString& message, const QString& text)
{
    static const QRegularExpression idInMessage(QStringLiteral("\\(([^()\\s]+)\\)"));
    const auto m = idInMessage.match(message);
    if (!m.hasMatch())
        return 0;
    const QRegularExpression idInText(QStringLiteral("\"id\"\\s*:\\s*\"%1\"").arg(QRegularExpression::escape(m.captured(1))));
    const auto t = idInText.match(text);
    return t.hasMatch() ? int(text.left(t.capturedStart()).count(QLatin1Char('\n'))) + 1 : 0;
}

/// Where a tensor of a LoRA checkpoint goes: a base weight to its Hugging Face name (fused or not), a factor into
/// the weight it updates and into the adapter file.
void describeLoraRow(tessera::MappingRow& row, const tessera::LoraCheckpoint& lora)
{
    for (const auto& m : lora.modules) {
        if (row.source != m.sourceA && row.source != m.sourceB)
            continue;
        const bool isA = row.source == m.sourceA;
        row.target = m.weight;
        row.transform = isA ? "lora_A (fused)" : "lora_B (fused)";
        std::ostringstream scale;
        scale << m.scale;
        row.detail = "fused into " + m.weight + " as W + (B·A)·" + scale.str() + " (r = " + std::to_string(m.rank)
            + "); also written to lora_adapter/ as " + (isA ? m.adapterA : m.adapterB);
        return;
    }
    auto it = lora.baseNames.find(row.source);
    if (it == lora.baseNames.end())
        return;
    if (it->second.empty()) {
        row.transform = "dropped";
        row.detail = "the frozen original of a module trained in full (modules_to_save): its trained copy is written";
        return;
    }
    row.target = it->second;
    for (const auto& m : lora.modules)
        if (m.weight == it->second) {
            row.transform = "copy + LoRA";
            row.detail = "the base weight; the merge adds its LoRA update";
            return;
        }
}

MappingOutcome identityMapping(const CheckpointPtr& checkpoint, const MappingSettings& settings)
{
    // FSDP, DCP and Hugging Face layouts already carry Hugging Face names: each one is written as it is.
    MappingOutcome outcome;
    auto result = std::make_shared<tessera::MappingResult>();
    result->configPath = settings.hfConfigDir.isEmpty() ? checkpoint->hfConfigDir : settings.hfConfigDir.toStdString();
    result->rows.reserve(checkpoint->tensors.size());
    outcome.tensorIndex.reserve(int(checkpoint->tensors.size()));
    // A LoRA checkpoint's names are PEFT's: each row says where its tensor goes in the fused model and adapter.
    std::optional<tessera::LoraCheckpoint> lora;
    std::string loraError;
    if (tessera::hasLoraTensors(*checkpoint)) {
        auto read = tessera::readLoraCheckpoint(*checkpoint, {});
        if (read)
            lora = std::move(*read);
        else
            loraError = read.error().message;
    }
    for (std::size_t i = 0; i < checkpoint->tensors.size(); ++i) {
        const auto& t = checkpoint->tensors[i];
        tessera::MappingRow row;
        row.source = t.name;
        row.target = t.name;
        row.transform = "copy";
        row.sourceShape = t.shape;
        row.targetShape = t.shape;
        if (lora)
            describeLoraRow(row, *lora);
        else if (!loraError.empty() && tessera::isPeftTensorName(t.name)) {
            row.status = tessera::MappingStatus::Unexpected;
            row.detail = "a LoRA tensor that cannot be merged: " + loraError;
        }
        result->rows.push_back(std::move(row));
        outcome.tensorIndex.push_back(int(i));
    }
    // The plan knows which head a tied model drops; it refuses checkpoints with problems, and then nothing is tied.
    tessera::MergeOptions options;
    options.hfConfigDir = settings.hfConfigDir.toStdString();
    options.forceTieWordEmbeddings = settings.tieWordEmbeddings;
    if (auto plan = tessera::planMerge(*checkpoint, options)) {
        result->tiedEmbeddings = !plan->tieChecks.empty();
        for (const auto& tie : plan->tieChecks) {
            auto& row = result->rows[tie.dropped];
            row.status = tessera::MappingStatus::Tied;
            row.detail = "tied to " + checkpoint->tensors[tie.kept].name
                + ": not written; the merge checks that it equals the embedding";
        }
    }
    outcome.result = std::move(result);
    outcome.mapped = checkpoint;
    return outcome;
}

MappingOutcome megatronMapping(const CheckpointPtr& checkpoint, const MappingSettings& settings)
{
    MappingOutcome outcome;
    outcome.megatron = true;
    tessera::MappingOptions options;
    options.configDir = settings.hfConfigDir.toStdString();
    options.ignoreMissing = settings.ignoreMissing.toStdString();
    options.strict = settings.strict;
    if (settings.valueModel)
        options.valueModel = true;
    options.tieWordEmbeddings = settings.tieWordEmbeddings;

    const std::string text = settings.rulesText.toStdString();
    const std::string origin = settings.rulesOrigin().toStdString();
    QTemporaryFile file(QDir::tempPath() + QStringLiteral("/tessera-rules-XXXXXX.json"));
    if (settings.hasRules()) {
        // A syntax error is found here, with its position; the core would only say "not a JSON object".
        try {
            const auto parsed = nlohmann::json::parse(text);
            if (!parsed.is_object()) {
                outcome.error = QStringLiteral("%1: a rules file is one JSON object ({ \"rules\": [ … ] })")
                                    .arg(QString::fromStdString(origin));
                outcome.errorLine = 1;
                return outcome;
            }
        } catch (const nlohmann::json::parse_error& e) {
            const auto [line, column] = lineAndColumn(text, e.byte > 0 ? e.byte - 1 : 0);
            QString what = QString::fromUtf8(e.what());
            what.remove(QRegularExpression(QStringLiteral("^\\[json\\.exception\\.[a-z_]+\\.\\d+\\]\\s*")));
            // The page puts "Line L, column C" in front: the parser's own copy of the position would say it twice.
            what.remove(QRegularExpression(QStringLiteral("^parse error at line \\d+, column \\d+:\\s*")));
            outcome.error = QStringLiteral("%1: %2").arg(QString::fromStdString(origin), what);
            outcome.errorLine = line;
            outcome.errorColumn = column;
            return outcome;
        }
        // The core reads --param_mapping from a file: hand it the editor's text the same way, so the table is
        // exactly what `tessera merge --param_mapping FILE` would do with the saved file.
        if (!file.open() || file.write(settings.rulesText.toUtf8()) < 0 || !file.flush()) {
            outcome.error = QStringLiteral("cannot write a temporary rules file: %1").arg(file.errorString());
            return outcome;
        }
        options.userRulesFile = file.fileName().toStdString();
    }
    auto mapped = tessera::mapMegatronToHf(*checkpoint, options);
    if (!mapped) {
        std::string message = mapped.error().message;
        replaceAll(message, options.userRulesFile, origin);
        outcome.error = QString::fromStdString(message);
        if (settings.hasRules() && message.find(origin) != std::string::npos)
            outcome.errorLine = lineOfRuleId(outcome.error, settings.rulesText);
        return outcome;
    }
    auto result = std::make_shared<tessera::MappingResult>(std::move(mapped).value());
    if (!options.userRulesFile.empty()) {
        for (auto& s : result->ruleSources)
            replaceAll(s, options.userRulesFile, origin);
        for (auto& row : result->rows) {
            replaceAll(row.ruleOrigin, options.userRulesFile, origin);
            replaceAll(row.detail, options.userRulesFile, origin);
        }
        for (auto& w : result->warnings)
            replaceAll(w, options.userRulesFile, origin);
    }
    // Rows name stacked sources "name[3]"; the tree lists the stacked tensor.
    std::unordered_map<std::string, int> index;
    for (std::size_t i = 0; i < checkpoint->tensors.size(); ++i)
        index.emplace(checkpoint->tensors[i].name, int(i));
    outcome.tensorIndex.reserve(int(result->rows.size()));
    for (const auto& row : result->rows) {
        std::string name = row.source;
        if (!name.empty() && name.back() == ']')
            if (const auto open = name.rfind('['); open != std::string::npos)
                name.resize(open);
        const auto it = index.find(name);
        outcome.tensorIndex.push_back(it == index.end() ? -1 : it->second);
    }
    outcome.result = result;
    // The merge input lives inside the result; the aliasing pointer keeps the whole result alive with it.
    outcome.mapped = CheckpointPtr(result, &result->mapped);
    return outcome;
}

} // namespace

QString MappingSettings::rulesOrigin() const { return rulesName.isEmpty() ? QStringLiteral("rules editor") : rulesName; }

bool MappingSettings::operator==(const MappingSettings& o) const
{
    return rulesText == o.rulesText && rulesName == o.rulesName && hfConfigDir == o.hfConfigDir
        && ignoreMissing == o.ignoreMissing && strict == o.strict && valueModel == o.valueModel
        && tieWordEmbeddings == o.tieWordEmbeddings;
}

MappingJob::MappingJob(QObject* parent) : QObject(parent), m_watcher(new QFutureWatcher<MappingOutcome>(this))
{
    // Evaluations are milliseconds; one at a time keeps the coalescing simple.
    m_pool.setMaxThreadCount(1);
    connect(m_watcher, &QFutureWatcher<MappingOutcome>::finished, this, [this] {
        m_running = false;
        const MappingOutcome outcome = m_watcher->result();
        if (outcome.generation == m_generation) {
            m_outcome = outcome;
            Q_EMIT finished(m_outcome);
        } else if (isBusy()) {
            launch(); // superseded while it ran: evaluate the latest request once
        }
    });
}

MappingJob::~MappingJob() { m_pool.waitForDone(); }

void MappingJob::setCheckpoint(CheckpointPtr checkpoint)
{
    if (checkpoint == m_checkpoint && m_generation > 0)
        return;
    m_checkpoint = std::move(checkpoint);
    schedule();
}

void MappingJob::setSettings(const MappingSettings& settings)
{
    if (settings == m_settings)
        return;
    m_settings = settings;
    Q_EMIT settingsChanged(m_settings);
    if (m_checkpoint)
        schedule();
}

void MappingJob::schedule()
{
    ++m_generation;
    if (!m_checkpoint) {
        m_outcome = MappingOutcome {};
        m_outcome.generation = m_generation;
        Q_EMIT finished(m_outcome);
        return;
    }
    Q_EMIT started();
    if (!m_running)
        launch();
}

void MappingJob::launch()
{
    m_running = true;
    const quint64 generation = m_generation;
    m_watcher->setFuture(QtConcurrent::run(&m_pool, [generation, checkpoint = m_checkpoint, settings = m_settings] {
        MappingOutcome outcome = evaluate(checkpoint, settings);
        outcome.generation = generation;
        return outcome;
    }));
}

MappingOutcome MappingJob::evaluate(const CheckpointPtr& checkpoint, const MappingSettings& settings)
{
    if (!checkpoint)
        return {};
    QElapsedTimer timer;
    timer.start();
    MappingOutcome outcome;
    try {
        outcome = tessera::isMegatronLayout(checkpoint->layout) ? megatronMapping(checkpoint, settings)
                                                                : identityMapping(checkpoint, settings);
    } catch (const std::exception& e) {
        outcome = MappingOutcome {};
        outcome.error = QString::fromLocal8Bit(e.what());
    }
    outcome.source = checkpoint;
    outcome.milliseconds = timer.elapsed();
    return outcome;
}

} // namespace tessera::ui
