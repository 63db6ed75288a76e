// SPDX-License-Identifier: GPL-3.0-or-later
#include "runpage.h"

#include "compare/drift_export.h"
#include "ops/flag_table.h"

#include "coreconvert.h"
#include "jobs/driftjob.h"
#include "models/driftgridmodel.h"
#include "models/drifttablemodel.h"
#include "models/roles.h"
#include "plots/plotexport.h"
#include "savetext.h"
#include "widgets/columnfitter.h"
#include "widgets/copynames.h"
#include "widgets/driftheatmap.h"
#include "widgets/drifttrendplot.h"
#include "widgets/rankcolors.h"
#include "widgets/tensornameelide.h"

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

namespace tessera::ui {

namespace {
QString stepList(const std::vector<tessera::RunStep>& steps)
{
    QStringList numbers;
    for (const auto& s : steps)
        numbers << QString::number(s.step);
    return numbers.join(QStringLiteral(", "));
}

/// Triggers `plot`'s own Save Plot… action (its context menu's): one dialog for every plot of the workbench.
void savePlotOf(QWidget* plot)
{
    if (!plot->actions().isEmpty())
        plot->actions().first()->trigger();
}
} // namespace

RunPage::RunPage(QWidget* parent)
    : QWidget(parent)
    , m_job(new DriftJob(this))
    , m_table(new DriftTableModel(this))
    , m_grid(new DriftGridModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
{
    createWidgets();
    buildLayout();
    connectSignals();
    setRunning(false);
    showMessage(tr("<h3>No run opened</h3><p>Open a run root: the folder holding a training run's saved steps "
                   "(verl's <tt>global_step_N</tt>, Megatron's <tt>iter_N</tt>, torchtitan's <tt>step-N</tt>). "
                   "This page shows how every tensor moved from one step to the next, and where NaN or Inf "
                   "appeared.</p>"));
}

RunPage::~RunPage() = default;

void RunPage::createWidgets()
{
    m_stack = new QStackedWidget(this);
    m_message = new QLabel(this);
    m_message->setWordWrap(true);
    m_message->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_openRun = new QPushButton(this);
    m_command = new QLabel(this);
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    m_command->setFont(mono);
    m_command->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_command->setToolTip(tr("The same reading from the command line"));
    m_command->setMinimumWidth(120);
    m_role = new QComboBox(this);
    m_role->addItem(QStringLiteral("actor"));
    m_role->addItem(QStringLiteral("critic"));
    m_role->setToolTip(tr("Which model of the verl run to read (--role)"));
    m_stepsField = new QLineEdit(this);
    m_stepsField->setPlaceholderText(tr("all steps"));
    m_stepsField->setClearButtonEnabled(true);
    m_stepsField->setMaximumWidth(m_stepsField->fontMetrics().horizontalAdvance(QStringLiteral("100,200,300,400")) + 40);
    m_stepsField->setToolTip(tr("The saved steps to read, e.g. 100,200,300 (--steps); empty reads every saved step"));
    m_compute = new QPushButton(tr("Compute &Drift"), this);
    m_compute->setToolTip(tr("Read every tensor of every saved step (all of the run's weights) and compare each "
                             "step with the one before"));
    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(false);
    m_progress->setMaximumWidth(180);
    m_cancel = new QToolButton(this);
    m_cancel->setText(tr("Cancel"));
    m_export = new QPushButton(tr("&Export"), this);
    auto* exportMenu = new QMenu(m_export);
    exportMenu->addAction(tr("Table as CSV…"), this, [this] { exportTableWithDialog(QStringLiteral("csv")); });
    exportMenu->addAction(tr("Table as JSON…"), this, [this] { exportTableWithDialog(QStringLiteral("json")); });
    exportMenu->addSeparator();
    exportMenu->addAction(tr("Heatmap as PNG, SVG or PDF…"), this, [this] { savePlotOf(m_heatmap); });
    exportMenu->addAction(tr("Norm and Change Plot as PNG, SVG or PDF…"), this, [this] { savePlotOf(m_trend); });
    m_export->setMenu(exportMenu);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::RichText);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_heatmap = new DriftHeatmap(this);
    m_heatmap->setModel(m_grid);
    m_slider = new QSlider(Qt::Horizontal, this);
    m_slider->setPageStep(1);
    m_slider->setTickPosition(QSlider::TicksBelow);
    m_slider->setToolTip(tr("The step the heatmap shows (← → move it)"));
    m_stepLabel = new QLabel(this);
    m_trend = new DriftTrendPlot(this);
    // Each plot saves itself (right-click, or Export), named after what it shows.
    addSavePlotAction(
        m_heatmap,
        [this]() -> QString {
            return m_drift ? QStringLiteral("drift-step-%1").arg(m_drift->report().steps[std::size_t(m_grid->step())].step)
                           : QStringLiteral("drift");
        },
        [this]() -> QString { return m_heatmap->title(); });
    addSavePlotAction(
        m_trend, [this]() -> QString { return m_trend->tensor().isEmpty() ? QStringLiteral("drift") : m_trend->tensor(); },
        [this]() -> QString { return tr("%1 over the run's steps").arg(m_trend->tensor()); });

    m_view = new QTableView(this);
    m_proxy->setSourceModel(m_table);
    m_proxy->setSortRole(SortRole);
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(DriftTableModel::TensorColumn, Qt::AscendingOrder);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::SingleSelection);
    m_view->setAlternatingRowColors(true);
    m_view->setWordWrap(false);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 6);
    m_view->horizontalHeader()->setStretchLastSection(false);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_view->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
    m_names = new TensorNameDelegate(this);
    m_view->setItemDelegateForColumn(DriftTableModel::TensorColumn, m_names);
    m_view->setToolTip(tr("Double-click a step's cell for the Diff of that tensor between the two steps"));
    addCopyNamesAction(m_view, DriftTableModel::TensorColumn);
}

