// SPDX-License-Identifier: GPL-3.0-or-later
#include "mappingpage.h"

#include "widgets/tensornameelide.h"

#include "coreconvert.h"
#include "jobs/mappingjob.h"
#include "models/mappingfilterproxy.h"
#include "models/mappingmodel.h"
#include "widgets/filterbar.h"
#include "widgets/rankcolors.h"
#include "widgets/columnfitter.h"
#include "widgets/copynames.h"
#include "widgets/ruleseditor.h"
#include "widgets/tensornameelide.h"

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>


namespace tessera::ui {

using tessera::MappingStatus;

namespace {
const char* kRulesExample = R"(Rules layered over the built-in family, in the format --param_mapping takes. For example:
{
  "rules": [
    { "id": "o_proj", "megatron": "decoder.layers.{layer}.self_attention.linear_proj.weight",
      "hf": "model.layers.{layer}.self_attn.o_proj.weight" },
    { "id": "extra_head", "megatron": "extra_head.weight", "hf": "score.weight" }
  ]
}
An entry whose "id" exists replaces it; "remove": true drops it; "expected" and "defaults" work the same way.)";
} // namespace

MappingPage::MappingPage(QWidget* parent)
    : QWidget(parent)
    , m_job(new MappingJob(this))
    , m_model(new MappingModel(this))
    , m_proxy(new MappingFilterProxy(this))
    , m_header(new QLabel(this))
    , m_summary(new QLabel(this))
    , m_status(new QComboBox(this))
    , m_filter(new FilterBar(this))
    , m_view(new QTableView(this))
    , m_splitter(new QSplitter(Qt::Vertical, this))
    , m_rulesPanel(new QGroupBox(tr("User rules (--param_mapping)"), this))
    , m_rulesFile(new QLabel(m_rulesPanel))
    , m_rulesState(new QLabel(m_rulesPanel))
    , m_editor(new RulesEditor(m_rulesPanel))
    , m_error(new QLabel(m_rulesPanel))
    , m_load(new QPushButton(tr("Load…"), m_rulesPanel))
    , m_save(new QPushButton(tr("Save…"), m_rulesPanel))
    , m_sourceNames(new TensorNameDelegate(this))
    , m_targetNames(new TensorNameDelegate(this))
{
    m_header->setWordWrap(true);
    m_header->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_summary->setTextFormat(Qt::RichText);
    m_summary->setWordWrap(true);
    m_status->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_status->setToolTip(tr("Show only the rows with this status"));
    m_filter->lineEdit()->setPlaceholderText(tr("Filter names, rules, transforms…"));

    auto* filterRow = new QHBoxLayout;
    filterRow->addWidget(m_status);
    filterRow->addWidget(m_filter, 1);

    m_proxy->setSourceModel(m_model);
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(-1, Qt::AscendingOrder);
    m_view->setAlternatingRowColors(true);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setWordWrap(false);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 6);
    // Names share what the short columns leave; those fit their contents (Qt samples 1000 rows, so it stays cheap).
    // A name column can be dragged wider, or double-clicked at its edge to fit its longest name.
    m_view->horizontalHeader()->setStretchLastSection(false);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_view->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
    m_nameColumns = new ColumnFitter(m_view, m_view->horizontalHeader(),
                                     { MappingModel::SourceColumn, MappingModel::TargetColumn },
                                     fontMetrics().horizontalAdvance(QStringLiteral("decoder.layers.00.mlp.weight")));
    // Names too long for their column drop whole components, never the layer, expert or projection.
    m_view->setItemDelegateForColumn(MappingModel::SourceColumn, m_sourceNames);
    m_view->setItemDelegateForColumn(MappingModel::TargetColumn, m_targetNames);
    addCopyNamesAction(m_view, QList<int> { MappingModel::SourceColumn, MappingModel::TargetColumn });

    m_rulesFile->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_rulesState->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
    m_rulesState->setForegroundRole(QPalette::PlaceholderText);
    m_load->setToolTip(tr("Load a rules file into the editor (the format --param_mapping takes)"));
    m_save->setToolTip(tr("Save the editor's rules, to pass to tessera merge --param_mapping"));
    m_editor->setPlaceholderText(QString::fromUtf8(kRulesExample));
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->hide();
    auto* rulesBar = new QHBoxLayout;
    rulesBar->addWidget(m_rulesFile, 1);
    rulesBar->addWidget(m_rulesState);
    rulesBar->addWidget(m_load);
    rulesBar->addWidget(m_save);
    auto* rulesLayout = new QVBoxLayout(m_rulesPanel);
    rulesLayout->setContentsMargins(6, 6, 6, 6);
    rulesLayout->addLayout(rulesBar);
    rulesLayout->addWidget(m_editor, 1);
    rulesLayout->addWidget(m_error);

    auto* table = new QWidget(this);
    auto* tableLayout = new QVBoxLayout(table);
    tableLayout->setContentsMargins(0, 0, 0, 0);
    tableLayout->addLayout(filterRow);
    tableLayout->addWidget(m_view, 1);
    m_splitter->addWidget(table);
    m_splitter->addWidget(m_rulesPanel);
    m_splitter->setStretchFactor(0, 3);
    m_splitter->setStretchFactor(1, 1);
    m_splitter->setChildrenCollapsible(false);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addWidget(m_header);
    layout->addWidget(m_summary);
    layout->addWidget(m_splitter, 1);

    // Re-evaluating per keystroke would flash half-typed JSON errors; wait for a pause as the filter box does.
    m_rulesDebounce.setSingleShot(true);
    m_rulesDebounce.setInterval(400);
    connect(&m_rulesDebounce, &QTimer::timeout, this, &MappingPage::pushRules);
    connect(m_editor, &QPlainTextEdit::textChanged, this, [this] {
        if (m_settingText)
            return;
        m_rulesDebounce.start();
        updateRulesLabel();
    });
    connect(m_load, &QPushButton::clicked, this, &MappingPage::chooseLoad);
    connect(m_save, &QPushButton::clicked, this, &MappingPage::chooseSave);
    connect(m_filter, &FilterBar::filterChanged, m_proxy,
            [this](const QRegularExpression& re) { m_proxy->setFilterRegularExpression(re); });
    connect(m_status, &QComboBox::currentIndexChanged, this,
            [this] { m_proxy->setStatusFilter(m_status->currentData().toInt()); });
    connect(m_view, &QTableView::activated, this, [this](const QModelIndex& index) {
        const int tensor = index.data(TensorIndexRole).toInt();
        if (tensor >= 0)
            Q_EMIT tensorActivated(tensor);
    });
    connect(m_job, &MappingJob::started, this, &MappingPage::onStarted);
    connect(m_job, &MappingJob::finished, this, &MappingPage::onFinished);
    connect(m_job, &MappingJob::settingsChanged, this, &MappingPage::onSettingsChanged);
    updateStatusCombo();
    updateHeader();
    updateRulesLabel();
}

