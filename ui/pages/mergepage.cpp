// SPDX-License-Identifier: GPL-3.0-or-later
#include "mergepage.h"

#include "confirm.h"
#include "formats/scan.h"
#include "formats/layout_registry.h"
#include "mapping/lora.h"
#include "mapping/lora_config.h"

#include "io/byte_size.h"
#include "io/number_text.h"
#include "coreconvert.h"
#include "widgets/folderfield.h"
#include "jobs/comparejob.h"
#include "jobs/mappingjob.h"
#include "jobs/mergejob.h"
#include "mapping/megatron_mapping.h"
#include "merge/gguf_plan.h"
#include "merge/merge_plan.h"
#include "models/mergeplanmodel.h"
#include "models/roles.h"
#include "widgets/rankcolors.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QScrollArea>
#include <QSplitter>
#include <QStorageInfo>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

namespace tessera::ui {

namespace {
/// Free bytes where `path` would be created: the nearest folder of it that exists.
std::optional<quint64> freeBytesFor(const QString& path)
{
    QDir dir(QFileInfo(path).absoluteFilePath());
    while (!dir.exists() && !dir.isRoot())
        if (!dir.cdUp())
            break;
    const QStorageInfo storage(dir.absolutePath());
    if (!storage.isValid())
        return std::nullopt;
    return quint64(storage.bytesAvailable());
}

QString quoted(const QString& arg)
{
    if (!arg.isEmpty() && !arg.contains(QRegularExpression(QStringLiteral("[^A-Za-z0-9_./:=@+-]"))))
        return arg;
    QString escaped = arg;
    escaped.replace(QLatin1Char('\''), QStringLiteral("'\\''"));
    return QLatin1Char('\'') + escaped + QLatin1Char('\'');
}
} // namespace

MergePage::MergePage(QWidget* parent)
    : QWidget(parent)
    , m_job(new MergeJob(this))
    , m_compare(new CompareJob(this))
    , m_ownMapping(new MappingJob(this))
    , m_planModel(new MergePlanModel(this))
    , m_localDir(new QLineEdit(this))
    , m_targetDir(new QLineEdit(this))
    , m_backend(new QComboBox(this))
    , m_hfModelPath(new QLineEdit(this))
    , m_dtype(new QComboBox(this))
    , m_format(new QComboBox(this))
    , m_outtype(new QComboBox(this))
    , m_maxShardSize(new QLineEdit(QStringLiteral("5GB"), this))
    , m_threads(new QSpinBox(this))
    , m_paramMapping(new QLineEdit(this))
    , m_loadRules(new QPushButton(tr("Load…"), this))
    , m_ignoreMissing(new QLineEdit(this))
    , m_strict(new QCheckBox(tr("--strict"), this))
    , m_tie(new QCheckBox(tr("--tie-word-embedding"), this))
    , m_valueModel(new QCheckBox(tr("--is-value-model"), this))
    , m_verifyReplicas(new QCheckBox(tr("--verify-replicas"), this))
    , m_lora(new QComboBox(this))
    , m_loraAlpha(new QLineEdit(this))
    , m_baseModel(new QLineEdit(this))
    , m_reference(new QLineEdit(this))
    , m_atol(new QLineEdit(QStringLiteral("0"), this))
    , m_rtol(new QLineEdit(QStringLiteral("0"), this))
    , m_openInDiff(new QPushButton(tr("Open in Diff"), this))
    , m_command(new QLabel(this))
    , m_planSummary(new QLabel(this))
    , m_planView(new QTableView(this))
    , m_run(new QPushButton(tr("Merge"), this))
    , m_test(new QPushButton(tr("Test against reference…"), this))
    , m_cancel(new QPushButton(tr("Cancel"), this))
    , m_progress(new QProgressBar(this))
    , m_progressText(new QLabel(this))
    , m_current(new QLabel(this))
    , m_log(new QPlainTextEdit(this))
{
    m_backend->addItems({ QStringLiteral("auto"), QStringLiteral("fsdp"), QStringLiteral("dcp"), QStringLiteral("megatron") });
    m_backend->setEnabled(false);
    m_backend->setToolTip(tr("The workbench detects the layout; the command line below names it"));
    m_dtype->addItem(tr("keep"), QString());
    for (const auto* name : { "bf16", "fp16", "fp32" })
        m_dtype->addItem(QLatin1String(name), QLatin1String(name));
    m_format->addItem(tr("Hugging Face safetensors"), QStringLiteral("safetensors"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama"), QStringLiteral("gguf"));
    m_format->setToolTip(tr("safetensors: a Hugging Face folder. GGUF: one <name>-<type>.gguf file that llama.cpp, "
                            "Ollama and LM Studio load, with the tokenizer and chat template inside"));
    // The output types of formats/gguf_types.h, the default first (a reset goes back to index 0).
    m_outtype->addItem(QLatin1String(tessera::ggufOutTypeName(tessera::kDefaultGgufOutType)),
                       QLatin1String(tessera::ggufOutTypeName(tessera::kDefaultGgufOutType)));
    for (const auto& type : tessera::ggufOutTypes())
        if (type.id != tessera::kDefaultGgufOutType)
            m_outtype->addItem(QLatin1String(type.name), QLatin1String(type.name));
    m_outtype->setToolTip(tr("GGUF tensor type; norms and 1-D tensors stay f32, as llama.cpp's converter writes them"));
    m_outtype->setEnabled(false);
    m_lora->addItem(tr("fused model and adapter"), QStringLiteral("both"));
    m_lora->addItem(tr("fused model (W + B·A·α/r)"), QStringLiteral("fused"));
    m_lora->addItem(tr("adapter only (PEFT folder)"), QStringLiteral("adapter"));
    m_lora->setToolTip(tr("LoRA checkpoints: the base model with every adapted weight fused, the PEFT adapter in "
                          "lora_adapter/, or both"));
    m_loraAlpha->setPlaceholderText(tr("from lora_train_meta.json"));
    m_loraAlpha->setToolTip(tr("LoRA alpha, when the checkpoint does not record it; the scale is alpha / r"));
    m_baseModel->setPlaceholderText(tr("only for adapter-only (save_lora_only) checkpoints"));
    m_baseModel->setToolTip(tr("The base model's Hugging Face folder, to fuse an adapter-only checkpoint"));
    m_threads->setRange(0, 256);
    m_threads->setSpecialValueText(tr("one per core"));
    m_localDir->setReadOnly(true);
    m_targetDir->setPlaceholderText(tr("output folder for config, tokenizer and safetensors"));
    m_hfModelPath->setPlaceholderText(tr("found automatically (huggingface/ next to the shards)"));
    m_reference->setPlaceholderText(tr("a Hugging Face folder to compare with (tessera test --test_hf_dir)"));
    m_paramMapping->setReadOnly(true);
    m_paramMapping->setPlaceholderText(tr("built-in rules"));
    m_paramMapping->setToolTip(tr("The rules of the Mapping view's editor: the table there is what this merge writes"));
    m_loadRules->setToolTip(tr("Load a rules file (also shown in the Mapping view's editor)"));
    m_ignoreMissing->setPlaceholderText(tr("regex of parameters that may be missing"));
    m_strict->setChecked(true);
    m_strict->setToolTip(tr("Megatron: fail on any unmapped source tensor or missing parameter; off writes what maps "
                            "and warns (--no_strict)"));
    m_tie->setToolTip(tr("Treat lm_head.weight as tied to the embedding even if config.json does not say so"));
    m_valueModel->setToolTip(tr("Megatron: write output_layer as score.weight (also detected from a [1, hidden] "
                                "output layer)"));
    m_verifyReplicas->setToolTip(tr("Compare every replicated copy with the one written (reads more)"));
    m_command->setWordWrap(true);
    m_command->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    m_command->setFont(mono);
    m_planSummary->setWordWrap(true);
    m_planSummary->setTextFormat(Qt::RichText);
    m_planSummary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_planView->setModel(m_planModel);
    m_planView->verticalHeader()->hide();
    m_planView->verticalHeader()->setDefaultSectionSize(m_planView->fontMetrics().height() + 6);
    m_planView->horizontalHeader()->setStretchLastSection(true);
    m_planView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_planView->setAlternatingRowColors(true);
    m_planView->setTextElideMode(Qt::ElideMiddle);
    m_planView->setWordWrap(false);
    const QFontMetrics fm(font());
    m_planView->setColumnWidth(MergePlanModel::FileColumn, fm.horizontalAdvance(QStringLiteral("model-00001-of-00003.safetensors")) + 16);
    m_planView->setColumnWidth(MergePlanModel::TensorsColumn, fm.horizontalAdvance(QStringLiteral("Tensors")) + 20);
    m_planView->setColumnWidth(MergePlanModel::SizeColumn, fm.horizontalAdvance(QStringLiteral("123.45 MB")) + 20);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_log->setFont(mono);
    m_log->setPlaceholderText(tr("Merge and test output appears here."));
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_cancel->setEnabled(false);

    auto* options = new QGroupBox(tr("Options (tessera merge)"), this);
    auto* grid = new QGridLayout(options);
    grid->setColumnStretch(1, 1);
    grid->setColumnStretch(3, 1);
    int row = 0;
    auto wide = [&](const QString& label, QWidget* field) {
        grid->addWidget(new QLabel(label, options), row, 0);
        grid->addWidget(field, row++, 1, 1, 3);
    };
    auto pair = [&](const QString& l1, QWidget* f1, const QString& l2, QWidget* f2) {
        grid->addWidget(new QLabel(l1, options), row, 0);
        grid->addWidget(f1, row, 1);
        grid->addWidget(new QLabel(l2, options), row, 2);
        grid->addWidget(f2, row++, 3);
    };
    wide(tr("Checkpoint (--local_dir)"), m_localDir);
    // Output folders usually go beside the run they come from.
    wide(tr("Output (--target_dir)"), withBrowse(m_targetDir, options, [this] {
             return m_checkpoint ? QFileInfo(qs(m_checkpoint->root)).absolutePath() : QDir::homePath();
         }));
    wide(tr("Config (--hf_model_path)"), withBrowse(m_hfModelPath, options));
    pair(tr("Backend (--backend)"), m_backend, tr("DType (--dtype)"), m_dtype);
    pair(tr("Format (--format)"), m_format, tr("GGUF type (--outtype)"), m_outtype);
    pair(tr("Shard size (--max_shard_size)"), m_maxShardSize, tr("Threads (--threads)"), m_threads);
    pair(tr("Rules (--param_mapping)"), withButton(m_paramMapping, m_loadRules, options), tr("--ignore_missing_params"),
         m_ignoreMissing);
    auto* switches = new QHBoxLayout;
    for (auto* box : { m_strict, m_tie, m_valueModel, m_verifyReplicas })
        switches->addWidget(box);
    switches->addStretch(1);
    grid->addWidget(new QLabel(tr("Switches"), options), row, 0);
    grid->addLayout(switches, row++, 1, 1, 3);
    pair(tr("LoRA (--lora)"), m_lora, tr("--lora_alpha"), m_loraAlpha);
    wide(tr("Base model (--base_model)"), withBrowse(m_baseModel, options));
    m_atol->setToolTip(tr("Absolute tolerance of the test: |a − b| ≤ atol + rtol·|b| (0 and 0: bit for bit)"));
    m_rtol->setToolTip(m_atol->toolTip());
    // One row for the test: the reference (as wide as the folders above) and its tolerances, so the options stay
    // short on a small screen.
    auto* testRow = new QWidget(options);
    auto* testLayout = new QHBoxLayout(testRow);
    testLayout->setContentsMargins(0, 0, 0, 0);
    testLayout->addWidget(withBrowse(m_reference, options), 1);
    testLayout->addWidget(new QLabel(tr("--atol"), options));
    testLayout->addWidget(m_atol);
    testLayout->addWidget(new QLabel(tr("--rtol"), options));
    testLayout->addWidget(m_rtol);
    const int tolerance = fontMetrics().horizontalAdvance(QStringLiteral("1e-05")) + 24;
    m_atol->setMaximumWidth(tolerance);
    m_rtol->setMaximumWidth(tolerance);
    wide(tr("Reference (tessera test)"), testRow);
    grid->addWidget(m_command, row++, 0, 1, 4);

    auto* planBox = new QGroupBox(tr("Plan (dry run)"), this);
    auto* planLayout = new QVBoxLayout(planBox);
    planLayout->addWidget(m_planSummary);
    planLayout->addWidget(m_planView, 1);

    auto* runBox = new QGroupBox(tr("Run"), this);
    auto* runLayout = new QVBoxLayout(runBox);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_test);
    buttons->addWidget(m_openInDiff);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_progress, 1);
    runLayout->addLayout(buttons);
    runLayout->addWidget(m_progressText);
    runLayout->addWidget(m_current);
    m_current->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_current->setForegroundRole(QPalette::PlaceholderText);

    auto* logBox = new QGroupBox(tr("Log"), this);
    auto* logLayout = new QVBoxLayout(logBox);
    logLayout->addWidget(m_log);

    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(planBox);
    splitter->addWidget(logBox);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 1);
    splitter->setChildrenCollapsible(false);
    // The log's size hint would otherwise take half the height before anything is logged.
    splitter->setSizes({ 300, 110 });

