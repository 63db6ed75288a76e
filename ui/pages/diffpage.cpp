// SPDX-License-Identifier: GPL-3.0-or-later
#include "diffpage.h"

#include "compare/diff_export.h"
#include "mapping/lora.h"
#include "ops/flag_table.h"

#include "coreconvert.h"
#include "jobs/planjob.h"
#include "models/difffilterproxy.h"
#include "models/difftablemodel.h"
#include "savetext.h"
#include "widgets/columnfitter.h"
#include "widgets/copynames.h"
#include "widgets/diffdetailview.h"
#include "widgets/tensornameelide.h"
#include "widgets/filterbar.h"

#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <cmath>
#include <utility>

namespace tessera::ui {

using tessera::DiffStatus;

DiffPage::DiffPage(QWidget* parent)
    : QWidget(parent)
    , m_job(new DiffJob(this))
    , m_detailJob(new DiffDetailJob(this))
    , m_model(new DiffTableModel(this))
    , m_proxy(new DiffFilterProxy(this))
    , m_left(new QLineEdit(this))
    , m_models(new QLabel(this))
    , m_warnings(new QLabel(this))
    , m_command(new QLabel(this))
    , m_right(new QLineEdit(this))
    , m_atol(new QLineEdit(QStringLiteral("0"), this))
    , m_rtol(new QLineEdit(QStringLiteral("0"), this))
    , m_compare(new QPushButton(tr("Compare"), this))
    , m_loraUpdate(new QPushButton(tr("LoRA update"), this))
    , m_export(new QPushButton(tr("Export…"), this))
    , m_cancel(new QPushButton(tr("Cancel"), this))
    , m_progress(new QProgressBar(this))
    , m_summary(new QLabel(this))
    , m_statusFilter(new QComboBox(this))
    , m_filter(new FilterBar(this))
    , m_table(new QTableView(this))
    , m_detail(new DiffDetailView(this))
{
    createWidgets();
    configureTable();
    buildLayout();
    connectSignals();
    setRunning(false);
}

void DiffPage::createWidgets()
{
    m_left->setPlaceholderText(tr("the loaded checkpoint, or another folder"));
    m_left->setToolTip(tr("A: the loaded checkpoint, or any other checkpoint or Hugging Face folder"));
    m_models->setWordWrap(true);
    m_models->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_models->hide();
    m_warnings->setWordWrap(true);
    m_warnings->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_warnings->setForegroundRole(QPalette::PlaceholderText);
    m_warnings->hide();
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    m_command->setFont(mono);
    m_command->setWordWrap(true);
    m_command->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_command->setToolTip(tr("The same comparison from the command line"));
    m_right->setPlaceholderText(tr("a Hugging Face folder or another checkpoint (--reference DIR)"));
    for (auto* edit : { m_atol, m_rtol }) {
        edit->setMaximumWidth(90);
        edit->setAlignment(Qt::AlignRight);
    }
    m_atol->setToolTip(tr("Absolute tolerance: an element passes when |a − b| ≤ atol + rtol·|b|"));
    m_rtol->setToolTip(tr("Relative tolerance, to B (the reference)"));
    m_compare->setDefault(true);
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(false);
    m_progress->setMaximumWidth(160);
    m_summary->setTextFormat(Qt::RichText);
    m_summary->setWordWrap(true);
    m_export->setToolTip(tr("Save the table as CSV, or as the JSON of tessera diff --json"));
    m_loraUpdate->setToolTip(tr("A LoRA checkpoint: compare its fused model with its base weights, so each fused "
                                "weight shows the update its adapter adds (ΔW)"));
    for (auto filter : { DiffFilterProxy::StatusFilter::All, DiffFilterProxy::StatusFilter::Failing,
                         DiffFilterProxy::StatusFilter::Different, DiffFilterProxy::StatusFilter::WithinTolerance,
                         DiffFilterProxy::StatusFilter::Identical, DiffFilterProxy::StatusFilter::Missing,
                         DiffFilterProxy::StatusFilter::Mismatch })
        m_statusFilter->addItem(DiffFilterProxy::filterName(filter), static_cast<int>(filter));
    m_filter->lineEdit()->setPlaceholderText(tr("Filter tensors by name"));
}

void DiffPage::configureTable()
{
    m_proxy->setSourceModel(m_model);
    m_table->setModel(m_proxy);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);
    m_table->setTextElideMode(Qt::ElideMiddle);
    // Long names drop whole components, never the layer, expert or projection that tell rows apart.
    m_names = new TensorNameDelegate(m_table);
    m_table->setItemDelegateForColumn(DiffTableModel::NameColumn, m_names);
    addCopyNamesAction(m_table, DiffTableModel::NameColumn);
    m_table->verticalHeader()->setVisible(false);
    m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
    m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder); // report order until a header is clicked
    m_table->setSortingEnabled(true);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_table->horizontalHeader()->setStretchLastSection(false);
    m_table->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
    // Numbers are never cut: each column fits its header and the widest number it can show.
    const QFontMetrics fm(m_table->font());
    const int number = fm.horizontalAdvance(QStringLiteral("-8.888e-88"));
    auto fitColumn = [&](int column, int content) {
        const int header = fm.horizontalAdvance(m_model->headerData(column, Qt::Horizontal).toString()) + 24;
        m_table->setColumnWidth(column, std::max(header, content + 14));
    };
    fitColumn(DiffTableModel::StatusColumn, fm.horizontalAdvance(QStringLiteral("within tolerance")));
    for (int c = DiffTableModel::MaxAbsColumn; c <= DiffTableModel::DifferingColumn; ++c)
        fitColumn(c, c == DiffTableModel::CosineColumn ? fm.horizontalAdvance(QStringLiteral("1 − 8.8e-88")) : number);
    fitColumn(DiffTableModel::NanColumn, fm.horizontalAdvance(QStringLiteral("8888 / 8888")));
    fitColumn(DiffTableModel::InfColumn, fm.horizontalAdvance(QStringLiteral("8888 / 8888")));
    fitColumn(DiffTableModel::BitEqualColumn, fm.horizontalAdvance(QStringLiteral("no")));
    fitColumn(DiffTableModel::DtypeColumn, fm.horizontalAdvance(QStringLiteral("BF16 / F32")));
    fitColumn(DiffTableModel::ShapeColumn, fm.horizontalAdvance(QStringLiteral("[151936, 4096]")));
    // NaN and Inf counts right after the status: a narrow pane shows them without scrolling, since a NaN is what
    // most often explains a failed comparison.
    auto* header = m_table->horizontalHeader();
    header->moveSection(header->visualIndex(DiffTableModel::NanColumn), header->visualIndex(DiffTableModel::StatusColumn) + 1);
    header->moveSection(header->visualIndex(DiffTableModel::InfColumn), header->visualIndex(DiffTableModel::NanColumn) + 1);
    // The name takes what the numbers leave, never less than a readable width.
    m_nameColumn = new ColumnFitter(m_table, m_table->horizontalHeader(), { DiffTableModel::NameColumn },
                                    fm.horizontalAdvance(QStringLiteral("model.layers.00.mlp.down_proj.weight")));
}

