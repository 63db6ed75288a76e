// SPDX-License-Identifier: GPL-3.0-or-later
#include "mappingjob.h"

#include "background.h"
#include "mapping/megatron_mapping.h"
#include "ops/name_mapping.h"

#include <QElapsedTimer>
#include <QRegularExpression>
#include <QtConcurrent>

#include <nlohmann/json.hpp>

#include <exception>
#include <unordered_map>

namespace tessera::ui {

namespace {

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

/// A syntax error of the editor's rules, with its position (the core would only say "not a JSON object"); empty
/// when the text parses as one object.
MappingOutcome rulesSyntaxError(const std::string& text, const std::string& origin)
{
    MappingOutcome outcome;
    try {
        const auto parsed = nlohmann::json::parse(text);
        if (!parsed.is_object()) {
            outcome.error = QStringLiteral("%1: a rules file is one JSON object ({ \"rules\": [ … ] })")
                                .arg(QString::fromStdString(origin));
            outcome.errorLine = 1;
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
    }
    return outcome;
}

/// Per mapping row, the index of its source tensor in `checkpoint` (rows name stacked sources "name[3]"; the tree
/// lists the stacked tensor), -1 for rows without one.
QVector<int> sourceIndices(const tessera::CheckpointInfo& checkpoint, const tessera::MappingResult& result)
{
    std::unordered_map<std::string, int> index;
    for (std::size_t i = 0; i < checkpoint.tensors.size(); ++i)
        index.emplace(checkpoint.tensors[i].name, int(i));
    QVector<int> indices;
    indices.reserve(int(result.rows.size()));
    for (const auto& row : result.rows) {
        std::string name = row.source;
        if (!name.empty() && name.back() == ']')
            if (const auto open = name.rfind('['); open != std::string::npos)
                name.resize(open);
        const auto it = index.find(name);
        indices.push_back(it == index.end() ? -1 : it->second);
    }
    return indices;
}

/// The mapping of `checkpoint` with `settings`, as a merge with the same flags names its tensors (ops/name_mapping.h);
/// the editor's rules are read as the --param_mapping file would be.
MappingOutcome mapNames(const CheckpointPtr& checkpoint, const MappingSettings& settings)
{
    const bool megatron = tessera::isMegatronLayout(checkpoint->layout);
    const std::string origin = settings.rulesOrigin().toStdString();
    tessera::MappingOptions options;
    options.configDir = settings.hfConfigDir.toStdString();
    options.ignoreMissing = settings.ignoreMissing.toStdString();
    options.strict = settings.strict;
    if (settings.valueModel)
        options.valueModel = true;
    options.tieWordEmbeddings = settings.tieWordEmbeddings;
    if (megatron && settings.hasRules()) {
        const std::string text = settings.rulesText.toStdString();
        if (MappingOutcome syntax = rulesSyntaxError(text, origin); !syntax.error.isEmpty())
            return syntax;
        options.userRulesFile = origin;
        options.userRulesText = text;
    }
    MappingOutcome outcome;
    outcome.megatron = megatron;
    auto mapped = tessera::nameMapping(*checkpoint, options);
    if (!mapped) {
        outcome.error = QString::fromStdString(mapped.error().message);
        if (settings.hasRules() && mapped.error().message.find(origin) != std::string::npos)
            outcome.errorLine = lineOfRuleId(outcome.error, settings.rulesText);
        return outcome;
    }
    auto result = std::make_shared<const tessera::MappingResult>(std::move(mapped).value());
    outcome.tensorIndex = sourceIndices(*checkpoint, *result);
    // A Megatron merge reads the mapped checkpoint inside the result (the aliasing pointer keeps the result alive
    // with it); the other layouts are merged as they are.
    outcome.mapped = megatron ? CheckpointPtr(result, &result->mapped) : checkpoint;
    outcome.result = std::move(result);
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
    m_watcher->setFuture(runInBackground(&m_pool, [generation, checkpoint = m_checkpoint, settings = m_settings] {
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
        outcome = mapNames(checkpoint, settings);
    } catch (const std::exception& e) {
        outcome = MappingOutcome {};
        outcome.error = QString::fromLocal8Bit(e.what());
    }
    outcome.source = checkpoint;
    outcome.milliseconds = timer.elapsed();
    return outcome;
}

} // namespace tessera::ui