    // Options, plan and log scroll in a short window; Merge, Test and the progress bar stay in sight below them.
    auto* body = new QWidget(this);
    auto* bodyLayout = new QVBoxLayout(body);
    bodyLayout->setContentsMargins(0, 0, 0, 0);
    bodyLayout->addWidget(options);
    bodyLayout->addWidget(splitter, 1);
    auto* bodyScroll = new QScrollArea(this);
    bodyScroll->setWidget(body);
    bodyScroll->setWidgetResizable(true);
    bodyScroll->setFrameShape(QFrame::NoFrame);
    bodyScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addWidget(bodyScroll, 1);
    layout->addWidget(runBox);

    // Typing a regex or a folder is debounced like the filter boxes; the switches apply at once.
    m_mappingDebounce.setSingleShot(true);
    m_mappingDebounce.setInterval(400);
    connect(&m_mappingDebounce, &QTimer::timeout, this, &MergePage::pushMappingSettings);
    connect(m_ignoreMissing, &QLineEdit::textChanged, this, [this] { m_mappingDebounce.start(); });
    connect(m_ignoreMissing, &QLineEdit::returnPressed, this, &MergePage::pushMappingSettings);
    connect(m_hfModelPath, &QLineEdit::textChanged, this, [this] {
        m_mappingDebounce.start();
        updatePlan();
    });
    for (auto* box : { m_strict, m_tie, m_valueModel })
        connect(box, &QCheckBox::toggled, this, &MergePage::pushMappingSettings);
    connect(m_tie, &QCheckBox::toggled, this, &MergePage::updatePlan);
    connect(m_verifyReplicas, &QCheckBox::toggled, this, &MergePage::updatePlan);
    connect(m_loadRules, &QPushButton::clicked, this, &MergePage::loadRules);
    connect(m_dtype, &QComboBox::currentIndexChanged, this, &MergePage::updatePlan);
    connect(m_format, &QComboBox::currentIndexChanged, this, [this] {
        m_outtype->setEnabled(isGguf());
        m_dtype->setEnabled(!isGguf());
        updatePlan();
    });
    connect(m_outtype, &QComboBox::currentIndexChanged, this, &MergePage::updatePlan);
    connect(m_lora, &QComboBox::currentIndexChanged, this, &MergePage::updatePlan);
    connect(m_loraAlpha, &QLineEdit::textChanged, this, &MergePage::updatePlan);
    m_baseDebounce.setSingleShot(true);
    m_baseDebounce.setInterval(400);
    connect(&m_baseDebounce, &QTimer::timeout, this, &MergePage::updatePlan);
    connect(m_baseModel, &QLineEdit::textChanged, this, [this] { m_baseDebounce.start(); });
    connect(m_maxShardSize, &QLineEdit::textChanged, this, &MergePage::updatePlan);
    connect(m_threads, &QSpinBox::valueChanged, this, &MergePage::updatePlan);
    connect(m_targetDir, &QLineEdit::textChanged, this, &MergePage::updatePlan);
    connect(m_reference, &QLineEdit::textChanged, this, &MergePage::updateButtons);
    connect(m_run, &QPushButton::clicked, this, &MergePage::run);
    connect(m_test, &QPushButton::clicked, this, &MergePage::runTest);
    m_openInDiff->setEnabled(false);
    m_openInDiff->setToolTip(tr("Compare this checkpoint with the reference tensor by tensor in the Diff view"));
    // The diff it offers is of the reference just tested.
    connect(m_reference, &QLineEdit::textChanged, m_openInDiff, [this] { m_openInDiff->setEnabled(false); });
    connect(m_openInDiff, &QPushButton::clicked, this, [this] {
        Q_EMIT openInDiffRequested(m_reference->text().trimmed(), m_atol->text().toDouble(), m_rtol->text().toDouble());
    });
    connect(m_cancel, &QPushButton::clicked, this, &MergePage::cancel);
    connect(m_job, &MergeJob::progress, this, [this](const MergeStatus& s) {
        showProgress(int(s.tensorsDone), int(s.tensorsTotal), s.bytesDone, s.bytesTotal, s.currentTensor);
    });
    connect(m_job, &MergeJob::finished, this, &MergePage::onFinished);
    connect(m_compare, &CompareJob::progress, this, [this](quint64 done, quint64 total, const QString& current) {
        m_meter.sample(done);
        m_progress->setValue(total == 0 ? 0 : int(done * 1000 / total));
        m_progressText->setText(tr("Comparing: %1 / %2 · %3").arg(bytesText(done), bytesText(total), m_meter.text()));
        m_current->setText(current);
    });
    connect(m_compare, &CompareJob::finished, this, &MergePage::onCompareFinished);
    setMappingJob(m_ownMapping);
}

