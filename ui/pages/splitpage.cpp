// SPDX-License-Identifier: GPL-3.0-or-later
#include "splitpage.h"

#include "confirm.h"
#include "coreconvert.h"
#include "jobs/planjob.h"
#include "jobs/splitjob.h"
#include "split/split_training.h"
#include "models/splitplanmodel.h"
#include "openfolder.h"
#include "widgets/folderfield.h"
#include "widgets/placementview.h"
#include "widgets/rankcolors.h"

#include "merge/merge_plan.h"
#include "model/module_order.h"
#include "ops/flag_table.h"
#include "ops/prepare_split.h"
#include "ops/vocabulary.h"
#include "split/split_plan.h"
#include "split/split_preview.h"

#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QCheckBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTime>
#include <QVBoxLayout>

#include <exception>

namespace tessera::ui {

namespace {

QSpinBox* sizeBox(int maximum, QWidget* parent)
{
    auto* box = new QSpinBox(parent);
    box->setRange(1, maximum);
    box->setAccelerated(true);
    return box;
}

/// The layers of the first or last pipeline stage; its minimum reads "even" (Megatron's default split).
QSpinBox* stageLayersBox(const QString& tip, QWidget* parent)
{
    auto* box = new QSpinBox(parent);
    box->setRange(-1, 1'000'000);
    box->setValue(-1);
    box->setSpecialValueText(QObject::tr("even"));
    box->setToolTip(tip);
    return box;
}

/// A row of labelled widgets (TP 2 · PP 2 · …) as one form field.
QWidget* inlineRow(const QList<QPair<QString, QWidget*>>& items, QWidget* parent)
{
    auto* row = new QWidget(parent);
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    for (const auto& [label, widget] : items) {
        if (!label.isEmpty())
            layout->addWidget(new QLabel(label, row));
        layout->addWidget(widget);
        layout->addSpacing(8);
    }
    layout->addStretch(1);
    return row;
}

/// A split's labels for the workbench, by the command line's names (ops/vocabulary.h lists them).
QString formatLabel(tessera::SplitFormat format)
{
    switch (format) {
    case tessera::SplitFormat::Fsdp:
        return QObject::tr("FSDP2 rank files (verl)");
    case tessera::SplitFormat::Dcp:
        return QObject::tr("PyTorch DCP (torchtitan)");
    case tessera::SplitFormat::Megatron:
        return QObject::tr("Megatron per-rank folders (verl)");
    case tessera::SplitFormat::MegatronDist:
        return QObject::tr("Megatron torch_dist (verl dist_ckpt)");
    }
    return {};
}

} // namespace

SplitPage::SplitPage(QWidget* parent)
    : QWidget(parent)
    , m_planner(new PlanJob(this))
    , m_job(new SplitJob(this))
    , m_planModel(new SplitPlanModel(this))
    , m_source(new QLabel(this))
    , m_format(new QComboBox(this))
    , m_worldSize(sizeBox(16384, this))
    , m_mesh(new QLineEdit(this))
    , m_meshNames(new QLineEdit(this))
    , m_tp(sizeBox(4096, this))
    , m_pp(sizeBox(4096, this))
    , m_vpp(sizeBox(4096, this))
    , m_ep(sizeBox(4096, this))
    , m_firstStageLayers(stageLayersBox(tr("Layers on the first pipeline stage (--num_layers_in_first_pipeline_stage); "
                                           "the stages between split the rest evenly"), this))
    , m_lastStageLayers(stageLayersBox(tr("Layers on the last pipeline stage (--num_layers_in_last_pipeline_stage)"), this))
    , m_vocabDivisible(sizeBox(1 << 20, this))
    , m_targetDir(new QLineEdit(this))
    , m_modelOnly(new QCheckBox(tr("Model only: leave the optimizer, scheduler, random and dataloader state behind"),
                                this))
    , m_planSummary(new QLabel(this))
    , m_planView(new QTableView(this))
    , m_previewTensor(new QComboBox(this))
    , m_preview(new PlacementView(this))
    , m_previewHover(new QLabel(this))
    , m_command(new QLineEdit(this))
    , m_run(new QPushButton(tr("Split"), this))
    , m_cancel(new QPushButton(tr("Cancel"), this))
    , m_openOutput(new QPushButton(tr("Open Output"), this))
    , m_progress(new QProgressBar(this))
    , m_progressText(new QLabel(this))
    , m_log(new QPlainTextEdit(this))
{
    createWidgets();
    buildLayout();
    connectSignals();
    updateFormatRows();
    requestChanged();
}

SplitPage::~SplitPage() = default;

void SplitPage::createWidgets()
{
    m_source->setWordWrap(true);
    m_source->setTextFormat(Qt::RichText);
    for (auto format : tessera::splitFormats())
        m_format->addItem(formatLabel(format), QLatin1String(tessera::splitFormatName(format)));
    m_format->setToolTip(tr("The layout to write (tessera split --format)"));
    m_worldSize->setValue(2);
    m_worldSize->setToolTip(tr("Number of ranks (--world_size)"));
    m_mesh->setPlaceholderText(tr("e.g. 2x4 for HSDP (default: one dim of all ranks)"));
    m_mesh->setToolTip(tr("The device mesh (--mesh): Replicate() over the first dims, Shard(0) over the last"));
    m_meshNames->setPlaceholderText(tr("fsdp, or ddp,fsdp"));
    m_vocabDivisible->setValue(128);
    m_vocabDivisible->setToolTip(tr("make_vocab_size_divisible_by: the vocabulary is padded to a multiple of it × TP"));
    m_targetDir->setPlaceholderText(tr("a new or empty folder, e.g. …/global_step_0/actor"));
    m_planSummary->setWordWrap(true);
    m_progressText->setWordWrap(true); // a refusal naming a long path wraps instead of widening the page
    m_planSummary->setTextFormat(Qt::RichText);
    m_planSummary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_planView->setModel(m_planModel);
    m_planView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_planView->verticalHeader()->hide();
    m_planView->horizontalHeader()->setSectionResizeMode(SplitPlanModel::FileColumn, QHeaderView::Stretch);
    m_planView->horizontalHeader()->setStretchLastSection(false);
    m_planView->setWordWrap(false);
    m_planView->setTabKeyNavigation(false); // one Tab stop: the arrows walk its rows
    m_log->setTabChangesFocus(true);
    m_planView->setMinimumHeight(m_planView->verticalHeader()->defaultSectionSize() * 4 + 4);
    m_previewTensor->setToolTip(tr("The tensor whose planned placement is drawn"));
    m_previewTensor->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_previewTensor->setMinimumContentsLength(30);
    m_previewHover->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_previewHover->setMinimumHeight(m_previewHover->fontMetrics().height() * 2 + 4);
    m_previewHover->setWordWrap(true);
    m_command->setReadOnly(true);
    m_command->setToolTip(tr("The same split from the command line"));
    m_cancel->setEnabled(false);
    m_openOutput->setEnabled(false);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(2000);
    m_log->setMaximumHeight(m_log->fontMetrics().height() * 5 + 12);
}

void SplitPage::buildLayout()
{
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->addRow(tr("Format"), m_format);
    m_fsdpRows = inlineRow({ { QString(), m_worldSize }, { tr("mesh"), m_mesh }, { tr("names"), m_meshNames } }, this);
    form->addRow(tr("Ranks"), m_fsdpRows);
    m_megatronRows = inlineRow({ { tr("TP"), m_tp }, { tr("PP"), m_pp }, { tr("VPP"), m_vpp }, { tr("EP"), m_ep },
                                 { tr("vocabulary ÷"), m_vocabDivisible } },
                               this);
    form->addRow(tr("Parallel"), m_megatronRows);
    m_stageRows = inlineRow({ { tr("first stage"), m_firstStageLayers }, { tr("last stage"), m_lastStageLayers } }, this);
    form->addRow(tr("Layers"), m_stageRows);
    form->addRow(tr("Output folder"), withBrowse(m_targetDir, this, [this] {
                     return m_checkpoint ? QFileInfo(qs(m_checkpoint->root)).absolutePath() : QDir::homePath();
                 }));
    m_modelOnly->setToolTip(tr("tessera split --model_only: a verl FSDP run's training state (optim_, extra_state_ "
                               "files, data.pt) is otherwise resharded with the model so the run resumes at the new "
                               "world size; without it the run resumes with checkpoint.load_contents=[model]"));
    form->addRow(tr("Training state"), m_modelOnly);

    auto* previewBox = new QWidget(this);
    auto* previewLayout = new QVBoxLayout(previewBox);
    previewLayout->setContentsMargins(0, 0, 0, 0);
    previewLayout->addWidget(inlineRow({ { tr("Planned placement of"), m_previewTensor } }, this));
    previewLayout->addWidget(m_preview, 1);
    previewLayout->addWidget(m_previewHover);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_planView);
    split->addWidget(previewBox);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 2);
    split->setChildrenCollapsible(false);

    // The options, plan, placement and log scroll in a short window; the command line, Split and its status line
    // stay in sight below them (as on the Merge page).
    auto* body = new QWidget(this);
    auto* bodyLayout = new QVBoxLayout(body);
    bodyLayout->setContentsMargins(0, 0, 0, 0);
    bodyLayout->addWidget(m_source);
    bodyLayout->addLayout(form);
    bodyLayout->addWidget(m_planSummary);
    bodyLayout->addWidget(split, 1);
    bodyLayout->addWidget(m_log);
    auto* bodyScroll = new QScrollArea(this);
    bodyScroll->setWidget(body);
    bodyScroll->setWidgetResizable(true);
    bodyScroll->setFrameShape(QFrame::NoFrame);
    bodyScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_openOutput);
    buttons->addWidget(m_progress, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addWidget(bodyScroll, 1);
    layout->addWidget(m_command);
    layout->addLayout(buttons);
    layout->addWidget(m_progressText);
}

