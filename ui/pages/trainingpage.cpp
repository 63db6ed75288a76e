// SPDX-License-Identifier: GPL-3.0-or-later
#include "trainingpage.h"

#include "compare/training_report.h"
#include "formats/layout_registry.h"
#include "coreconvert.h"
#include "models/trainingnormsmodel.h"
#include "widgets/copynames.h"
#include "widgets/rankcolors.h"
#include "widgets/tensornameelide.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

namespace tessera::ui {

namespace {
/// `text` without the actor folder in front: the heading names it.
QString belowFolder(QString text, const QString& folder)
{
    if (text.startsWith(folder + QLatin1String(": ")))
        return text.mid(folder.size() + 2);
    if (text.startsWith(folder + QLatin1Char('/')))
        return text.mid(folder.size() + 1);
    return text;
}
} // namespace

TrainingPage::TrainingPage(QWidget* parent)
    : QWidget(parent)
    , m_job(new TrainingJob(this))
    , m_facts(new QTextBrowser(this))
    , m_compute(new QPushButton(tr("Compute &Norms"), this))
    , m_progress(new QProgressBar(this))
    , m_cancel(new QToolButton(this))
    , m_status(new QLabel(this))
    , m_table(new QTableView(this))
    , m_model(new TrainingNormsModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_names(new TensorNameDelegate(this))
{
    m_facts->setOpenLinks(false);
    m_facts->setFrameShape(QFrame::NoFrame);
    m_compute->setToolTip(tr("Read every exp_avg and exp_avg_sq of the optimizer (all of its data) and show each "
                             "parameter's L2 norms"));
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(false);
    m_progress->setMaximumWidth(220);
    m_cancel->setText(tr("Cancel"));
    m_status->setWordWrap(true);
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(SortRole);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(TrainingNormsModel::ExpAvgColumn, Qt::DescendingOrder);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setAlternatingRowColors(true);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    // The name takes what the numbers leave; a long one drops whole components, never the layer or projection.
    auto* header = m_table->horizontalHeader();
    header->setStretchLastSection(false);
    header->setSectionResizeMode(QHeaderView::ResizeToContents);
    header->setSectionResizeMode(TrainingNormsModel::ParameterColumn, QHeaderView::Stretch);
    header->setSectionResizeMode(TrainingNormsModel::NoteColumn, QHeaderView::Interactive);
    m_table->setColumnWidth(TrainingNormsModel::NoteColumn, fontMetrics().horizontalAdvance(QStringLiteral("incomplete: no piece provides")));
    m_table->setWordWrap(false);
    m_table->setItemDelegateForColumn(TrainingNormsModel::ParameterColumn, m_names);
    addCopyNamesAction(m_table, TrainingNormsModel::ParameterColumn);

    auto* bar = new QHBoxLayout;
    bar->addWidget(m_compute);
    bar->addWidget(m_progress);
    bar->addWidget(m_cancel);
    bar->addWidget(m_status, 1);
    auto* lower = new QWidget(this);
    auto* lowerLayout = new QVBoxLayout(lower);
    lowerLayout->setContentsMargins(6, 0, 6, 0);
    lowerLayout->addLayout(bar);
    lowerLayout->addWidget(m_table, 1);
    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(m_facts);
    splitter->addWidget(lower);
    splitter->setStretchFactor(0, 1);
    splitter->setStretchFactor(1, 2);
    splitter->setChildrenCollapsible(false);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(splitter);

    connect(m_compute, &QPushButton::clicked, this, [this] { computeNorms(); });
    connect(m_cancel, &QToolButton::clicked, this, &TrainingPage::cancel);
    connect(m_job, &TrainingJob::stateRead, this, &TrainingPage::onStateRead);
    connect(m_job, &TrainingJob::normsComputed, this, &TrainingPage::onNormsComputed);
    connect(m_job, &TrainingJob::failed, this, &TrainingPage::onFailed);
    connect(m_job, &TrainingJob::progress, this, [this](quint64 done, quint64 total, const QString& text) {
        m_progress->setValue(total ? static_cast<int>(done * 1000 / total) : 0);
        m_status->setText(tr("Reading %1 of %2: %3").arg(bytesText(done), bytesText(total), text));
    });
    setRunning(false);
    renderFacts();
}

TrainingPage::~TrainingPage() = default;

void TrainingPage::setCheckpoint(CheckpointPtr checkpoint)
{
    m_checkpoint = std::move(checkpoint);
    m_state.reset();
    m_error.clear();
    m_model->clear();
    m_status->clear();
    renderFacts();
    if (!m_checkpoint)
        return;
    setRunning(true);
    m_status->setText(tr("Reading the training state…"));
    m_job->readState(m_checkpoint);
}

bool TrainingPage::computeNorms()
{
    if (!m_state || !m_state->hasOptimizer())
        return false;
    m_model->clear();
    setRunning(true);
    m_progress->setValue(0);
    m_status->setText(tr("Reading the optimizer's moments…"));
    m_job->computeNorms(m_state);
    return true;
}

void TrainingPage::cancel()
{
    if (!m_job->isRunning())
        return;
    m_job->cancel();
    setRunning(false);
    m_status->setText(tr("Canceled."));
}

bool TrainingPage::isBusy() const { return m_job->isRunning(); }

QString TrainingPage::html() const { return m_facts->toHtml(); }

void TrainingPage::onStateRead(const TrainingStatePtr& state)
{
    setRunning(false);
    m_status->clear();
    m_state = state && state->any() ? state : nullptr;
    renderFacts();
    Q_EMIT stateShown();
    if (!m_state || !m_state->hasOptimizer()) {
        m_status->setText(tr("No optimizer state: no norms to show."));
        return;
    }
    if (m_state->optimizer->info.totalBytes() <= kAutomaticNormsBytes)
        computeNorms();
    else
        m_status->setText(tr("Compute Norms reads the optimizer's %1 of moments.")
                              .arg(bytesText(m_state->optimizer->info.totalBytes())));
}

void TrainingPage::onNormsComputed(const TrainingNormsPtr& norms)
{
    setRunning(false);
    QStringList names;
    for (const auto& r : norms->parameters)
        names << qs(r.parameter);
    m_names->setSharedPrefix(sharedNamePrefix(names));
    m_model->setNorms(norms);
    std::size_t unread = 0;
    for (const auto& r : norms->parameters)
        unread += r.note.empty() ? 0 : 1;
    QString text = tr("%1, %2 of moments read. Sorted by ‖exp_avg‖: the layers at the top are still moving.")
                       .arg(countText(static_cast<long long>(norms->parameters.size()), tr("parameter"),
                                      tr("parameters")),
                            bytesText(norms->bytesRead));
    if (unread)
        text += QLatin1Char(' ') + tr("%1 without norms (see Note).")
                                       .arg(countText(static_cast<long long>(unread), tr("parameter"), tr("parameters")));
    m_status->setText(text);
    // The note column only when a norm is missing: the names keep its width otherwise.
    m_table->setColumnHidden(TrainingNormsModel::NoteColumn, unread == 0);
    Q_EMIT normsShown();
}

void TrainingPage::onFailed(const QString& message)
{
    setRunning(false);
    if (!m_state)
        m_error = message;
    m_status->setText(tr("Could not read: %1").arg(message));
    renderFacts();
}

void TrainingPage::setRunning(bool running)
{
    m_progress->setVisible(running);
    m_cancel->setVisible(running);
    m_compute->setEnabled(!running && m_state && m_state->hasOptimizer());
}

QString TrainingPage::problemsHtml() const
{
    if (m_state->problems.empty())
        return {};
    const QString folder = qs(m_state->actorDir);
    QString html = QStringLiteral("<p style='color:") + problemColor(palette()).name() + QStringLiteral("'><b>")
        + countText(static_cast<long long>(m_state->problems.size()), tr("problem"), tr("problems"))
        + tr(": a resume would not load this state as it is") + QStringLiteral("</b></p><ul style='color:")
        + problemColor(palette()).name() + QStringLiteral("'>");
    for (const auto& problem : m_state->problems)
        html += QStringLiteral("<li>") + belowFolder(qs(problem.text()), folder).toHtmlEscaped() + QStringLiteral("</li>");
    return html + QStringLiteral("</ul>");
}

QString TrainingPage::factsHtml() const
{
    if (!m_checkpoint)
        return tr("<h3>No checkpoint loaded</h3>");
    if (!m_error.isEmpty())
        return QStringLiteral("<h3>") + tr("Training state") + QStringLiteral("</h3><p style='color:")
            + problemColor(palette()).name() + QStringLiteral("'>") + m_error.toHtmlEscaped() + QStringLiteral("</p>");
    if (!m_state) {
        const bool fsdp = m_checkpoint->layout == tessera::layout_names::kVerlFsdp;
        return QStringLiteral("<h3>") + tr("No training state") + QStringLiteral("</h3><p>")
            + (fsdp ? tr("This folder holds the model alone: no optim_world_size_W_rank_R.pt or extra_state files. "
                         "verl resumes from it with <tt>%1</tt>.")
                          .arg(QString::fromLatin1(tessera::kModelOnlyResumeSetting))
                    : tr("The workbench shows the optimizer, scheduler and random state of verl FSDP actor folders; "
                         "this checkpoint's layout is %1.")
                          .arg(qs(m_checkpoint->layout).toHtmlEscaped()))
            + QStringLiteral("</p>");
    }
    QString html = QStringLiteral("<h3>") + tr("Training state of %1 (world size %2)")
                                                .arg(qs(m_state->actorDir).toHtmlEscaped())
                                                .arg(m_state->worldSize)
        + QStringLiteral("</h3><table>");
    for (const auto& fact : tessera::trainingStateFacts(*m_state)) {
        const bool problem = fact.label == "Complete" && !m_state->problems.empty();
        html += QStringLiteral("<tr><td style='padding-right:16px'><b>") + qs(fact.label).toHtmlEscaped()
            + QStringLiteral("</b></td><td")
            + (problem ? QStringLiteral(" style='color:") + problemColor(palette()).name() + QStringLiteral("'")
                       : QString())
            + QStringLiteral(">") + qs(fact.value).toHtmlEscaped() + QStringLiteral("</td></tr>");
    }
    return html + QStringLiteral("</table>") + problemsHtml();
}

void TrainingPage::renderFacts() { m_facts->setHtml(factsHtml()); }

void TrainingPage::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange)
        renderFacts();
    QWidget::changeEvent(event);
}

} // namespace tessera::ui