MergePage::~MergePage() = default;

void MergePage::setMappingJob(MappingJob* job)
{
    if (!job)
        job = m_ownMapping;
    if (m_mapping == job)
        return;
    if (m_mapping)
        disconnect(m_mapping, nullptr, this, nullptr);
    m_mapping = job;
    connect(m_mapping, &MappingJob::finished, this, &MergePage::onMappingFinished);
    connect(m_mapping, &MappingJob::started, this, &MergePage::updatePlan);
    connect(m_mapping, &MappingJob::settingsChanged, this, &MergePage::syncMappingWidgets);
    if (m_checkpoint)
        m_mapping->setCheckpoint(m_checkpoint);
    syncMappingWidgets();
    updatePlan();
}

void MergePage::setCheckpoint(CheckpointPtr checkpoint)
{
    // Another checkpoint: the output folder, reference, dtype, LoRA options and log of the last one do not carry
    // over, so one click can never overwrite the previous merge with this checkpoint's weights.
    const bool another = m_checkpoint && checkpoint && checkpoint->root != m_checkpoint->root;
    if (another && !m_job->isRunning() && !m_compare->isRunning()) {
        const QSignalBlocker b1(m_targetDir), b2(m_reference), b3(m_dtype), b4(m_lora), b5(m_loraAlpha), b6(m_baseModel),
            b7(m_hfModelPath), b8(m_format), b9(m_outtype);
        m_format->setCurrentIndex(0);
        m_outtype->setCurrentIndex(0);
        m_outtype->setEnabled(false);
        m_dtype->setEnabled(true);
        m_targetDir->clear();
        m_reference->clear();
        m_hfModelPath->clear();
        m_dtype->setCurrentIndex(0);
        m_lora->setCurrentIndex(0);
        m_loraAlpha->clear();
        m_baseModel->clear();
        m_baseScan.reset();
        m_log->clear();
        m_progress->setValue(0);
        m_current->clear();
        m_openInDiff->setEnabled(false); // the test it offers was of the other checkpoint
    }
    m_checkpoint = std::move(checkpoint);
    m_localDir->setText(m_checkpoint ? qs(m_checkpoint->root) : QString());
    if (m_checkpoint)
        m_hfModelPath->setPlaceholderText(m_checkpoint->hfConfigDir.empty() ? tr("not found: give --hf_model_path")
                                                                             : qs(m_checkpoint->hfConfigDir));
    const bool megatron = isMegatron();
    // The backend the command line accepts for this layout (a Hugging Face folder or a GGUF file only with auto).
    const auto family = m_checkpoint ? tessera::layoutFamily(m_checkpoint->layout) : tessera::LayoutFamily::Unknown;
    const bool fsdp = family == tessera::LayoutFamily::TorchSave;
    m_backend->setCurrentText(megatron ? QStringLiteral("megatron")
                              : family == tessera::LayoutFamily::Dcp ? QStringLiteral("dcp")
                              : fsdp ? QStringLiteral("fsdp")
                                     : QStringLiteral("auto"));
    for (QWidget* w : std::initializer_list<QWidget*> { m_paramMapping, m_loadRules, m_ignoreMissing, m_strict, m_valueModel })
        w->setEnabled(megatron);
    const bool lora = m_checkpoint && tessera::hasLoraTensors(*m_checkpoint);
    for (QWidget* w : std::initializer_list<QWidget*> { m_lora, m_loraAlpha, m_baseModel })
        w->setEnabled(lora);
    m_mapping->setCheckpoint(m_checkpoint);
    updatePlan();
}