void SplitPage::connectSignals()
{
    connect(m_format, &QComboBox::currentIndexChanged, this, [this] {
        updateFormatRows();
        requestChanged();
    });
    for (QSpinBox* box : { m_worldSize, m_tp, m_pp, m_vpp, m_ep, m_vocabDivisible, m_firstStageLayers, m_lastStageLayers })
        connect(box, &QSpinBox::valueChanged, this, &SplitPage::requestChanged);
    connect(m_mesh, &QLineEdit::textChanged, this, &SplitPage::syncWorldSizeToMesh);
    for (QLineEdit* edit : { m_mesh, m_meshNames, m_targetDir })
        connect(edit, &QLineEdit::textChanged, this, &SplitPage::requestChanged);
    connect(m_modelOnly, &QCheckBox::toggled, this, &SplitPage::requestChanged);
    connect(m_previewTensor, &QComboBox::currentIndexChanged, this, [this] {
        m_wantedPreview = m_previewTensor->currentText();
        m_preview->setTensor(m_previewInfo, m_previewTensor->currentData().isValid() ? m_previewTensor->currentData().toInt() : -1);
        m_previewHover->clear();
    });
    connect(m_preview, &PlacementView::hoverChanged, this,
            [this](int, const QString& text) { m_previewHover->setText(text); });
    connect(m_run, &QPushButton::clicked, this, &SplitPage::run);
    connect(m_cancel, &QPushButton::clicked, this, &SplitPage::cancel);
    connect(m_openOutput, &QPushButton::clicked, this, [this] {
        if (!m_writtenDir.isEmpty() && !openFolder(m_writtenDir))
            appendLog(tr("Cannot open %1 in the file manager.").arg(QDir::toNativeSeparators(m_writtenDir)));
    });
    connect(m_planner, &PlanJob::busyChanged, this, &SplitPage::updateButtons);
    connect(m_job, &SplitJob::progress, this, [this](quint64 done, quint64 total, const QString& current) {
        m_progress->setValue(total ? int(1000.0 * double(done) / double(total)) : 0);
        m_progressText->setText(tr("%1 of %2 · %3").arg(bytesText(done), bytesText(total), current));
    });
    connect(m_job, &SplitJob::finished, this, &SplitPage::onFinished);
}