void RunPage::buildLayout()
{
    auto* bar = new QHBoxLayout;
    bar->addWidget(m_command, 1);
    bar->addWidget(m_role);
    bar->addWidget(new QLabel(tr("Steps:"), this));
    bar->addWidget(m_stepsField);
    bar->addWidget(m_compute);
    bar->addWidget(m_progress);
    bar->addWidget(m_cancel);
    bar->addWidget(m_export);

    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_heatmap, 1);
    auto* stepRow = new QHBoxLayout;
    stepRow->addWidget(new QLabel(tr("Step:"), this));
    stepRow->addWidget(m_slider, 1);
    stepRow->addWidget(m_stepLabel);
    leftLayout->addLayout(stepRow);

    auto* right = new QSplitter(Qt::Vertical, this);
    right->addWidget(m_trend);
    right->addWidget(m_view);
    right->setStretchFactor(0, 1);
    right->setStretchFactor(1, 1);
    right->setChildrenCollapsible(false);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(0, 9);
    split->setStretchFactor(1, 11);
    split->setSizes({ 900, 1100 }); // whatever the table's names would ask for
    split->setChildrenCollapsible(false);

    auto* runView = new QWidget(this);
    auto* runLayout = new QVBoxLayout(runView);
    runLayout->setContentsMargins(0, 0, 0, 0);
    runLayout->addWidget(split, 1);

    auto* messageView = new QWidget(this);
    auto* messageLayout = new QVBoxLayout(messageView);
    messageLayout->addWidget(m_message);
    auto* openRow = new QHBoxLayout;
    openRow->addWidget(m_openRun);
    openRow->addStretch(1);
    messageLayout->addLayout(openRow);
    messageLayout->addStretch(1);

    m_stack->addWidget(messageView);
    m_stack->addWidget(runView);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 4, 6, 0);
    layout->addLayout(bar);
    layout->addWidget(m_status); // here, not in the stack: a stacked widget would not give it the lines it wraps to
    layout->addWidget(m_stack, 1);
}