bool MergePage::isGguf() const { return m_format->currentData().toString() == QLatin1String("gguf"); }

bool MergePage::planGguf(const CheckpointPtr& input, const tessera::MergeOptions& options)
{
    if (m_loraMerge) {
        showPlanError(tr("GGUF export of a LoRA checkpoint: merge its fused model as safetensors first, then open that "
                         "folder and export it as GGUF."));
        return false;
    }
    tessera::GgufOptions gguf;
    gguf.outType = tessera::ggufOutTypeFromName(m_outtype->currentData().toString().toStdString());
    gguf.hfConfigDir = options.hfConfigDir;
    gguf.forceTieWordEmbeddings = options.forceTieWordEmbeddings;
    gguf.threads = options.threads;
    auto plan = tessera::planGgufMerge(*input, gguf);
    if (!plan) {
        showPlanError(tr("This checkpoint cannot be written as GGUF:\n\n%1").arg(qs(plan.error().message)));
        return false;
    }
    m_ggufPlan = std::make_shared<const tessera::GgufPlan>(std::move(plan).value());
    return true;
}

bool MergePage::isMegatron() const { return m_checkpoint && tessera::isMegatronLayout(m_checkpoint->layout); }

void MergePage::setReferenceDir(const QString& dir) { m_reference->setText(dir); }

void MergePage::setTargetDir(const QString& dir) { m_targetDir->setText(dir); }