QString SplitPage::formatName() const { return m_format->currentData().toString(); }

void SplitPage::setSource(const tessera::ModelRequest& model, const tessera::PrepareContext& context,
                          CheckpointPtr checkpoint)
{
    tessera::ModelRequest flags = model;
    flags.json = flags.quiet = flags.debug = false; // how a command prints is not the model
    auto rulesText = [](const tessera::PrepareContext& c) -> std::string {
        return c.rules ? c.rules->text : std::string();
    };
    const bool same = checkpoint == m_checkpoint && flags == m_model && rulesText(context) == rulesText(m_context);
    m_context = context; // newer scans to reuse, whatever else changed
    if (same)
        return;
    m_model = flags;
    m_checkpoint = std::move(checkpoint);
    requestChanged();
}

void SplitPage::setCheckpoint(CheckpointPtr checkpoint)
{
    tessera::ModelRequest model;
    tessera::PrepareContext context;
    if (checkpoint) {
        model = loadedModelRequest(*checkpoint);
        context.scans.push_back(loadedScan(checkpoint));
    }
    setSource(model, context, std::move(checkpoint));
}

void SplitPage::setFormat(const QString& name)
{
    if (const int i = m_format->findData(name); i >= 0)
        m_format->setCurrentIndex(i);
}

void SplitPage::setWorldSize(int ranks) { m_worldSize->setValue(ranks); }