void RunPage::connectSignals()
{
    connect(m_compute, &QPushButton::clicked, this, [this] { computeDrift(); });
    connect(m_cancel, &QToolButton::clicked, this, &RunPage::cancel);
    connect(m_role, &QComboBox::currentIndexChanged, this, [this] { findSteps(); });
    connect(m_openRun, &QPushButton::clicked, this, [this] { Q_EMIT openPathRequested(m_runAbove); });
    connect(m_stepsField, &QLineEdit::textChanged, this, [this] { m_command->setText(commandLine()); });
    connect(m_stepsField, &QLineEdit::returnPressed, this, [this] { computeDrift(); });
    connect(m_job, &DriftJob::partial, this, &RunPage::onPartial);
    connect(m_job, &DriftJob::finished, this, &RunPage::onFinished);
    connect(m_job, &DriftJob::failed, this, &RunPage::onFailed);
    connect(m_job, &DriftJob::progress, this, [this](quint64 done, quint64 total, const QString& text) {
        m_progress->setValue(total ? static_cast<int>(done * 1000 / total) : 0);
        m_status->setText(tr("Reading %1 of %2: %3").arg(bytesText(done), bytesText(total), text.toHtmlEscaped()));
    });
    // The page moves the slider with its signals blocked: a change seen here while reading is the user's pick.
    connect(m_slider, &QSlider::valueChanged, this, [this](int step) {
        m_stepPicked = m_stepPicked || m_reading;
        showStep(step);
    });
    connect(m_heatmap, &DriftHeatmap::cellClicked, this, &RunPage::onCellClicked);
    connect(m_view->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &RunPage::onCurrentRowChanged);
    connect(m_view, &QTableView::doubleClicked, this, [this](const QModelIndex& proxyIndex) {
        const QModelIndex index = m_proxy->mapToSource(proxyIndex);
        const int step = DriftTableModel::stepOfColumn(index.column());
        if (step >= 0)
            openDiff(index.data(TensorNameRole).toString(), step);
    });
}

void RunPage::setRun(const QString& path, CheckpointPtr checkpoint)
{
    m_path = path;
    m_checkpoint = std::move(checkpoint);
    const QSignalBlocker quiet(m_role);
    m_role->setCurrentIndex(0);
    m_stepsField->clear();
    findSteps();
}

void RunPage::findSteps()
{
    m_job->cancel();
    setRunning(false);
    m_drift.reset();
    m_table->clear();
    m_grid->clear();
    m_trend->setTensor(nullptr, -1);
    m_steps.clear();
    m_status->clear();
    if (m_path.isEmpty())
        return;
    auto found = tessera::findRunSteps(m_path.toStdString(), m_role->currentText().toStdString());
    if (found)
        m_steps = std::move(*found);
    // The role choice only for a verl run that saved a critic too.
    bool critic = false;
    for (const auto& step : m_steps)
        critic = critic || QDir(qs(step.folder)).exists(QStringLiteral("critic"));
    m_role->setVisible(critic);
    m_command->setText(commandLine());
    if (!found || m_steps.size() < 2) {
        const QString what = !found || m_steps.empty()
            ? (found ? tr("%1 holds no saved step.").arg(QDir::toNativeSeparators(m_path).toHtmlEscaped())
                     : qs(found.error().message).toHtmlEscaped())
            : tr("%1 is one checkpoint (step %2), not a run: there is no step before it to compare with.")
                  .arg(QDir::toNativeSeparators(m_path).toHtmlEscaped())
                  .arg(m_steps.front().step);
        showMessage(tr("<h3>The Run page needs a run root</h3><p>%1</p><p>Open the folder holding a training run's "
                       "saved steps (verl's <tt>global_step_N</tt>, Megatron's <tt>iter_N</tt>, torchtitan's "
                       "<tt>step-N</tt>) to see how every tensor moved from one step to the next.</p>")
                        .arg(what),
                    enclosingRun());
        setRunning(false);
        return;
    }
    m_stack->setCurrentIndex(1);
    setRunning(false);
    // The loaded checkpoint is one of the steps (the newest): its size says what reading them all costs.
    const std::uint64_t stepBytes = m_checkpoint ? m_checkpoint->totalBytes() : 0;
    m_status->setText(stepBytes ? tr("%1 saved steps: %2. Compute Drift reads all of them (about %3).")
                                      .arg(m_steps.size())
                                      .arg(stepList(m_steps), bytesText(stepBytes * m_steps.size()))
                                : tr("%1 saved steps: %2. Compute Drift reads all of them.")
                                      .arg(m_steps.size())
                                      .arg(stepList(m_steps)));
    if (stepBytes && stepBytes * m_steps.size() <= kAutomaticDriftBytes)
        computeDrift();
}