void DiffPage::fitNames(const std::vector<tessera::TensorDiff>& rows)
{
    QStringList names;
    for (const auto& row : rows)
        names << qs(row.name);
    m_names->setSharedPrefix(sharedNamePrefix(names));
    m_nameColumn->setMinimumWidth(compactNamesWidth(names, m_names->sharedPrefix(), QFontMetrics(m_table->font())));
    m_nameColumn->fit();
}

void DiffPage::buildLayout()
{
    auto* form = new QGridLayout;
    form->setHorizontalSpacing(6);
    form->addWidget(new QLabel(tr("A"), this), 0, 0);
    m_browseA = new QPushButton(tr("Browse…"), this);
    form->addWidget(m_left, 0, 1);
    form->addWidget(m_browseA, 0, 2);
    form->addWidget(new QLabel(tr("B"), this), 1, 0);
    m_browseB = new QPushButton(tr("Browse…"), this);
    form->addWidget(m_right, 1, 1);
    form->addWidget(m_browseB, 1, 2);
    form->setColumnStretch(1, 1);
    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("atol"), this));
    controls->addWidget(m_atol);
    controls->addSpacing(6);
    controls->addWidget(new QLabel(tr("rtol"), this));
    controls->addWidget(m_rtol);
    controls->addSpacing(12);
    for (QWidget* w : std::initializer_list<QWidget*> { m_compare, m_loraUpdate, m_export, m_cancel, m_progress })
        controls->addWidget(w);
    controls->addWidget(m_summary, 1);
    auto* filters = new QHBoxLayout;
    filters->addWidget(m_statusFilter);
    filters->addWidget(m_filter, 1);

    auto* tableBox = new QWidget(this);
    auto* tableLayout = new QVBoxLayout(tableBox);
    tableLayout->setContentsMargins(0, 0, 0, 0);
    tableLayout->setSpacing(4);
    tableLayout->addLayout(filters);
    tableLayout->addWidget(m_table, 1);
    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(tableBox);
    // In a short window the detail scrolls instead of drawing its plots over one another.
    auto* detailScroll = new QScrollArea(this);
    detailScroll->setWidget(m_detail);
    detailScroll->setWidgetResizable(true);
    detailScroll->setFrameShape(QFrame::NoFrame);
    splitter->addWidget(detailScroll);
    // Half each, whatever the detail shows at first (nothing before a comparison): the table keeps a screenful of
    // rows at 720 pixels, the detail scrolls.
    splitter->setStretchFactor(0, 1);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({ 1000, 1000 });
    splitter->setChildrenCollapsible(false);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addLayout(form);
    layout->addLayout(controls);
    layout->addWidget(m_command);
    layout->addWidget(m_models);
    layout->addWidget(m_warnings);
    layout->addWidget(splitter, 1);
}

