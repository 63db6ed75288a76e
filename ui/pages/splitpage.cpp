// SPDX-License-Identifier: GPL-3.0-or-later
#include "splitpage.h"

#include "coreconvert.h"
#include "jobs/splitjob.h"
#include "models/splitplanmodel.h"
#include "widgets/folderfield.h"
#include "widgets/placementview.h"
#include "widgets/rankcolors.h"

#include "merge/merge_plan.h"
#include "formats/layout_registry.h"
#include "model/module_order.h"
#include "split/split_plan.h"
#include "split/split_preview.h"

#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTime>
#include <QVBoxLayout>

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

QString quoted(const QString& s) { return s.contains(QLatin1Char(' ')) ? QLatin1Char('"') + s + QLatin1Char('"') : s; }

} // namespace

SplitPage::SplitPage(QWidget* parent)
    : QWidget(parent)
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
    , m_fsdpRows(nullptr)
    , m_megatronRows(nullptr)
    , m_planSummary(new QLabel(this))
    , m_planView(new QTableView(this))
    , m_previewTensor(new QComboBox(this))
    , m_preview(new PlacementView(this))
    , m_previewHover(new QLabel(this))
    , m_command(new QLineEdit(this))
    , m_run(new QPushButton(tr("Split"), this))
    , m_cancel(new QPushButton(tr("Cancel"), this))
    , m_progress(new QProgressBar(this))
    , m_progressText(new QLabel(this))
    , m_log(new QPlainTextEdit(this))
{
    m_source->setWordWrap(true);
    m_source->setTextFormat(Qt::RichText);
    m_format->addItem(tr("FSDP2 rank files (verl)"), QStringLiteral("fsdp"));
    m_format->addItem(tr("PyTorch DCP (torchtitan)"), QStringLiteral("dcp"));
    m_format->addItem(tr("Megatron per-rank folders (verl)"), QStringLiteral("megatron"));
    m_format->addItem(tr("Megatron torch_dist (verl dist_ckpt)"), QStringLiteral("megatron-dist"));
    m_format->setToolTip(tr("The layout to write (tessera split --format)"));
    m_worldSize->setValue(2);
    m_worldSize->setToolTip(tr("Number of ranks (--world_size)"));
    m_mesh->setPlaceholderText(tr("e.g. 2x4 for HSDP (default: one dim of all ranks)"));
    m_mesh->setToolTip(tr("The device mesh (--mesh): Replicate() over the first dims, Shard(0) over the last"));
    m_meshNames->setPlaceholderText(tr("fsdp, or ddp,fsdp"));
    m_vocabDivisible->setValue(128);
    m_vocabDivisible->setToolTip(tr("make_vocab_size_divisible_by: the vocabulary is padded to a multiple of it × TP"));
    m_targetDir->setPlaceholderText(tr("a new or empty folder, e.g. …/global_step_0/actor"));

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
                     return m_checkpointRoot.isEmpty() ? QDir::homePath() : QFileInfo(m_checkpointRoot).absolutePath();
                 }));

    m_planSummary->setWordWrap(true);
    m_planSummary->setTextFormat(Qt::RichText);
    m_planSummary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_planView->setModel(m_planModel);
    m_planView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_planView->verticalHeader()->hide();
    m_planView->horizontalHeader()->setSectionResizeMode(SplitPlanModel::FileColumn, QHeaderView::Stretch);
    m_planView->horizontalHeader()->setStretchLastSection(false);
    m_planView->setWordWrap(false);
    m_planView->setMinimumHeight(m_planView->verticalHeader()->defaultSectionSize() * 4 + 4);

    m_previewTensor->setToolTip(tr("The tensor whose planned placement is drawn"));
    m_previewTensor->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_previewTensor->setMinimumContentsLength(30);
    m_previewHover->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_previewHover->setMinimumHeight(m_previewHover->fontMetrics().height() * 2 + 4);
    m_previewHover->setWordWrap(true);
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

    m_command->setReadOnly(true);
    m_command->setToolTip(tr("The same split from the command line"));
    m_cancel->setEnabled(false);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(2000);
    m_log->setMaximumHeight(m_log->fontMetrics().height() * 5 + 12);

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_progress, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addWidget(m_source);
    layout->addLayout(form);
    layout->addWidget(m_planSummary);
    layout->addWidget(split, 1);
    layout->addWidget(m_command);
    layout->addLayout(buttons);
    layout->addWidget(m_progressText);
    layout->addWidget(m_log);

    m_planDebounce.setSingleShot(true);
    m_planDebounce.setInterval(150);
    connect(&m_planDebounce, &QTimer::timeout, this, &SplitPage::updatePlan);
    connect(m_format, &QComboBox::currentIndexChanged, this, [this] {
        updateFormatRows();
        schedulePlan();
    });
    for (QSpinBox* box : { m_worldSize, m_tp, m_pp, m_vpp, m_ep, m_vocabDivisible, m_firstStageLayers, m_lastStageLayers })
        connect(box, &QSpinBox::valueChanged, this, &SplitPage::schedulePlan);
    for (QLineEdit* edit : { m_mesh, m_meshNames, m_targetDir })
        connect(edit, &QLineEdit::textChanged, this, &SplitPage::schedulePlan);
    connect(m_previewTensor, &QComboBox::currentIndexChanged, this, [this] {
        m_preview->setTensor(m_previewInfo, m_previewTensor->currentData().isValid() ? m_previewTensor->currentData().toInt() : -1);
        m_previewHover->clear();
    });
    connect(m_preview, &PlacementView::hoverChanged, this,
            [this](int, const QString& text) { m_previewHover->setText(text); });
    connect(m_run, &QPushButton::clicked, this, &SplitPage::run);
    connect(m_cancel, &QPushButton::clicked, this, &SplitPage::cancel);
    connect(m_job, &SplitJob::progress, this, [this](quint64 done, quint64 total, const QString& current) {
        m_progress->setValue(total ? int(1000.0 * double(done) / double(total)) : 0);
        m_progressText->setText(tr("%1 of %2 · %3").arg(bytesText(done), bytesText(total), current));
    });
    connect(m_job, &SplitJob::finished, this, &SplitPage::onFinished);
    updateFormatRows();
    updatePlan();
}