MergePanelOptions MergePage::options() const
{
    MergePanelOptions o;
    o.localDir = m_localDir->text();
    o.targetDir = m_targetDir->text();
    o.backend = m_backend->currentText();
    o.hfModelPath = m_hfModelPath->text();
    o.dtype = m_dtype->currentData().toString();
    o.maxShardSize = m_maxShardSize->text();
    o.threads = m_threads->value();
    o.tieWordEmbedding = m_tie->isChecked();
    o.isValueModel = m_valueModel->isChecked();
    o.verifyReplicas = m_verifyReplicas->isChecked();
    o.strict = m_strict->isChecked();
    o.paramMapping = m_mapping->settings().hasRules() ? m_mapping->settings().rulesName : QString();
    o.ignoreMissingParams = m_ignoreMissing->text();
    o.lora = m_lora->currentData().toString();
    o.loraAlpha = m_loraAlpha->text().trimmed();
    o.baseModel = m_baseModel->text().trimmed();
    o.format = m_format->currentData().toString();
    o.outtype = m_outtype->currentData().toString();
    return o;
}

QString MergePage::commandLine() const
{
    const MergePanelOptions o = options();
    QStringList args { QStringLiteral("tessera"), QStringLiteral("merge"), QStringLiteral("--backend"), o.backend,
                       QStringLiteral("--local_dir"), quoted(o.localDir), QStringLiteral("--target_dir"),
                       o.targetDir.trimmed().isEmpty() ? QStringLiteral("DIR") : quoted(o.targetDir.trimmed()) };
    auto add = [&](const QString& flag, const QString& value) {
        if (!value.isEmpty())
            args << flag << quoted(value);
    };
    // The scan's root may be a subfolder (actor/model) where the CLI would not find config.json on its own.
    add(QStringLiteral("--hf_model_path"),
        !o.hfModelPath.isEmpty() || !m_checkpoint ? o.hfModelPath : qs(m_checkpoint->hfConfigDir));
    if (isGguf())
        args << QStringLiteral("--format") << QStringLiteral("gguf") << QStringLiteral("--outtype") << o.outtype;
    else
        add(QStringLiteral("--dtype"), o.dtype);
    if (!isGguf() && o.maxShardSize != QLatin1String("5GB"))
        add(QStringLiteral("--max_shard_size"), o.maxShardSize);
    if (o.threads > 0)
        add(QStringLiteral("--threads"), QString::number(o.threads));
    if (isMegatron()) {
        if (m_mapping->settings().hasRules())
            args << QStringLiteral("--param_mapping")
                 << (o.paramMapping.isEmpty() ? tr("<save the editor's rules first>") : quoted(o.paramMapping));
        add(QStringLiteral("--ignore_missing_params"), o.ignoreMissingParams);
        if (!o.strict)
            args << QStringLiteral("--no_strict");
        if (o.isValueModel)
            args << QStringLiteral("--is_value_model");
    }
    if (m_loraMerge) {
        if (o.lora != QLatin1String("both"))
            add(QStringLiteral("--lora"), o.lora);
        add(QStringLiteral("--lora_alpha"), o.loraAlpha);
        add(QStringLiteral("--base_model"), o.baseModel);
    }
    if (o.tieWordEmbedding)
        args << QStringLiteral("--tie_word_embedding");
    if (o.verifyReplicas && !isGguf())
        args << QStringLiteral("--verify_replicas");
    return args.join(QLatin1Char(' '));
}

void MergePage::pushMappingSettings()
{
    m_mappingDebounce.stop();
    MappingSettings settings = m_mapping->settings();
    settings.hfConfigDir = m_hfModelPath->text().trimmed();
    settings.ignoreMissing = m_ignoreMissing->text();
    settings.strict = m_strict->isChecked();
    settings.valueModel = m_valueModel->isChecked();
    settings.tieWordEmbeddings = m_tie->isChecked();
    m_mapping->setSettings(settings);
    updateButtons();
}

void MergePage::syncMappingWidgets()
{
    const MappingSettings& s = m_mapping->settings();
    const QSignalBlocker b1(m_strict), b2(m_tie), b3(m_valueModel);
    m_strict->setChecked(s.strict);
    m_tie->setChecked(s.tieWordEmbeddings);
    m_valueModel->setChecked(s.valueModel);
    if (!m_mappingDebounce.isActive() && m_ignoreMissing->text() != s.ignoreMissing) {
        const QSignalBlocker b4(m_ignoreMissing);
        m_ignoreMissing->setText(s.ignoreMissing);
    }
    m_paramMapping->setText(!s.hasRules() ? QString()
                                : s.rulesName.isEmpty() ? tr("unsaved rules in the Mapping view's editor")
                                                        : QDir::toNativeSeparators(s.rulesName));
    updateButtons();
}

void MergePage::loadRules()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Load Mapping Rules"), m_mapping->settings().rulesName,
                                                      tr("Mapping rules (*.json);;All files (*)"));
    if (path.isEmpty())
        return;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        appendLog(tr("Cannot read %1: %2").arg(path, file.errorString()));
        return;
    }
    MappingSettings settings = m_mapping->settings();
    settings.rulesText = QString::fromUtf8(file.readAll());
    settings.rulesName = QFileInfo(path).absoluteFilePath();
    m_mapping->setSettings(settings);
}

void MergePage::onMappingFinished(const MappingOutcome&)
{
    if (isMegatron())
        updatePlan();
}