void DiffPage::connectSignals()
{
    connect(m_browseB, &QPushButton::clicked, this, &DiffPage::browseReference);
    connect(m_browseA, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Choose A"), pathA().isEmpty() && m_checkpoint
                                                                                      ? qs(m_checkpoint->root)
                                                                                      : pathA());
        if (!dir.isEmpty())
            m_left->setText(QDir::toNativeSeparators(dir));
    });
    for (QLineEdit* edit : { m_left, m_right }) {
        connect(edit, &QLineEdit::returnPressed, this, &DiffPage::compare);
        connect(edit, &QLineEdit::textChanged, this, [this] { setRunning(isRunning()); });
    }
    for (QLineEdit* edit : { m_atol, m_rtol })
        connect(edit, &QLineEdit::textChanged, this, [this] { m_command->setText(commandLine()); });
    connect(m_compare, &QPushButton::clicked, this, &DiffPage::compare);
    connect(m_loraUpdate, &QPushButton::clicked, this, &DiffPage::compareLoraUpdate);
    connect(m_export, &QPushButton::clicked, this, &DiffPage::exportWithDialog);
    connect(m_cancel, &QPushButton::clicked, this, &DiffPage::cancel);
    connect(m_statusFilter, &QComboBox::currentIndexChanged, this, [this] {
        m_proxy->setStatusFilter(static_cast<DiffFilterProxy::StatusFilter>(m_statusFilter->currentData().toInt()));
    });
    connect(m_filter, &FilterBar::filterChanged, m_proxy, qOverload<const QRegularExpression&>(&QSortFilterProxyModel::setFilterRegularExpression));
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &DiffPage::onCurrentRowChanged);
    connect(m_job, &DiffJob::paired, this, &DiffPage::onPaired);
    connect(m_job, &DiffJob::rowsFinished, m_model, &DiffTableModel::updateRows);
    connect(m_job, &DiffJob::progress, this, [this](int permille, const QString& text) {
        m_progress->setValue(permille);
        m_summary->setText(text.toHtmlEscaped());
    });
    connect(m_job, &DiffJob::finished, this, &DiffPage::onFinished);
    connect(m_job, &DiffJob::failed, this, &DiffPage::onFailed);
    connect(m_job, &DiffJob::canceled, this, [this] {
        setRunning(false);
        m_summary->setText(tr("Comparison canceled; rows still pending were not compared."));
    });
    connect(m_detailJob, &DiffDetailJob::finished, this, [this](const DiffDetailPtr& detail) {
        m_detail->setDetail(*detail, m_model->isUpdateView());
        Q_EMIT detailShown(qs(detail->summary.name));
    });
    connect(m_detailJob, &DiffDetailJob::failed, this, [this](const QString& tensor, const QString& message) {
        m_detail->showMessage(tr("%1: %2").arg(tensor, message));
        Q_EMIT detailShown(tensor);
    });
}