QString RunPage::enclosingRun() const
{
    QDir dir(m_path);
    for (int up = 0; up < 2 && dir.cdUp(); ++up) {
        auto steps = tessera::findRunSteps(dir.absolutePath().toStdString(), m_role->currentText().toStdString());
        if (steps && steps->size() >= 2)
            return dir.absolutePath();
    }
    return {};
}

void RunPage::showMessage(const QString& html, const QString& runRoot)
{
    m_message->setText(html);
    m_runAbove = runRoot;
    m_openRun->setText(tr("Open the Run %1").arg(QDir::toNativeSeparators(runRoot)));
    m_openRun->setVisible(!runRoot.isEmpty());
    m_stack->setCurrentIndex(0);
}

QString RunPage::messageText() const { return m_stack->currentIndex() == 0 ? m_message->text() : QString(); }

QString RunPage::statusText() const { return m_status->text(); }

tessera::DriftRequest RunPage::request() const
{
    tessera::DriftRequest r;
    if (!m_path.isEmpty())
        r.run = m_path.toStdString();
    if (m_role->currentIndex() != 0)
        r.role = m_role->currentText().toStdString();
    if (const QString steps = m_stepsField->text().simplified().remove(QLatin1Char(' ')); !steps.isEmpty())
        r.steps = steps.toStdString();
    return r;
}

QString RunPage::commandLine() const
{
    return m_path.isEmpty() ? QString() : qs(tessera::commandLineText("drift", request().toArgs()));
}

bool RunPage::computeDrift()
{
    if (!isRun())
        return false;
    // Checked and turned into options as `tessera drift` does with its argv.
    const auto options = tessera::driftSettings(request());
    if (!options) {
        m_status->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                              .arg(problemColor(palette()).name(), qs(options.error().message).toHtmlEscaped()));
        return false;
    }
    m_drift.reset();
    m_stepPicked = false;
    m_table->clear();
    m_grid->clear();
    m_trend->setTensor(nullptr, -1);
    m_progress->setValue(0);
    m_status->setText(tr("Reading %1 steps…").arg(m_steps.size()));
    setRunning(true);
    m_job->start(*options);
    return true;
}

void RunPage::cancel()
{
    if (!m_job->isRunning())
        return;
    m_job->cancel();
    // What was read before Cancel is not the run: nothing of it stays on the page to be taken for it.
    m_drift.reset();
    m_grid->clear();
    setRunning(false);
    m_status->setText(tr("Canceled. Compute Drift reads the run again."));
}

bool RunPage::isBusy() const { return m_job->isRunning(); }

void RunPage::setRunning(bool running)
{
    m_reading = running;
    m_progress->setVisible(running);
    m_cancel->setVisible(running);
    m_compute->setEnabled(!running && isRun());
    m_compute->setVisible(isRun());
    m_export->setEnabled(!running && m_drift);
    m_export->setVisible(isRun());
    m_slider->setEnabled(m_drift != nullptr); // also while reading: the steps read so far can be looked at
    m_stepsField->setEnabled(!running);
}

void RunPage::onPartial(const DriftPtr& drift)
{
    // The heatmap fills as the read goes on, at the step shown (the last one until the user picks another); the
    // table, the plot and the summary wait for the whole run.
    const int step = m_drift ? m_grid->step() : int(drift->stepCount()) - 1;
    m_drift = drift;
    m_grid->setDrift(drift);
    m_slider->setRange(0, std::max(0, int(drift->stepCount()) - 1));
    m_slider->setEnabled(true);
    showStep(step);
}