void MergePage::showPlanError(const QString& message)
{
    m_planText = message;
    m_planModel->setPlan(nullptr);
    m_planView->hide();
    m_planSummary->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                               .arg(problemColor(palette()).name(), message.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"))));
    updateButtons();
}

bool MergePage::planLora(const CheckpointPtr& input, const tessera::MergeOptions& options)
{
    tessera::LoraSettings settings;
    const QString alphaText = m_loraAlpha->text().trimmed();
    if (!alphaText.isEmpty()) {
        // Read as the command line reads it, so the command this page shows runs as the page did.
        const auto alpha = tessera::parseDecimalNumber(alphaText.toStdString());
        const std::string why = alpha ? tessera::loraAlphaProblem(*alpha) : std::string("must be a positive number");
        if (!why.empty()) {
            showPlanError(tr("--lora_alpha %1 (got '%2')").arg(qs(why), alphaText));
            return false;
        }
        settings.alpha = *alpha;
    }
    std::optional<tessera::CheckpointInfo> base;
    if (const QString baseDir = m_baseModel->text().trimmed(); !baseDir.isEmpty()) {
        // Headers only, and once per path: the plan is redone whenever any option changes.
        if (!m_baseScan || baseDir != m_basePath) {
            m_basePath = baseDir;
            m_baseScan = tessera::scanCheckpoint(baseDir.toStdString());
        }
        if (!*m_baseScan) {
            showPlanError(tr("The base model cannot be read:\n\n%1").arg(qs(m_baseScan->error().message)));
            return false;
        }
        base = m_baseScan->value();
    }
    auto read = tessera::readLoraCheckpoint(*input, settings, base ? &*base : nullptr);
    if (!read) {
        showPlanError(tr("This LoRA checkpoint cannot be merged as it is:\n\n%1").arg(qs(read.error().message)));
        return false;
    }
    auto what = tessera::loraOutputFromName(m_lora->currentData().toString().toStdString());
    auto plans = what ? tessera::planLoraMerge(*read, options, *what) : tessera::Result<tessera::LoraMergePlans>(what.error());
    if (!plans) {
        showPlanError(tr("This LoRA checkpoint cannot be merged as it is:\n\n%1").arg(qs(plans.error().message)));
        return false;
    }
    auto merge = std::make_shared<LoraMerge>(LoraMerge { std::move(*read), std::move(*plans) });
    // The page shows and tests the primary model (the fused one, else the adapter); the job writes them all.
    m_mergePlan = std::shared_ptr<const tessera::MergePlan>(merge, &merge->plans.primary());
    m_mergeInput = CheckpointPtr(merge, &merge->plans.primaryInfo(merge->checkpoint));
    m_loraMerge = std::move(merge);
    return true;
}

void MergePage::updatePlan()
{
    m_mergePlan.reset();
    m_mergeInput.reset();
    m_loraMerge.reset();
    m_ggufPlan.reset();
    if (!m_checkpoint) {
        showPlanError(tr("Open a checkpoint to see what a merge would write."));
        m_planSummary->setText(m_planText);
        return;
    }
    tessera::MergeOptions options;
    const auto limit = tessera::parseByteSize(m_maxShardSize->text().toStdString());
    if (!limit) {
        showPlanError(tr("--max_shard_size: %1").arg(qs(limit.error().message)));
        return;
    }
    CheckpointPtr input = m_checkpoint;
    if (isMegatron()) {
        // Megatron names go through the same mapping the Mapping view shows (and `tessera merge` runs).
        const MappingOutcome& outcome = m_mapping->outcome();
        if (m_mapping->isBusy() || outcome.source != m_checkpoint) {
            m_planText = tr("Mapping Megatron names to Hugging Face names…");
            m_planModel->setPlan(nullptr);
            m_planSummary->setText(m_planText);
            updateButtons();
            return;
        }
        if (!outcome.mapped) {
            showPlanError(tr("The Megatron names cannot be mapped:\n\n%1").arg(outcome.error));
            return;
        }
        input = outcome.mapped;
    }
    options.maxShardSize = *limit;
    const QString dtype = m_dtype->currentData().toString();
    if (!dtype.isEmpty())
        options.dtype = tessera::dtypeFromUserName(dtype.toStdString());
    options.hfConfigDir = m_hfModelPath->text().trimmed().toStdString();
    options.forceTieWordEmbeddings = m_tie->isChecked();
    options.threads = m_threads->value() > 0 ? unsigned(m_threads->value()) : std::max(1u, std::thread::hardware_concurrency());
    // The same plan `tessera merge --dry-run` prints; computed from the scan alone, so it is cheap to redo.
    if (tessera::hasLoraTensors(*input)) {
        if (!planLora(input, options))
            return;
    } else {
        auto plan = tessera::planMerge(*input, options);
        if (!plan) {
            showPlanError(tr("This checkpoint cannot be merged as it is:\n\n%1").arg(qs(plan.error().message)));
            return;
        }
        m_mergePlan = std::make_shared<const tessera::MergePlan>(std::move(plan).value());
        m_mergeInput = input;
    }
    if (isGguf() && !planGguf(input, options))
        return;
    m_planText = m_ggufPlan ? qs(tessera::ggufPlanSummary(*m_ggufPlan, true))
                            : qs(tessera::mergePlanSummary(*m_mergePlan, *m_mergeInput, true));
    m_planModel->setPlan(m_mergePlan);
    m_planView->show();

    const auto& p = *m_mergePlan;
    const QString target = m_targetDir->text().trimmed();
    const auto freeBytes = freeBytesFor(target.isEmpty() ? qs(m_checkpoint->root) : target);
    const QString muted = palette().color(QPalette::PlaceholderText).name();
    QStringList lines;
    if (m_ggufPlan) {
        const auto& g = *m_ggufPlan;
        lines << tr("<b>Writes %1</b> as GGUF (%2, %3): %4")
                     .arg(countText(qint64(g.tensors.size()), tr("tensor"), tr("tensors")), qs(g.architecture),
                          QLatin1String(tessera::ggufOutTypeName(g.outType)), qs(g.fileName).toHtmlEscaped())
              << tr("<b>Tokenizer</b> %1").arg(qs(g.tokenizerSummary).toHtmlEscaped())
              << tr("<b>Disk</b> %1 · <b>Memory</b> about %2 at peak (largest tensor %3)")
                     .arg(bytesText(g.fileSize), bytesText(g.memoryBytes), bytesText(g.largestTensorBytes));
        for (const auto& d : g.dropped)
            lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, tr("not written: %1").arg(qs(d).toHtmlEscaped()));
        for (const auto& w : g.warnings)
            lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, tr("warning: %1").arg(qs(w).toHtmlEscaped()));
        m_planSummary->setText(lines.join(QStringLiteral("<br>")));
        updateButtons();
        return;
    }
    lines << tr("<b>Writes %1</b> in %2: %3 of tensors")
                 .arg(countText(qint64(p.tensors.size()), tr("tensor"), tr("tensors")),
                      countText(qint64(p.files.size()), tr("safetensors file"), tr("safetensors files")),
                      bytesText(p.totalBytes));
    std::size_t direct = 0, gather = 0, sum = 0, replicas = 0;
    for (const auto& t : p.tensors) {
        if (!t.delta)
            (t.mode == tessera::CopyMode::Direct ? direct : t.mode == tessera::CopyMode::Gather ? gather : sum) += 1;
        replicas += t.replicas.size();
    }
    lines << tr("<b>Copy</b> %1 streamed straight into place, %2 gathered, %3 summed (Partial)%4 · %5 %6")
                 .arg(direct)
                 .arg(gather)
                 .arg(sum)
                 .arg(p.fusedTensors ? tr(", %1 fused with their LoRA update").arg(p.fusedTensors) : QString())
                 .arg(countText(qint64(replicas), tr("replica piece"), tr("replica pieces")),
                      m_verifyReplicas->isChecked() ? tr("verified against the written copy") : tr("skipped"));
    QString disk = tr("<b>Disk</b> %1 in total (weights, index, config and tokenizer)").arg(bytesText(p.diskBytes));
    if (freeBytes) {
        const bool enough = *freeBytes > p.diskBytes;
        disk += enough ? tr(" · %1 free %2").arg(bytesText(*freeBytes), target.isEmpty() ? tr("on the checkpoint's disk") : tr("at the target"))
                       : QStringLiteral(" · <span style='color:%1'>%2</span>")
                             .arg(problemColor(palette()).name(), tr("only %1 free at the target").arg(bytesText(*freeBytes)));
    }
    lines << disk;
    lines << tr("<b>Memory</b> about %1 at peak with %2 (largest tensor %3, largest gather/sum buffer %4)")
                 .arg(bytesText(p.memoryBytes), countText(options.threads, tr("thread"), tr("threads")),
                      bytesText(p.largestTensorBytes), bytesText(p.bufferBytes));
    if (p.configDtype)
        lines << tr("config.json torch_dtype becomes %1").arg(dtypeText(*p.configDtype));
    if (p.configDequantized)
        lines << tr("config.json loses its quantization_config: the weights are written unquantized");
    if (m_loraMerge) {
        const auto& c = m_loraMerge->checkpoint.config;
        const auto& plans = m_loraMerge->plans;
        lines << tr("<b>LoRA</b> r = %1, alpha = %2 (%3)%4: %5")
                     .arg(c.r)
                     .arg(c.alpha)
                     .arg(qs(c.alphaSource).toHtmlEscaped(), c.useRslora ? tr(", rsLoRA") : QString(),
                          plans.fused ? tr("%1 weights fused with W + (B·A)·scale").arg(plans.fused->fusedTensors)
                                      : tr("no fused model"));
        if (plans.adapter)
            lines << tr("<b>Adapter</b> %1 in %2/ (adapter_model.safetensors, adapter_config.json)")
                         .arg(countText(qint64(plans.adapter->tensors.size()), tr("tensor"), tr("tensors")),
                              qs(plans.adapterFolder));
        for (const auto& n : plans.notes)
            lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, qs(n).toHtmlEscaped());
    }
    for (const auto& d : p.dropped)
        lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, tr("not written: %1").arg(qs(d).toHtmlEscaped()));
    for (const auto& w : p.warnings)
        lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, tr("warning: %1").arg(qs(w).toHtmlEscaped()));
    if (isMegatron())
        for (const auto& w : m_mapping->outcome().result->warnings)
            lines << QStringLiteral("<span style='color:%1'>%2</span>").arg(muted, tr("mapping: %1").arg(qs(w).toHtmlEscaped()));
    m_planSummary->setText(lines.join(QStringLiteral("<br>")));
    updateButtons();
}