void SplitPage::setModelOnly(bool on) { m_modelOnly->setChecked(on); }

void SplitPage::setMesh(const QString& mesh, const QString& dimNames)
{
    m_mesh->setText(mesh);
    m_meshNames->setText(dimNames);
}

void SplitPage::setMegatronSizes(int tp, int pp, int vpp, int ep)
{
    m_tp->setValue(tp);
    m_pp->setValue(pp);
    m_vpp->setValue(vpp);
    m_ep->setValue(ep);
}

void SplitPage::setTargetDir(const QString& dir) { m_targetDir->setText(dir); }

void SplitPage::previewTensor(int index)
{
    const int item = m_previewTensor->findData(index);
    if (item >= 0)
        m_previewTensor->setCurrentIndex(item);
}

void SplitPage::previewTensorNamed(const QString& name)
{
    // While a plan is on its way, the tensor is drawn once it arrives.
    m_wantedPreview = name;
    if (const int item = m_previewTensor->findText(name); item >= 0)
        m_previewTensor->setCurrentIndex(item);
}

void SplitPage::syncWorldSizeToMesh()
{
    // The ranks a mesh makes, shown in the world size (the command line takes one or the other).
    auto shape = tessera::parseMeshShape(m_mesh->text().trimmed().toStdString());
    if (m_mesh->text().trimmed().isEmpty() || !shape)
        return;
    std::int64_t ranks = 1;
    for (auto m : *shape)
        ranks *= m;
    const QSignalBlocker block(m_worldSize);
    m_worldSize->setValue(int(std::min<std::int64_t>(ranks, m_worldSize->maximum())));
}

void SplitPage::updateFormatRows()
{
    const QString f = formatName();
    const bool megatron = f.startsWith(QLatin1String("megatron"));
    m_fsdpRows->setEnabled(!megatron);
    m_mesh->setEnabled(f == QLatin1String("fsdp"));
    m_meshNames->setEnabled(f == QLatin1String("fsdp"));
    m_megatronRows->setEnabled(megatron);
    m_vpp->setEnabled(f == QLatin1String("megatron"));
    m_ep->setEnabled(f == QLatin1String("megatron"));
    m_stageRows->setEnabled(megatron);
}

tessera::SplitRequest SplitPage::request() const
{
    tessera::SplitRequest r;
    static_cast<tessera::ModelRequest&>(r) = m_model;
    if (m_checkpoint && tessera::isHuggingFaceLayout(m_checkpoint->layout)) {
        r.hfDir = r.localDir; // a Hugging Face model is split as one
        r.localDir.reset();
    }
    r.targetDir = m_targetDir->text().trimmed().toStdString(); // empty until chosen: the split refuses that
    r.modelOnly = m_modelOnly->isChecked();
    const QString format = formatName();
    r.format = format.toStdString();
    auto number = [](const QSpinBox* box) -> std::string { return std::to_string(box->value()); };
    if (format.startsWith(QLatin1String("megatron"))) {
        r.tp = number(m_tp);
        r.pp = number(m_pp);
        if (m_vpp->isEnabled() && m_vpp->value() != 1)
            r.vpp = number(m_vpp);
        if (m_ep->isEnabled() && m_ep->value() != 1)
            r.ep = number(m_ep);
        if (m_firstStageLayers->value() >= 0)
            r.firstStageLayers = number(m_firstStageLayers);
        if (m_lastStageLayers->value() >= 0)
            r.lastStageLayers = number(m_lastStageLayers);
        if (m_vocabDivisible->value() != 128)
            r.vocabDivisibleBy = number(m_vocabDivisible);
    } else if (format == QLatin1String("fsdp") && !m_mesh->text().trimmed().isEmpty()) {
        r.mesh = m_mesh->text().trimmed().toStdString();
        if (!m_meshNames->text().trimmed().isEmpty())
            r.meshDimNames = m_meshNames->text().trimmed().toStdString();
    } else {
        r.worldSize = number(m_worldSize);
    }
    return r;
}