void RunPage::onFinished(const DriftPtr& drift)
{
    const int picked = m_grid->step(); // before the grid takes the whole run
    m_drift = drift;
    setRunning(false);
    QStringList names;
    for (const auto& name : drift->report().tensors)
        names << qs(name);
    m_names->setSharedPrefix(sharedNamePrefix(names));
    m_table->setDrift(drift);
    m_grid->setDrift(drift);
    // The name takes what the steps leave, never less than a readable width: many steps scroll instead. (Made
    // once the table has its columns; a reset model forgets the column's mode.)
    if (!m_nameColumn)
        m_nameColumn = new ColumnFitter(m_view, m_view->horizontalHeader(), { DriftTableModel::TensorColumn },
                                        m_view->fontMetrics().horizontalAdvance(QStringLiteral("layers.00.mlp.down_proj.weight")));
    m_view->horizontalHeader()->setSectionResizeMode(DriftTableModel::TensorColumn, QHeaderView::Interactive);
    m_nameColumn->setMinimumWidth(compactNamesWidth(names, m_names->sharedPrefix(), m_view->fontMetrics()));
    m_nameColumn->fit();
    m_slider->setRange(0, std::max(0, int(drift->stepCount()) - 1));
    // The step the user picked while the run was read; else the first step with NaN or Inf (where to look), else
    // the last one (where the run is now).
    const auto& report = drift->report();
    int step = m_stepPicked ? std::min(picked, int(drift->stepCount()) - 1) : int(drift->stepCount()) - 1;
    QString tensor;
    for (const auto& r : report.records)
        if (!m_stepPicked && r.nonFinite()) {
            for (std::size_t s = 0; s < report.steps.size(); ++s)
                if (report.steps[s].step == r.step)
                    step = int(s);
            tensor = qs(r.name);
            break;
        }
    // Else the tensor that moved most at that step.
    std::optional<double> largest;
    for (std::size_t t = 0; t < drift->tensorCount() && tensor.isEmpty(); ++t)
        if (const auto* r = drift->record(t, std::size_t(step)); r && r->relativeChange && (!largest || *r->relativeChange > *largest))
            largest = r->relativeChange;
    for (std::size_t t = 0; t < drift->tensorCount() && tensor.isEmpty() && largest; ++t)
        if (const auto* r = drift->record(t, std::size_t(step)); r && r->relativeChange == largest)
            tensor = qs(r->name);
    showStep(step);
    if (!tensor.isEmpty())
        selectTensor(tensor);
    else if (!names.isEmpty())
        selectTensor(names.front());
    showSummary();
    Q_EMIT driftShown();
}

void RunPage::showSummary()
{
    const auto& report = m_drift->report();
    const QString red = problemColor(palette()).name();
    QStringList parts;
    parts << tr("%1 × %2 steps (%3)")
                 .arg(countText(static_cast<long long>(report.tensors.size()), tr("tensor"), tr("tensors")))
                 .arg(report.steps.size())
                 .arg(stepList(report.steps));
    QStringList nonFinite;
    for (const auto& r : report.records)
        if (r.nonFinite())
            nonFinite << tr("%1 at step %2 (%3)").arg(qs(r.name).toHtmlEscaped()).arg(r.step).arg(DriftTableModel::changeText(r));
    constexpr int kListed = 3;
    if (!nonFinite.isEmpty()) {
        QString listed = nonFinite.mid(0, kListed).join(QStringLiteral(", "));
        if (nonFinite.size() > kListed)
            listed += tr(" and %1 more").arg(nonFinite.size() - kListed);
        parts << QStringLiteral("<b style='color:%1'>%2</b>").arg(red, tr("NaN/Inf: %1").arg(listed));
    }
    for (const auto& d : report.damaged)
        parts << QStringLiteral("<b style='color:%1'>%2</b>")
                     .arg(red, tr("step %1 damaged: %2").arg(d.step).arg(qs(d.problem).toHtmlEscaped()));
    const tessera::DriftRecord* largest = nullptr;
    for (const auto& r : report.records)
        if (r.relativeChange && (!largest || *r.relativeChange > *largest->relativeChange))
            largest = &r;
    if (largest)
        parts << tr("largest change %1: %2 at step %3")
                     .arg(DriftTableModel::changeText(*largest), qs(largest->name).toHtmlEscaped())
                     .arg(largest->step);
    if (report.clean())
        parts << QStringLiteral("<b style='color:#2e8b3e'>%1</b>").arg(tr("no NaN or Inf"));
    m_status->setText(parts.join(QStringLiteral(" · ")));
}

void RunPage::onFailed(const QString& message)
{
    // What was read before the failure is not the run (nor something to export).
    m_drift.reset();
    m_grid->clear();
    setRunning(false);
    m_status->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                          .arg(problemColor(palette()).name(), tr("Could not read the run: %1").arg(message).toHtmlEscaped()));
}