DiffPage::~DiffPage() = default;

void DiffPage::setCheckpoint(CheckpointPtr checkpoint)
{
    if (checkpoint != m_checkpoint) {
        // A new A makes the old comparison meaningless.
        m_job->cancel();
        m_detailJob->cancel();
        m_model->clear();
        m_report.reset();
        m_sideA.reset();
        m_sideB.reset();
        m_summary->clear();
        m_models->hide();
        m_warnings->hide();
        m_detail->showMessage(tr("Press Compare to compare the loaded checkpoint with B."));
        // B and the filters belonged to the old A: a reference kept by mistake would compare the wrong models.
        if (m_checkpoint && checkpoint && checkpoint->root != m_checkpoint->root) {
            m_right->clear();
            setTolerances(0, 0);
            m_carried = tessera::DiffRequest();
            m_statusFilter->setCurrentIndex(0);
            m_filter->setText(QString());
        }
    }
    m_checkpoint = std::move(checkpoint);
    m_loraCheckpoint = m_checkpoint && tessera::hasLoraTensors(*m_checkpoint);
    m_left->setText(m_checkpoint ? QDir::toNativeSeparators(qs(m_checkpoint->root)) : QString());
    setRunning(isRunning());
}

void DiffPage::setReferenceDir(const QString& dir)
{
    m_right->setText(dir);
}

QString DiffPage::referenceDir() const { return m_right->text().trimmed(); }

QString DiffPage::pathA() const { return m_left->text().trimmed(); }

void DiffPage::setPathA(const QString& path) { m_left->setText(path); }

QString DiffPage::otherA() const
{
    const QString path = pathA();
    if (path.isEmpty() || (m_checkpoint && QDir(path).absolutePath() == QDir(qs(m_checkpoint->root)).absolutePath()))
        return {};
    return QDir(path).absolutePath();
}

void DiffPage::setTolerances(double atol, double rtol)
{
    m_atol->setText(QString::number(atol, 'g', 10));
    m_rtol->setText(QString::number(rtol, 'g', 10));
}

namespace {
/// The flags of a request the page has no field for (the LoRA reading and dtype of a test, its threads), copied
/// from `from` into `to`.
void carryFlags(const tessera::DiffRequest& from, tessera::DiffRequest& to)
{
    to.threads = from.threads;
    to.lora = from.lora;
    to.loraAlpha = from.loraAlpha;
    to.useRslora = from.useRslora;
    to.baseModel = from.baseModel;
    to.dtype = from.dtype;
    to.roundToNarrower = from.roundToNarrower;
}
} // namespace

tessera::DiffRequest DiffPage::request(bool loraUpdate) const
{
    tessera::DiffRequest r;
    const QString other = otherA();
    r.a = other.isEmpty() && m_checkpoint ? m_checkpoint->root : QDir::fromNativeSeparators(other).toStdString();
    // The loaded checkpoint's config folder may be one its root alone would not find: named, as the command needs.
    if (other.isEmpty() && m_checkpoint && !m_checkpoint->hfConfigDir.empty())
        r.hfModelPath = m_checkpoint->hfConfigDir;
    if (other.isEmpty() && m_carried.hfModelPath)
        r.hfModelPath = m_carried.hfModelPath;
    carryFlags(m_carried, r);
    r.loraUpdate = loraUpdate;
    if (!loraUpdate && !referenceDir().isEmpty())
        r.b = QDir(referenceDir()).absolutePath().toStdString();
    for (auto [edit, field] : { std::pair { m_atol, &r.atol }, std::pair { m_rtol, &r.rtol } })
        if (const QString v = edit->text().trimmed(); v != QLatin1String("0"))
            *field = v.toStdString();
    return r;
}