SplitPage::~SplitPage() = default;

QString SplitPage::formatName() const { return m_format->currentData().toString(); }

void SplitPage::setModel(CheckpointPtr input, std::shared_ptr<const tessera::MergePlan> model,
                         const QString& checkpointRoot, const QString& why)
{
    if (input == m_input && model == m_model && why == m_why)
        return;
    m_input = std::move(input);
    m_model = std::move(model);
    m_checkpointRoot = checkpointRoot;
    m_why = why;
    const QString previous = m_previewTensor->currentText();
    QSignalBlocker block(m_previewTensor);
    m_previewTensor->clear();
    if (m_model) {
        // Listed in the model's module order (embedding, layers in order, head), whatever the source's key order.
        std::vector<std::string> names;
        for (const auto& t : m_model->tensors)
            names.push_back(t.name);
        for (std::size_t i : tessera::moduleOrder(names))
            m_previewTensor->addItem(qs(names[i]), int(i));
    }
    if (const int again = m_previewTensor->findText(previous); again >= 0)
        m_previewTensor->setCurrentIndex(again);
    updatePlan();
}

void SplitPage::setFormat(const QString& name)
{
    const int i = m_format->findData(name);
    if (i >= 0)
        m_format->setCurrentIndex(i);
    updatePlan();
}

void SplitPage::setWorldSize(int ranks)
{
    m_worldSize->setValue(ranks);
    updatePlan();
}

void SplitPage::setMesh(const QString& mesh, const QString& dimNames)
{
    m_mesh->setText(mesh);
    m_meshNames->setText(dimNames);
    updatePlan();
}

void SplitPage::setMegatronSizes(int tp, int pp, int vpp, int ep)
{
    m_tp->setValue(tp);
    m_pp->setValue(pp);
    m_vpp->setValue(vpp);
    m_ep->setValue(ep);
    updatePlan();
}

void SplitPage::setTargetDir(const QString& dir)
{
    m_targetDir->setText(dir);
    updatePlan();
}

void SplitPage::previewTensor(int index)
{
    const int item = m_previewTensor->findData(index);
    if (item >= 0)
        m_previewTensor->setCurrentIndex(item);
}

void SplitPage::previewTensorNamed(const QString& name)
{
    if (const int item = m_previewTensor->findText(name); item >= 0)
        m_previewTensor->setCurrentIndex(item);
}

void SplitPage::schedulePlan() { m_planDebounce.start(); }

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