QString SplitPage::commandLine() const
{
    return shownCommandLine("split", request().toArgs(), "OUT");
}

const tessera::SplitPlan* SplitPage::plan() const
{
    return m_prepared && m_prepared->plan && !m_prepared->refusal ? &*m_prepared->plan : nullptr;
}

bool SplitPage::isPlanning() const { return m_planner->isBusy(); }

void SplitPage::requestChanged()
{
    // What the last split did was of other options: the status and the bar start over.
    m_outcome.clear();
    if (!m_job->isRunning()) {
        m_progress->setValue(0);
        setWrittenDir({});
    }
    showCommandLine();
    const auto* edit = qobject_cast<const QLineEdit*>(sender());
    schedulePlan(edit ? 300 : 150);
}

void SplitPage::schedulePlan(int delayMs)
{
    if (!m_checkpoint) {
        m_planner->cancel();
        m_prepared.reset();
        m_source->setText(tr("<b>Split</b> writes the model the Merge page plans as a distributed checkpoint."));
        showError(tr("Open a checkpoint or a Hugging Face folder to split it."));
        return;
    }
    if (!m_prepared) {
        // The first plan of this model is on its way: no longer "open a checkpoint".
        m_planText = tr("Planning…");
        m_planSummary->setText(m_planText);
    }
    const tessera::SplitRequest request = this->request();
    const tessera::PrepareContext context = m_context;
    m_planner->schedule(
        [this, request, context](tessera::Progress& progress) -> std::function<void()> {
            tessera::PrepareContext withProgress = context;
            withProgress.progress = &progress;
            auto failed = [&](const std::string& message) {
                auto p = std::make_shared<tessera::PreparedSplit>();
                p->request = request;
                p->refusal = tessera::Refusal { tessera::makeError(message) };
                return std::shared_ptr<const tessera::PreparedSplit>(p);
            };
            std::shared_ptr<const tessera::PreparedSplit> prepared;
            CheckpointPtr preview;
            std::vector<std::size_t> order;
            try {
                prepared = std::make_shared<const tessera::PreparedSplit>(tessera::prepareSplit(request, withProgress));
                if (prepared->model.planned()) {
                    // Listed in the model's module order (embedding, layers in order, head), whatever the source's.
                    std::vector<std::string> names;
                    for (const auto& t : prepared->model.primary().tensors)
                        names.push_back(t.name);
                    order = tessera::moduleOrder(names);
                }
                if (prepared->plan && !prepared->refusal)
                    preview = std::make_shared<const tessera::CheckpointInfo>(
                        tessera::splitPlacementPreview(*prepared->plan, prepared->model.primary()));
            } catch (const std::exception& e) { // an allocation failure on a huge model
                prepared = failed(e.what());
            }
            return [this, prepared, preview, order] { onPrepared(prepared, preview, order); };
        },
        delayMs);
    updateButtons();
}

void SplitPage::onPrepared(const std::shared_ptr<const tessera::PreparedSplit>& prepared, CheckpointPtr preview,
                           const std::vector<std::size_t>& order)
{
    if (prepared->request != request())
        return; // the options changed meanwhile: their own plan is on its way
    m_prepared = prepared;
    m_previewInfo = std::move(preview);
    const QString previous = m_wantedPreview.isEmpty() ? m_previewTensor->currentText() : m_wantedPreview;
    {
        const QSignalBlocker block(m_previewTensor);
        m_previewTensor->clear();
        if (prepared->model.planned())
            for (std::size_t i : order)
                m_previewTensor->addItem(qs(prepared->model.primary().tensors[i].name), int(i));
        if (const int again = m_previewTensor->findText(previous); again >= 0)
            m_previewTensor->setCurrentIndex(again);
    }
    showPlan();
}