MappingPage::~MappingPage() = default;

void MappingPage::setCheckpoint(CheckpointPtr checkpoint)
{
    // Another checkpoint starts with all its rows: a filter chosen for the last one would hide this one's (a reload
    // of the same folder keeps it).
    const QString root = checkpoint ? qs(checkpoint->root) : QString();
    if (!root.isEmpty() && !m_root.isEmpty() && root != m_root) {
        m_filter->setText(QString());
        m_filter->flush();
        m_status->setCurrentIndex(m_status->findData(int(MappingFilterProxy::AllStatuses)));
    }
    if (!root.isEmpty())
        m_root = root;
    m_job->setCheckpoint(std::move(checkpoint));
}

QString MappingPage::summaryText() const { return m_summary->text(); }

QString MappingPage::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

void MappingPage::pushRules()
{
    m_rulesDebounce.stop();
    MappingSettings settings = m_job->settings();
    settings.rulesText = m_editor->toPlainText();
    settings.rulesName = m_rulesName;
    m_job->setSettings(settings);
}

void MappingPage::flushRules() { pushRules(); }

void MappingPage::onSettingsChanged()
{
    // Another client (the merge panel's Load…) may have replaced the rules; typing in progress wins.
    const MappingSettings& settings = m_job->settings();
    if (!m_rulesDebounce.isActive() && settings.rulesText != m_editor->toPlainText()) {
        m_settingText = true;
        m_editor->setPlainText(settings.rulesText);
        m_editor->document()->setModified(false);
        m_settingText = false;
    }
    if (!m_rulesDebounce.isActive())
        m_rulesName = settings.rulesName;
    updateRulesLabel();
    updateHeader();
}

QString MappingPage::loadRulesFile(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return tr("Cannot read %1: %2").arg(path, file.errorString());
    const QString text = QString::fromUtf8(file.readAll());
    m_rulesName = QFileInfo(path).absoluteFilePath();
    m_settingText = true;
    m_editor->setPlainText(text);
    m_editor->document()->setModified(false);
    m_settingText = false;
    pushRules();
    updateRulesLabel();
    return {};
}