bool MergePage::canRun() const
{
    return m_mergePlan && !m_targetDir->text().trimmed().isEmpty() && !m_job->isRunning() && !m_compare->isRunning()
        && !m_mappingDebounce.isActive();
}

bool MergePage::canTest() const
{
    return m_mergePlan && !m_job->isRunning() && !m_compare->isRunning() && !m_mappingDebounce.isActive();
}

void MergePage::updateButtons()
{
    if (m_mergePlan != m_announcedPlan) {
        m_announcedPlan = m_mergePlan;
        Q_EMIT planChanged();
    }
    const bool running = m_job->isRunning() || m_compare->isRunning();
    m_run->setEnabled(canRun());
    m_run->setToolTip(!m_mergePlan ? tr("No plan: see the plan box")
                          : m_targetDir->text().trimmed().isEmpty() ? tr("Choose an output folder first")
                                                                    : tr("Merge into the output folder"));
    m_test->setEnabled(canTest());
    m_test->setToolTip(tr("Merge in memory and compare every tensor with a Hugging Face folder (tessera test); "
                          "writes nothing"));
    m_cancel->setEnabled(running);
    m_command->setText(commandLine());
    if (!running && m_progress->value() == 0)
        m_progressText->setText(!m_mergePlan ? tr("Not running: no plan.")
                                    : m_targetDir->text().trimmed().isEmpty()
                                    ? tr("Not running. Choose an output folder to merge; a test against a reference "
                                         "writes nothing.")
                                    : tr("Ready to merge."));
}