QString DiffPage::commandLine(bool loraUpdate) const
{
    if (!m_checkpoint && otherA().isEmpty())
        return {};
    return qs(tessera::commandLineText("diff", request(loraUpdate).toArgs()));
}

bool DiffPage::compareRequest(const tessera::DiffRequest& request, const QString& focusTensor)
{
    m_nextFocus = focusTensor;
    // A path equal to the loaded checkpoint's is the loaded checkpoint: its scan is reused.
    setPathA(request.a ? QDir::toNativeSeparators(qs(*request.a)) : QString());
    setReferenceDir(request.b ? QDir::toNativeSeparators(qs(*request.b)) : QString());
    m_atol->setText(request.atol ? qs(*request.atol) : QStringLiteral("0"));
    m_rtol->setText(request.rtol ? qs(*request.rtol) : QStringLiteral("0"));
    m_carried = tessera::DiffRequest();
    m_carried.hfModelPath = request.hfModelPath;
    carryFlags(request, m_carried);
    return request.loraUpdate ? compareLoraUpdate() : compare();
}

bool DiffPage::compare() { return startComparison(false); }

bool DiffPage::compareLoraUpdate() { return startComparison(true); }

bool DiffPage::startComparison(bool loraUpdate)
{
    m_focus = std::exchange(m_nextFocus, QString());
    QString error;
    if (!m_checkpoint && (loraUpdate || otherA().isEmpty()))
        error = tr("Open a checkpoint, or choose A: a checkpoint or Hugging Face folder.");
    else if (loraUpdate && !m_loraCheckpoint)
        error = tr("The loaded checkpoint has no LoRA adapter.");
    else if (!loraUpdate && referenceDir().isEmpty())
        error = tr("Choose B: a Hugging Face folder or another checkpoint.");
    const tessera::DiffRequest request = this->request(loraUpdate);
    // Checked as `tessera diff` checks its flags (the tolerances: finite, 0 or more).
    auto options = error.isEmpty() ? tessera::diffSettings(request)
                                   : tessera::Result<tessera::DiffOptions>(tessera::makeError(error.toStdString()));
    if (!options) {
        m_summary->setText(QStringLiteral("<span style='color:#d03030'>%1</span>")
                               .arg(qs(options.error().message).toHtmlEscaped()));
        return false;
    }
    m_options = *options;
    m_command->setText(commandLine(loraUpdate));
    m_models->hide();
    m_warnings->hide();
    m_detailJob->cancel();
    m_model->clear();
    m_model->setUpdateView(loraUpdate);
    m_report.reset();
    m_sideA.reset(); // the detail of a row waits for this comparison's sides
    m_sideB.reset();
    // A LoRA update's B is A's own base weights: a reference left in the field would say otherwise.
    if (loraUpdate)
        m_right->clear();
    m_detail->showMessage(tr("Comparing…"));
    m_progress->setValue(0);
    m_summary->setText(loraUpdate ? tr("Reading the LoRA adapter…") : tr("Scanning…"));
    tessera::PrepareContext context;
    if (m_checkpoint) // the workbench's scan applies the default parameter check (ScanJob), as prepareDiff does
        context.scans.push_back(loadedScan(m_checkpoint));
    m_job->start(request, context);
    setRunning(true);
    return true;
}

void DiffPage::cancel() { m_job->cancel(); }

bool DiffPage::exportReport(const QString& path, QString* error) const
{
    if (!m_report) {
        *error = tr("Compare first: there is nothing to export yet.");
        return false;
    }
    const bool csv = path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive);
    const std::string text = csv ? tessera::diffReportToCsv(*m_report)
                                 : tessera::diffReportToJson(*m_report, m_sideA ? m_sideA->layout : std::string(),
                                                             m_sideB ? m_sideB->layout : std::string(), m_warningTexts)
                                           .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
            + "\n";
    *error = saveTextFile(path, text);
    return error->isEmpty();
}