void SplitPage::updatePlan()
{
    m_planDebounce.stop();
    m_plan.reset();
    m_previewInfo.reset();
    const QString muted = palette().color(QPalette::PlaceholderText).name();
    auto showError = [&](const QString& message) {
        m_planText = message;
        m_planModel->setPlan(nullptr);
        m_preview->setTensor(nullptr, -1);
        m_planSummary->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                                   .arg(problemColor(palette()).name(),
                                        message.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"))));
        updateButtons();
    };
    if (!m_model) {
        m_source->setText(tr("<b>Split</b> writes the model the Merge page plans as a distributed checkpoint."));
        showError(m_why.isEmpty() ? tr("Open a checkpoint or a Hugging Face folder to split it.") : m_why);
        return;
    }
    m_source->setText(tr("<b>Split</b> %1 (%2 tensors, %3) as another layout. "
                         "<span style='color:%4'>The model is what a merge of it writes: Hugging Face names, with the "
                         "Merge page's dtype and mapping.</span>")
                          .arg(quoted(m_checkpointRoot).toHtmlEscaped())
                          .arg(m_model->tensors.size())
                          .arg(bytesText(m_model->totalBytes), muted));
    tessera::SplitOptions options;
    auto format = tessera::splitFormatFromName(formatName().toStdString());
    options.format = *format;
    if (options.format == tessera::SplitFormat::Fsdp || options.format == tessera::SplitFormat::Dcp) {
        options.worldSize = m_worldSize->value();
        if (const QString mesh = m_mesh->text().trimmed(); !mesh.isEmpty() && options.format == tessera::SplitFormat::Fsdp) {
            auto shape = tessera::parseMeshShape(mesh.toStdString());
            if (!shape) {
                showError(qs(shape.error().message));
                return;
            }
            options.mesh = *shape;
            options.worldSize = 0;
            std::int64_t ranks = 1;
            for (auto m : *shape)
                ranks *= m;
            if (ranks != m_worldSize->value()) {
                QSignalBlocker block(m_worldSize);
                m_worldSize->setValue(int(std::min<std::int64_t>(ranks, m_worldSize->maximum())));
            }
        }
        if (const QString names = m_meshNames->text().trimmed(); !names.isEmpty() && options.format == tessera::SplitFormat::Fsdp)
            options.meshDimNames = tessera::parseMeshDimNames(names.toStdString());
    } else {
        options.tp = m_tp->value();
        options.pp = m_pp->value();
        options.vpp = m_vpp->isEnabled() ? m_vpp->value() : 1;
        options.ep = m_ep->isEnabled() ? m_ep->value() : 1;
        for (auto [box, field] : { std::pair { m_firstStageLayers, &options.firstStageLayers },
                                   std::pair { m_lastStageLayers, &options.lastStageLayers } })
            if (box->value() >= 0)
                *field = box->value();
        options.vocabDivisibleBy = m_vocabDivisible->value();
    }
    options.moduleOrder = m_input && tessera::isHuggingFaceLayout(m_input->layout);
    if (options.format != tessera::SplitFormat::Dcp)
        options.runIteration = tessera::verlRunIteration(m_targetDir->text().trimmed().toStdString());
    auto plan = tessera::planSplit(*m_model, options);
    if (!plan) {
        showError(tr("The model cannot be laid out this way:\n\n%1").arg(qs(plan.error().message)));
        return;
    }
    m_plan = std::make_shared<const tessera::SplitPlan>(std::move(plan).value());
    m_planText = qs(tessera::splitPlanSummary(*m_plan, *m_model, false));
    m_planModel->setPlan(m_plan);
    m_previewInfo = std::make_shared<const tessera::CheckpointInfo>(tessera::splitPlacementPreview(*m_plan, *m_model));
    m_preview->setTensor(m_previewInfo, m_previewTensor->currentData().isValid() ? m_previewTensor->currentData().toInt() : -1);

    const auto& p = *m_plan;
    QStringList lines;
    lines << tr("<b>Writes</b> %1 as %2: %3 of tensors")
                 .arg(countText(qint64(p.files.size()), tr("rank file"), tr("rank files")), qs(p.layout).toHtmlEscaped(),
                      bytesText(p.totalBytes));
    lines << tr("<b>Disk</b> about %1 · <b>Memory</b> about %2 (twice the largest tensor, %3)")
                 .arg(bytesText(p.diskBytes), bytesText(p.memoryBytes), bytesText(p.largestTensorBytes));
    if (p.runIteration)
        lines << tr("latest_checkpointed_iteration.txt two folders up is set to %1").arg(*p.runIteration);
    for (const auto& w : p.warnings)
        lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, tr("note: %1").arg(qs(w).toHtmlEscaped()));
    m_planSummary->setText(lines.join(QStringLiteral("<br>")));
    updateButtons();
}