void SplitPage::showError(const QString& message)
{
    m_planText = message;
    m_planModel->setPlan(nullptr);
    m_preview->setTensor(nullptr, -1);
    m_planSummary->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                               .arg(problemColor(palette()).name(),
                                    message.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"))));
    updateButtons();
}

void SplitPage::showPlan()
{
    const auto& p = *m_prepared;
    const QString muted = palette().color(QPalette::PlaceholderText).name();
    if (p.model.planned()) {
        const auto& model = p.model.primary();
        m_source->setText(tr("<b>Split</b> %1 (%2 tensors, %3) as another layout. "
                             "<span style='color:%4'>The model is what a merge of it writes: Hugging Face names, with "
                             "the Merge page's dtype and mapping.</span>")
                              .arg(qs(p.request.source()).toHtmlEscaped())
                              .arg(model.tensors.size())
                              .arg(bytesText(model.totalBytes), muted));
    }
    if (p.refusal) {
        const QString message = qs(p.refusal->error.message);
        showError(p.refusal->usage || !p.model.planned() ? message
                                                         : tr("The model cannot be laid out this way:\n\n%1").arg(message));
        return;
    }
    m_planText = qs(tessera::splitPlanSummary(*p.plan, p.model.primary(), false));
    m_planModel->setPlan(std::shared_ptr<const tessera::SplitPlan>(m_prepared, &*p.plan));
    m_preview->setTensor(m_previewInfo, m_previewTensor->currentData().isValid() ? m_previewTensor->currentData().toInt() : -1);
    QStringList lines;
    if (!p.target && !p.request.targetDir.value_or("").empty())
        lines << QStringLiteral("<span style='color:%1'>%2</span>")
                     .arg(problemColor(palette()).name(),
                          tr("The split would refuse the output folder: %1").arg(qs(p.target.error().message)).toHtmlEscaped());
    lines << tr("<b>Writes</b> %1 as %2: %3 of tensors")
                 .arg(countText(qint64(p.plan->files.size()), tr("rank file"), tr("rank files")),
                      qs(p.plan->layout).toHtmlEscaped(), bytesText(p.plan->totalBytes));
    lines << tr("<b>Disk</b> about %1 · <b>Memory</b> about %2 (twice the largest tensor, %3)")
                 .arg(bytesText(p.plan->diskBytes), bytesText(p.plan->memoryBytes), bytesText(p.plan->largestTensorBytes));
    if (p.plan->runIteration)
        lines << tr("latest_checkpointed_iteration.txt two folders up is set to %1").arg(*p.plan->runIteration);
    if (const auto& training = p.plan->training) {
        lines << tr("<b>Training state</b> carried so the run resumes on %1: %2 and %3")
                     .arg(countText(p.plan->worldSize, tr("rank"), tr("ranks")),
                          countText(qint64(training->files.files.size()), tr("optimizer file"), tr("optimizer files")),
                          countText(qint64(training->extraState.size()), tr("extra-state file"), tr("extra-state files")));
        for (const auto& note : training->notes)
            lines << QStringLiteral("&nbsp;&nbsp;") + qs(note).toHtmlEscaped();
    }
    for (const auto& w : p.plan->warnings)
        lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, tr("note: %1").arg(qs(w)).toHtmlEscaped());
    for (const auto& m : p.model.messages)
        lines << QStringLiteral("<span style='color:%1'>%2</span>")
                     .arg(muted, (m.kind == tessera::PrepareMessage::Kind::Warning ? tr("warning: %1") : tr("note: %1"))
                                     .arg(qs(m.text))
                                     .toHtmlEscaped());
    m_planSummary->setText(lines.join(QStringLiteral("<br>")));
    updateButtons();
}

bool SplitPage::canRun() const
{
    return m_prepared && !isPlanning() && m_prepared->runnable() && m_prepared->request == request()
        && !m_job->isRunning();
}

QString SplitPage::statusText() const { return m_progressText->text(); }