void DiffPage::exportWithDialog()
{
    const QString path = QFileDialog::getSaveFileName(this, tr("Export the Comparison"), QStringLiteral("diff.json"),
                                                      tr("JSON (*.json);;CSV (*.csv)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!exportReport(path, &error))
        m_summary->setText(QStringLiteral("<span style='color:#d03030'>%1</span>").arg(error.toHtmlEscaped()));
}

bool DiffPage::isRunning() const { return m_job->isRunning(); }

void DiffPage::setRunning(bool running)
{
    m_compare->setEnabled(!running && (m_checkpoint || !otherA().isEmpty()) && !referenceDir().isEmpty());
    m_loraUpdate->setVisible(m_loraCheckpoint);
    m_loraUpdate->setEnabled(!running);
    m_export->setEnabled(!running && m_report);
    m_cancel->setVisible(running);
    m_progress->setVisible(running);
    if (!running) // what Compare would run
        m_command->setText(commandLine(false));
}

void DiffPage::browseReference()
{
    const QString start = referenceDir().isEmpty() && m_checkpoint ? qs(m_checkpoint->root) : referenceDir();
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Choose B (reference)"), start);
    if (!dir.isEmpty())
        m_right->setText(dir);
}

void DiffPage::onPaired(const CheckpointPtr& a, const CheckpointPtr& b, const std::vector<tessera::TensorDiff>& rows,
                        const QStringList& warnings, const QString& models)
{
    m_sideA = a;
    m_sideB = b;
    m_model->setRows(rows);
    fitNames(rows);
    // The models first: two different configs explain every missing tensor and shape mismatch that follows.
    m_models->setText(QStringLiteral("<b style='color:#d03030'>%1</b>").arg(models.toHtmlEscaped()));
    m_models->setVisible(!models.isEmpty());
    m_models->setToolTip(models);
    // What the sides' scans and mappings found, as `tessera diff` prints it (and its JSON export holds it).
    m_warningTexts.clear();
    for (const auto& w : warnings)
        m_warningTexts.push_back(w.toStdString());
    constexpr int kShown = 3;
    QStringList shown = warnings.mid(0, kShown);
    if (warnings.size() > kShown)
        shown << tr("… and %1 more (hover to see them all)").arg(warnings.size() - kShown);
    m_warnings->setText(shown.join(QLatin1Char('\n')));
    m_warnings->setToolTip(warnings.join(QLatin1Char('\n')));
    m_warnings->setVisible(!warnings.isEmpty());
}

QString DiffPage::modelsText() const { return m_models->isHidden() ? QString() : m_models->toolTip(); }

QString DiffPage::summaryText() const { return m_summary->text(); }

void DiffPage::onFinished(const DiffReportPtr& report)
{
    m_report = report; // before setRunning(), which offers the export of it
    setRunning(false);
    // The final report is authoritative (the streamed rows are the same values).
    std::vector<std::pair<std::size_t, tessera::TensorDiff>> all;
    for (std::size_t i = 0; i < report->tensors.size(); ++i)
        all.emplace_back(i, report->tensors[i]);
    if (m_model->rowCount() != static_cast<int>(report->tensors.size()))
        m_model->setRows(report->tensors);
    else
        m_model->updateRows(all);

    double maxAbs = 0;
    for (const auto& t : report->tensors)
        if (t.compared && t.numeric)
            maxAbs = std::max(maxAbs, t.maxAbsDiff);
    QStringList parts;
    for (const DiffStatus status : tessera::reportedDiffStatuses())
        if (const std::size_t n = report->count(status))
            parts << QStringLiteral("<span style='color:%1'>%2 %3</span>")
                         .arg(QLatin1String(status == DiffStatus::Identical         ? "#2e8b3e"
                                                : status == DiffStatus::WithinTolerance ? "#b87400"
                                                                                        : "#d03030"))
                         .arg(n)
                         .arg(QString::fromLatin1(tessera::diffStatusName(status)));
    if (m_model->isUpdateView()) {
        showUpdateSummary(*report, maxAbs);
        selectMostInteresting();
        Q_EMIT comparisonFinished(report);
        return;
    }
    const QString verdict = report->ok() ? QStringLiteral("<b style='color:#2e8b3e'>%1</b>").arg(tr("PASS"))
                                         : QStringLiteral("<b style='color:#d03030'>%1</b>").arg(tr("FAIL"));
    m_summary->setText(tr("%1 &nbsp;%2: %3 · max |a−b| %4 · atol %5, rtol %6")
                           .arg(verdict, countText(static_cast<long long>(report->tensors.size()), tr("tensor"), tr("tensors")),
                                parts.join(QStringLiteral(", ")), DiffTableModel::numberText(maxAbs),
                                DiffTableModel::numberText(report->atol), DiffTableModel::numberText(report->rtol)));
    selectMostInteresting();
    Q_EMIT comparisonFinished(report);
}

void DiffPage::showUpdateSummary(const tessera::DiffReport& report, double maxAbs)
{
    // The fused weights differ from their base by design: what matters is how many the adapter changed, and
    // anything that went wrong on the way (a weight unreadable, missing or incomplete).
    const std::size_t updated = report.count(DiffStatus::Different) + report.count(DiffStatus::WithinTolerance);
    const std::size_t unchanged = report.count(DiffStatus::Identical);
    const std::size_t problems = report.tensors.size() - updated - unchanged;
    QString text = tr("<b>LoRA update</b>: %1 updated by the adapter, %2 unchanged · max |ΔW| %3")
                       .arg(countText(static_cast<long long>(updated), tr("weight"), tr("weights")))
                       .arg(unchanged)
                       .arg(DiffTableModel::numberText(maxAbs));
    if (problems)
        text += QStringLiteral(" · <b style='color:#d03030'>%1</b>")
                    .arg(tr("%1 with problems").arg(countText(static_cast<long long>(problems), tr("tensor"), tr("tensors"))));
    m_summary->setText(text);
}

void DiffPage::onFailed(const QString& message)
{
    setRunning(false);
    m_summary->setText(QStringLiteral("<span style='color:#d03030'>%1</span>").arg(message.toHtmlEscaped()));
    m_detail->showMessage(message);
    Q_EMIT comparisonFailed(message);
}

void DiffPage::selectMostInteresting()
{
    // The tensor the comparison was opened for; else the largest difference, the first problem, the first tensor.
    if (!m_focus.isEmpty() && selectTensor(m_focus))
        return;
    int pick = -1;
    double worst = -1;
    for (int r = 0; r < m_model->rowCount(); ++r) {
        const auto* t = m_model->row(r);
        if (t->status == DiffStatus::Different && t->numeric && t->maxAbsDiff > worst) {
            worst = t->maxAbsDiff;
            pick = r;
        }
    }
    for (int r = 0; r < m_model->rowCount() && pick < 0; ++r)
        if (!tessera::diffStatusOk(m_model->row(r)->status))
            pick = r;
    if (pick < 0 && m_model->rowCount() > 0)
        pick = 0;
    if (pick >= 0)
        selectTensor(qs(m_model->row(pick)->name));
}

bool DiffPage::selectTensor(const QString& tensor)
{
    const int row = m_model->rowOf(tensor);
    if (row < 0)
        return false;
    const QModelIndex index = m_proxy->mapFromSource(m_model->index(row, 0));
    if (!index.isValid())
        return false; // filtered out
    m_table->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_table->scrollTo(index);
    return true;
}

void DiffPage::onCurrentRowChanged()
{
    const QModelIndex current = m_proxy->mapToSource(m_table->selectionModel()->currentIndex());
    const auto* t = m_model->row(current.row());
    if (!t) {
        m_detailJob->cancel();
        return;
    }
    const QString name = qs(t->name);
    const bool pairable = t->indexA >= 0 && t->indexB >= 0 && t->shapeA == t->shapeB;
    if (!pairable || !m_sideA || !m_sideB || t->status == DiffStatus::Failed) {
        m_detailJob->cancel();
        m_detail->showMessage(QStringLiteral("<b>%1</b> &nbsp; <span style='color:#d03030'><b>%2</b></span> &nbsp; %3")
                                  .arg(name.toHtmlEscaped(), QString::fromLatin1(tessera::diffStatusName(t->status)),
                                       qs(t->detail).toHtmlEscaped()));
        Q_EMIT detailShown(name);
        return;
    }
    m_detail->showMessage(tr("Computing the detail of %1…").arg(name));
    m_detailJob->start(m_sideA, m_sideB, name, m_options);
}

} // namespace tessera::ui