QString MappingPage::saveRulesFile(const QString& path)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(m_editor->toPlainText().toUtf8()) < 0 || !file.commit())
        return tr("Cannot write %1: %2").arg(path, file.errorString());
    m_rulesName = QFileInfo(path).absoluteFilePath();
    m_editor->document()->setModified(false);
    pushRules();
    updateRulesLabel();
    return {};
}

void MappingPage::chooseLoad()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Load Mapping Rules"), m_rulesName,
                                                      tr("Mapping rules (*.json);;All files (*)"));
    if (path.isEmpty())
        return;
    const QString error = loadRulesFile(path);
    if (!error.isEmpty()) {
        m_error->setText(error);
        m_error->show();
    }
}

void MappingPage::chooseSave()
{
    const QString path = QFileDialog::getSaveFileName(this, tr("Save Mapping Rules"),
                                                      m_rulesName.isEmpty() ? QStringLiteral("mapping_rules.json") : m_rulesName,
                                                      tr("Mapping rules (*.json);;All files (*)"));
    if (path.isEmpty())
        return;
    const QString error = saveRulesFile(path);
    if (!error.isEmpty()) {
        m_error->setText(error);
        m_error->show();
    }
}

void MappingPage::updateRulesLabel()
{
    const bool modified = m_editor->document()->isModified();
    if (m_rulesName.isEmpty())
        m_rulesFile->setText(m_editor->toPlainText().trimmed().isEmpty() ? tr("Built-in rules only.")
                                                                        : tr("Unsaved rules (save them to pass --param_mapping)"));
    else
        m_rulesFile->setText(QStringLiteral("%1%2").arg(QDir::toNativeSeparators(m_rulesName),
                                                        modified ? tr(" (modified)") : QString()));
    m_rulesFile->setToolTip(m_rulesName);
}

void MappingPage::onStarted() { m_rulesState->setText(tr("evaluating…")); }

void MappingPage::onFinished(const MappingOutcome& outcome)
{
    const bool keepTable = !outcome.error.isEmpty() && m_model->outcome().source && m_model->outcome().source == outcome.source;
    const CheckpointPtr shownBefore = m_model->outcome().source;
    if (outcome.error.isEmpty() || !keepTable)
        m_model->setOutcome(outcome);
    // Another checkpoint's table starts at its top; new rules for the same one keep the rows the user looks at.
    if (outcome.source && (!shownBefore || shownBefore->root != outcome.source->root))
        m_view->scrollToTop();
    m_rulesPanel->setVisible(!outcome.source || outcome.megatron);
    m_editor->setErrorLine(outcome.errorLine, outcome.errorColumn);
    if (outcome.error.isEmpty()) {
        m_error->hide();
        m_error->clear();
        m_rulesState->setText(outcome.source ? tr("evaluated in %1 ms").arg(outcome.milliseconds) : QString());
    } else {
        const QString where = outcome.errorLine > 0
            ? (outcome.errorColumn > 0 ? tr("Line %1, column %2: ").arg(outcome.errorLine).arg(outcome.errorColumn)
                                       : tr("Line %1: ").arg(outcome.errorLine))
            : QString();
        m_error->setText(where + outcome.error
                         + (keepTable ? tr("\nThe table still shows the last rules that worked.") : QString()));
        QPalette pal = m_error->palette();
        pal.setColor(QPalette::WindowText, problemColor(palette()));
        m_error->setPalette(pal);
        m_error->show();
        m_rulesState->setText(tr("error"));
    }
    if (const auto* result = m_model->outcome().result.get()) {
        QStringList sources;
        QStringList targets;
        for (const auto& row : result->rows) {
            if (!row.source.empty())
                sources << qs(row.source);
            if (!row.target.empty())
                targets << qs(row.target);
        }
        m_sourceNames->setSharedPrefix(sharedNamePrefix(sources));
        m_targetNames->setSharedPrefix(sharedNamePrefix(targets));
        const QFontMetrics metrics(m_view->font());
        m_nameColumns->setMinimumWidth(std::max(compactNamesWidth(sources, m_sourceNames->sharedPrefix(), metrics),
                                                compactNamesWidth(targets, m_targetNames->sharedPrefix(), metrics)));
    }
    updateStatusCombo();
    updateHeader();
    m_nameColumns->fit();
}