void RunPage::showStep(int step)
{
    m_grid->setStep(step);
    const int shown = m_grid->step();
    {
        const QSignalBlocker quiet(m_slider);
        m_slider->setValue(shown);
    }
    m_trend->markStep(m_drift ? shown : -1);
    if (!m_drift || std::size_t(shown) >= m_drift->stepCount()) {
        m_stepLabel->clear();
        return;
    }
    const auto& steps = m_drift->report().steps;
    m_stepLabel->setText(shown > 0 ? tr("%1 vs %2").arg(steps[std::size_t(shown)].step).arg(steps[std::size_t(shown) - 1].step)
                                   : tr("%1 (first)").arg(steps[std::size_t(shown)].step));
}

bool RunPage::selectTensor(const QString& tensor)
{
    const int row = m_table->rowOf(tensor);
    if (row < 0)
        return false;
    const QModelIndex index = m_proxy->mapFromSource(m_table->index(row, DriftTableModel::TensorColumn));
    m_view->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_view->scrollTo(index);
    return true;
}

void RunPage::onCurrentRowChanged()
{
    const QModelIndex current = m_proxy->mapToSource(m_view->selectionModel()->currentIndex());
    m_trend->setTensor(m_table, current.isValid() ? current.row() : -1);
}

void RunPage::onCellClicked(const QModelIndex& index)
{
    const QString tensor = index.data(TensorNameRole).toString();
    selectTensor(tensor);
    openDiff(tensor, m_grid->step());
}

std::optional<tessera::DiffRequest> RunPage::diffRequest(const QString& tensor, int step) const
{
    if (!m_drift || step < 0 || std::size_t(step) >= m_drift->stepCount())
        return std::nullopt;
    const auto& steps = m_drift->report().steps;
    // The step the tensor's change was measured against; the step before when this one lacks the tensor.
    const int t = m_drift->tensorIndex(tensor.toStdString());
    const auto* record = t >= 0 ? m_drift->record(std::size_t(t), std::size_t(step)) : nullptr;
    std::optional<long long> previous = record ? record->previousStep : std::nullopt;
    if (!previous && step > 0)
        previous = steps[std::size_t(step) - 1].step;
    if (!previous)
        return std::nullopt;
    const auto before = std::find_if(steps.begin(), steps.end(), [&](const tessera::RunStep& s) { return s.step == *previous; });
    if (before == steps.end())
        return std::nullopt;
    tessera::DiffRequest request;
    request.a = before->path;
    request.b = steps[std::size_t(step)].path;
    return request;
}

bool RunPage::openDiff(const QString& tensor, int step)
{
    const auto request = diffRequest(tensor, step);
    if (!request) {
        if (m_drift && step >= 0 && std::size_t(step) < m_drift->stepCount())
            m_status->setText(tr("Step %1 has no step before it to compare %2 with.")
                                  .arg(m_drift->report().steps[std::size_t(step)].step)
                                  .arg(tensor.toHtmlEscaped()));
        return false;
    }
    Q_EMIT diffRequested(*request, tensor);
    return true;
}

bool RunPage::exportTable(const QString& path, QString* error) const
{
    if (!m_drift) {
        *error = tr("Compute the drift first: there is nothing to export yet.");
        return false;
    }
    const auto& report = m_drift->report();
    const std::string text = path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive)
        ? tessera::driftReportToCsv(report)
        : tessera::driftReportToJson(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    *error = saveTextFile(path, text);
    return error->isEmpty();
}

void RunPage::exportTableWithDialog(const QString& suffix)
{
    const bool csv = suffix == QLatin1String("csv");
    const QString path = QFileDialog::getSaveFileName(this, tr("Export the Drift Table"), QStringLiteral("drift.") + suffix,
                                                      csv ? tr("CSV (*.csv)") : tr("JSON (*.json)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!exportTable(path, &error))
        m_status->setText(QStringLiteral("<span style='color:%1'>%2</span>").arg(problemColor(palette()).name(), error.toHtmlEscaped()));
}

} // namespace tessera::ui