void MergePage::run()
{
    if (!canRun())
        return;
    // The command line refuses to mix models; here the user may replace one, but is asked first.
    const QDir target(m_targetDir->text().trimmed());
    QStringList existing;
    const auto names = m_ggufPlan ? std::vector<std::string> { m_ggufPlan->fileName } : m_mergePlan->outputFileNames();
    for (const auto& name : names)
        if (target.exists(qs(name)))
            existing << qs(name);
    if (!existing.isEmpty()
        && !confirm(this, tr("Replace the model?"),
                    tr("%1 already holds %2. Replace them with the merge of %3?\n\nOther files in the folder are kept.")
                        .arg(QDir::toNativeSeparators(target.absolutePath()),
                             existing.size() > 3 ? existing.mid(0, 3).join(QStringLiteral(", ")) + QStringLiteral(", …")
                                                 : existing.join(QStringLiteral(", ")),
                             qs(m_checkpoint->root)))) {
        m_log->appendPlainText(tr("Not merged: %1 was left as it is.").arg(target.absolutePath()));
        return;
    }
    if (m_ggufPlan) {
        m_log->appendPlainText(tr("Exporting %1 → %2 as GGUF").arg(qs(m_checkpoint->root), target.filePath(qs(m_ggufPlan->fileName))));
        std::uint64_t total = m_ggufPlan->merge.totalBytes;
        for (const auto& q : m_ggufPlan->quantized)
            total += q.bytes;
        m_meter.start(total);
        m_job->startGguf(m_ggufPlan, m_targetDir->text().trimmed(), unsigned(m_threads->value()));
        showProgress(0, int(m_ggufPlan->merge.tensors.size() + m_ggufPlan->quantized.size()), 0, total, {});
        updateButtons();
        return;
    }
    m_log->appendPlainText(tr("Merging %1 → %2").arg(qs(m_checkpoint->root), m_targetDir->text()));
    m_meter.start(m_mergePlan->totalBytes);
    m_job->start(m_mergeInput, m_mergePlan, m_targetDir->text().trimmed(), unsigned(m_threads->value()),
                 m_verifyReplicas->isChecked(), m_loraMerge);
    showProgress(0, int(m_mergePlan->tensors.size()), 0, m_mergePlan->totalBytes, {});
    updateButtons();
}

void MergePage::runTest()
{
    if (!canTest())
        return;
    if (m_reference->text().trimmed().isEmpty()) {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Reference Hugging Face Folder"),
                                                              qs(m_checkpoint->root));
        if (dir.isEmpty())
            return;
        m_reference->setText(dir);
    }
    std::set<std::string> ignore;
    if (m_valueModel->isChecked() || m_tie->isChecked())
        ignore.insert("lm_head.weight"); // as verl's test and `tessera test` do
    m_log->appendPlainText(tr("Testing %1 against %2").arg(qs(m_checkpoint->root), m_reference->text().trimmed()));
    m_meter.start(m_mergePlan->totalBytes);
    // Read as the command line reads them (parseDecimalNumber: finite, no hex or "inf").
    const auto atolValue = tessera::parseDecimalNumber(m_atol->text().trimmed().toStdString());
    const auto rtolValue = tessera::parseDecimalNumber(m_rtol->text().trimmed().toStdString());
    if (!atolValue || !rtolValue || !(*atolValue >= 0) || !(*rtolValue >= 0)) {
        m_log->appendPlainText(tr("Not tested: atol and rtol must be non-negative numbers (e.g. 0, 1e-5)."));
        return;
    }
    const double atol = *atolValue, rtol = *rtolValue;
    m_compare->start(m_mergeInput, m_mergePlan, m_reference->text().trimmed(), unsigned(m_threads->value()), ignore,
                     atol, rtol);
    m_progress->setValue(0);
    m_progressText->setText(tr("Comparing…"));
    updateButtons();
}

void MergePage::cancel()
{
    m_job->cancel();
    m_compare->cancel();
}

void MergePage::onFinished(const MergeResult& result)
{
    for (const auto& warning : result.warnings)
        m_log->appendPlainText(tr("warning: %1").arg(warning));
    if (result.ok) {
        m_progress->setValue(1000);
        m_progressText->setText(tr("Done: %1").arg(result.message));
        m_log->appendPlainText(tr("Done: %1").arg(result.message));
    } else if (result.canceled) {
        // Said once, and the bar starts over: nothing of the merge is left.
        m_progress->setValue(0);
        m_progressText->setText(tr("Canceled; nothing was written."));
        m_log->appendPlainText(tr("Canceled; nothing was written."));
    } else {
        m_progressText->setText(tr("Failed."));
        m_log->appendPlainText(tr("Error: %1").arg(result.message));
    }
    m_current->clear();
    updateButtons();
}

void MergePage::onCompareFinished(const CompareResult& result)
{
    for (const auto& line : result.lines)
        m_log->appendPlainText(line);
    if (result.canceled) {
        m_progress->setValue(0);
        m_progressText->setText(tr("Test canceled."));
        m_log->appendPlainText(tr("Test canceled."));
    } else {
        m_openInDiff->setEnabled(true);
        m_progress->setValue(result.lines.isEmpty() && !result.ok ? m_progress->value() : 1000);
        m_progressText->setText(result.ok ? tr("Test passed: %1").arg(result.message)
                                          : tr("Test failed: %1").arg(result.message));
        if (result.lines.isEmpty())
            m_log->appendPlainText(tr("Error: %1").arg(result.message));
        else
            m_log->appendPlainText(result.message);
    }
    m_current->clear();
    updateButtons();
}

void MergePage::showProgress(int tensorsDone, int tensorsTotal, quint64 bytesDone, quint64 bytesTotal, const QString& current)
{
    m_meter.sample(bytesDone);
    m_progress->setValue(bytesTotal == 0 ? 0 : int(bytesDone * 1000 / bytesTotal));
    m_progressText->setText(tr("%1 / %2 tensors · %3 / %4 · %5")
                                .arg(tensorsDone)
                                .arg(tensorsTotal)
                                .arg(bytesText(bytesDone), bytesText(bytesTotal), m_meter.text()));
    m_current->setText(current);
}

void MergePage::appendLog(const QString& line) { m_log->appendPlainText(line); }

QString MergePage::logText() const { return m_log->toPlainText(); }

} // namespace tessera::ui