void MappingPage::updateStatusCombo()
{
    const int current = m_status->currentIndex() >= 0 ? m_status->currentData().toInt() : int(MappingFilterProxy::AllStatuses);
    const auto* result = m_model->outcome().result.get();
    auto count = [&](MappingStatus s) { return result ? qint64(result->count(s)) : 0; };
    qint64 problems = 0;
    for (const auto s : MappingModel::statuses())
        if (MappingModel::isProblem(s))
            problems += count(s);
    const QSignalBlocker block(m_status);
    m_status->clear();
    m_status->addItem(tr("All statuses (%1)").arg(m_model->rowCount()), int(MappingFilterProxy::AllStatuses));
    m_status->addItem(tr("Needs attention (%1)").arg(problems), int(MappingFilterProxy::ProblemStatuses));
    for (const auto s : MappingModel::statuses()) {
        m_status->addItem(QStringLiteral("%1 (%2)").arg(MappingModel::statusText(s)).arg(count(s)), int(s));
        const QColor color = MappingModel::statusColor(s, palette());
        if (color.isValid())
            m_status->setItemData(m_status->count() - 1, color, Qt::ForegroundRole);
    }
    const int index = m_status->findData(current);
    m_status->setCurrentIndex(index >= 0 ? index : 0);
    m_proxy->setStatusFilter(m_status->currentData().toInt());
}

void MappingPage::updateHeader()
{
    const MappingOutcome& outcome = m_model->outcome();
    const auto* result = outcome.result.get();
    if (!outcome.source || !result) {
        m_header->setText(outcome.source ? tr("No mapping for this checkpoint.")
                                         : tr("Open a checkpoint to see how its names map to Hugging Face names."));
        m_summary->clear();
        return;
    }
    const MappingSettings& settings = m_job->settings();
    if (outcome.megatron) {
        QStringList sources;
        for (const auto& s : result->ruleSources)
            sources << QFileInfo(qs(s)).fileName();
        QStringList flags;
        flags << (result->tiedEmbeddings ? tr("embeddings tied") : tr("embeddings untied"));
        if (result->valueModel)
            flags << tr("value model (output_layer → score.weight)");
        if (!settings.ignoreMissing.isEmpty())
            flags << tr("ignoring /%1/").arg(settings.ignoreMissing);
        flags << (settings.strict ? tr("strict") : tr("not strict: unmapped and missing only warn"));
        m_header->setText(tr("%1 rules: %2 · sizes from %3 · %4")
                              .arg(qs(result->family), sources.join(QStringLiteral(" + ")),
                                   QDir::toNativeSeparators(qs(result->configPath)), flags.join(QStringLiteral(" · "))));
    } else {
        m_header->setText(tr("%1 checkpoint: tensors already carry Hugging Face names and are written as they are. "
                             "Mapping rules apply to Megatron layouts.")
                              .arg(qs(outcome.source->layout)));
    }

    QStringList parts;
    parts << tr("<b>%1</b>").arg(countText(qint64(result->rows.size()), tr("row"), tr("rows")));
    qint64 blocking = 0;
    for (const auto s : MappingModel::statuses()) {
        const auto n = qint64(result->count(s));
        if (n == 0)
            continue;
        if (MappingModel::isProblem(s))
            blocking += n;
        const QColor color = MappingModel::statusColor(s, palette());
        const QString text = QStringLiteral("%1 %2").arg(n).arg(MappingModel::statusText(s).toHtmlEscaped());
        parts << (color.isValid() ? QStringLiteral("<span style='color:%1'>%2</span>").arg(color.name(), text) : text);
    }
    QString line = parts.join(QStringLiteral(" · "));
    if (outcome.megatron)
        line += tr(" → %1").arg(countText(qint64(result->mapped.tensors.size()), tr("Hugging Face tensor"), tr("Hugging Face tensors")));
    if (blocking > 0)
        line += QStringLiteral(" — <span style='color:%1'>%2</span>")
                    .arg(problemColor(palette()).name(),
                         outcome.megatron && !settings.strict ? tr("a merge writes what maps and warns about the rest")
                                                              : tr("a merge refuses until these are fixed"));
    else
        line += tr(" — every name maps");
    for (const auto& w : result->warnings)
        line += QStringLiteral("<br><span style='color:%1'>%2</span>")
                    .arg(palette().color(QPalette::PlaceholderText).name(), tr("note: %1").arg(qs(w).toHtmlEscaped()));
    m_summary->setText(line);
}

} // namespace tessera::ui