QString SplitPage::commandLine() const
{
    QStringList args { QStringLiteral("tessera"), QStringLiteral("split") };
    const bool hf = m_input && tessera::isHuggingFaceLayout(m_input->layout);
    args << (hf ? QStringLiteral("--hf_dir") : QStringLiteral("--local_dir")) << quoted(m_checkpointRoot);
    args << QStringLiteral("--target_dir") << quoted(m_targetDir->text().trimmed().isEmpty() ? QStringLiteral("OUT")
                                                                                            : m_targetDir->text().trimmed());
    args << QStringLiteral("--format") << formatName();
    if (formatName().startsWith(QLatin1String("megatron"))) {
        args << QStringLiteral("--tp") << QString::number(m_tp->value()) << QStringLiteral("--pp")
             << QString::number(m_pp->value());
        if (m_vpp->isEnabled() && m_vpp->value() > 1)
            args << QStringLiteral("--vpp") << QString::number(m_vpp->value());
        if (m_ep->isEnabled() && m_ep->value() > 1)
            args << QStringLiteral("--ep") << QString::number(m_ep->value());
        if (m_firstStageLayers->value() >= 0)
            args << QStringLiteral("--num_layers_in_first_pipeline_stage") << QString::number(m_firstStageLayers->value());
        if (m_lastStageLayers->value() >= 0)
            args << QStringLiteral("--num_layers_in_last_pipeline_stage") << QString::number(m_lastStageLayers->value());
        if (m_vocabDivisible->value() != 128)
            args << QStringLiteral("--make_vocab_size_divisible_by") << QString::number(m_vocabDivisible->value());
    } else if (formatName() == QLatin1String("fsdp") && !m_mesh->text().trimmed().isEmpty()) {
        args << QStringLiteral("--mesh") << m_mesh->text().trimmed();
        if (!m_meshNames->text().trimmed().isEmpty())
            args << QStringLiteral("--mesh_dim_names") << m_meshNames->text().trimmed();
    } else {
        args << QStringLiteral("--world_size") << QString::number(m_worldSize->value());
    }
    return args.join(QLatin1Char(' '));
}

bool SplitPage::canRun() const { return m_plan && !m_targetDir->text().trimmed().isEmpty() && !m_job->isRunning(); }

void SplitPage::updateButtons()
{
    const bool running = m_job->isRunning();
    m_run->setEnabled(canRun());
    m_run->setToolTip(!m_plan ? tr("No plan: see the plan box")
                      : m_targetDir->text().trimmed().isEmpty() ? tr("Choose an output folder first")
                                                                : tr("Write the checkpoint into the output folder"));
    m_cancel->setEnabled(running);
    for (QWidget* w : std::initializer_list<QWidget*> { m_format, m_fsdpRows, m_megatronRows, m_targetDir })
        w->setEnabled(!running);
    if (!running)
        updateFormatRows();
    m_command->setText(commandLine());
}

void SplitPage::run()
{
    if (!canRun())
        return;
    m_progress->setValue(0);
    m_progressText->setText(tr("Starting…"));
    appendLog(tr("Splitting into %1 as %2").arg(m_targetDir->text().trimmed(), qs(m_plan->layout)));
    m_job->start(m_input, m_model, m_plan, m_targetDir->text().trimmed());
    updateButtons();
}

void SplitPage::cancel() { m_job->cancel(); }

void SplitPage::onFinished(const SplitResult& result)
{
    if (result.ok) {
        m_progress->setValue(1000);
        m_progressText->setText(tr("Done"));
        appendLog(tr("Done: %1").arg(result.message));
    } else {
        m_progressText->setText(result.canceled ? tr("Canceled; nothing was written") : tr("Failed"));
        appendLog(result.canceled ? tr("Canceled; nothing was written") : tr("Failed: %1").arg(result.message));
    }
    for (const auto& n : result.notes)
        appendLog(tr("note: %1").arg(n));
    updateButtons();
}

void SplitPage::appendLog(const QString& line)
{
    m_log->appendPlainText(QTime::currentTime().toString(QStringLiteral("HH:mm:ss ")) + line);
}

QString SplitPage::logText() const { return m_log->toPlainText(); }

} // namespace tessera::ui