void SplitPage::updateButtons()
{
    const bool running = m_job->isRunning();
    QString why;
    if (!m_checkpoint)
        why = tr("Not running: no model to split.");
    else if (isPlanning())
        why = tr("Planning…");
    else if (!m_prepared)
        why = tr("Not running: no plan yet.");
    else if (m_prepared->refusal)
        why = tr("Refused: %1").arg(qs(m_prepared->refusal->error.message).section(QLatin1Char('\n'), 0, 0));
    else if (m_targetDir->text().trimmed().isEmpty())
        why = tr("Not running. Choose an output folder first.");
    else if (!m_prepared->target)
        why = tr("Refused: %1").arg(qs(m_prepared->target.error().message));
    else
        why = tr("Ready to split.");
    m_run->setEnabled(canRun());
    m_run->setToolTip(canRun() ? tr("Write the checkpoint into the output folder") : why);
    m_cancel->setEnabled(running);
    for (QWidget* w : std::initializer_list<QWidget*> { m_format, m_fsdpRows, m_megatronRows, m_targetDir, m_modelOnly })
        w->setEnabled(!running);
    if (!running)
        updateFormatRows();
    showCommandLine();
    if (!running)
        m_progressText->setText(m_outcome.isEmpty() ? why : m_outcome);
}

void SplitPage::run()
{
    // Exactly the plan on screen: the request it was prepared for is the one the options make now.
    if (!canRun())
        return;
    if (!confirmOtherFiles()) {
        appendLog(tr("Not split: %1 was left as it is.").arg(qs(*m_prepared->request.targetDir)));
        return;
    }
    m_progress->setValue(0);
    m_progressText->setText(tr("Starting…"));
    setWrittenDir({});
    appendLog(tr("Splitting into %1 as %2").arg(qs(*m_prepared->request.targetDir), qs(m_prepared->plan->layout)));
    m_job->start(m_prepared);
    updateButtons();
}

void SplitPage::showCommandLine()
{
    // From its start ("tessera split --local_dir …"), not scrolled to its end as setText() leaves a line edit.
    m_command->setText(commandLine());
    m_command->setCursorPosition(0);
}

bool SplitPage::confirmOtherFiles()
{
    // The command line keeps them and says so; here the user is asked first, once.
    const auto& names = m_prepared->otherFiles;
    if (names.empty())
        return true;
    QStringList shown;
    for (std::size_t i = 0; i < names.size() && i < 3; ++i)
        shown << qs(names[i]);
    if (names.size() > 3)
        shown << tr("and %1 more").arg(names.size() - 3);
    return confirm(this, tr("Split into a folder that is not empty?"),
                   tr("%1 already holds %2 (%3). The split adds its files beside them and keeps them as they are. "
                      "Split into it?")
                       .arg(QDir::toNativeSeparators(QDir(qs(*m_prepared->request.targetDir)).absolutePath()),
                            countText(qint64(names.size()), tr("file"), tr("files")), shown.join(QStringLiteral(", "))));
}

void SplitPage::cancel() { m_job->cancel(); }

void SplitPage::onFinished(const SplitResult& result)
{
    if (result.ok) {
        setWrittenDir(result.outputDir);
        m_progress->setValue(1000);
        m_outcome = tr("Done: %1").arg(result.message);
        appendLog(tr("Done: %1").arg(result.message));
    } else {
        // The bar starts over: nothing of the split is left.
        m_progress->setValue(0);
        m_outcome = result.canceled ? tr("Canceled; nothing was written") : tr("Failed: %1").arg(result.message);
        appendLog(result.canceled ? tr("Canceled; nothing was written") : tr("Failed: %1").arg(result.message));
    }
    for (const auto& n : result.notes)
        appendLog(tr("note: %1").arg(n));
    // The target holds the split now (or may have changed): what a split would refuse of it is computed again.
    schedulePlan(0);
}

void SplitPage::appendLog(const QString& line)
{
    m_log->appendPlainText(QTime::currentTime().toString(QStringLiteral("HH:mm:ss ")) + line);
}

void SplitPage::setWrittenDir(const QString& dir)
{
    m_writtenDir = dir;
    m_openOutput->setEnabled(!dir.isEmpty());
    m_openOutput->setToolTip(dir.isEmpty() ? tr("Shows the written folder in the file manager once a split is done")
                                           : tr("Show %1 in the file manager").arg(QDir::toNativeSeparators(dir)));
}

QString SplitPage::logText() const { return m_log->toPlainText(); }

} // namespace tessera::ui
