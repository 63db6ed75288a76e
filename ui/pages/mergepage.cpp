// SPDX-License-Identifier: GPL-3.0-or-later
#include "mergepage.h"

#include "confirm.h"
#include "coreconvert.h"
#include "jobs/comparejob.h"
#include "jobs/mappingjob.h"
#include "jobs/mergejob.h"
#include "jobs/planjob.h"
#include "models/mergeplanmodel.h"
#include "openfolder.h"
#include "widgets/elidingcombobox.h"
#include "widgets/folderfield.h"
#include "widgets/rankcolors.h"

#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"
#include "merge/checkpoint_problems.h"
#include "merge/gguf_plan.h"
#include "merge/merge_plan.h"
#include "ops/flag_table.h"
#include "ops/option_values.h"
#include "ops/prepare_merge.h"
#include "ops/vocabulary.h"

#include <QAbstractItemView>
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
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QStorageInfo>
#include <QStyle>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <exception>

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

/// A line of the plan box in `color`.
QString colored(const QString& color, const QString& text)
{
    return QStringLiteral("<span style='color:%1'>%2</span>").arg(color, text.toHtmlEscaped());
}

/// An item of the GGUF type choice: "q4_k_m — 412.3 MB — 4.8 bits: Ollama's default; …", without the size when
/// there is no GGUF plan to take it from.
QString outTypeItemText(const tessera::GgufOutTypeInfo& type, const QString& size)
{
    QStringList parts { QLatin1String(type.name) };
    if (!size.isEmpty())
        parts << size;
    parts << QString::fromUtf8(type.summary);
    return parts.join(QStringLiteral(" — "));
}

/// The GGUF export's lines of the plan box: the file's size and its mix of tensor types before anything is written.
QStringList ggufLines(const tessera::GgufPlan& g, const QString& muted)
{
    QStringList lines;
    lines << QObject::tr("<b>Writes %1</b> as GGUF (%2, %3): %4")
                 .arg(countText(qint64(g.tensors.size()), QObject::tr("tensor"), QObject::tr("tensors")),
                      qs(g.architecture), QLatin1String(tessera::ggufOutTypeName(g.outType)),
                      qs(g.fileName).toHtmlEscaped())
          << QObject::tr("<b>Tensor types</b> %1").arg(qs(tessera::ggufTypeCountsText(g)).toHtmlEscaped())
          << QObject::tr("<b>Tokenizer</b> %1").arg(qs(g.tokenizerSummary).toHtmlEscaped())
          << QObject::tr("<b>Disk</b> %1 · <b>Memory</b> about %2 at peak (largest tensor %3)")
                 .arg(bytesText(g.fileSize), bytesText(g.memoryBytes), bytesText(g.largestTensorBytes));
    for (const auto& d : g.dropped)
        lines << colored(muted, QObject::tr("not written: %1").arg(qs(d)));
    for (const auto& w : g.warnings)
        lines << colored(muted, QObject::tr("warning: %1").arg(qs(w)));
    return lines;
}

/// How a safetensors merge copies its tensors: streamed, gathered, summed, fused; replicas verified or not.
QString copyLine(const tessera::MergePlan& p, bool verifyReplicas)
{
    std::size_t direct = 0, gather = 0, sum = 0, replicas = 0;
    for (const auto& t : p.tensors) {
        if (!t.delta)
            (t.mode == tessera::CopyMode::Direct ? direct : t.mode == tessera::CopyMode::Gather ? gather : sum) += 1;
        replicas += t.replicas.size();
    }
    return QObject::tr("<b>Copy</b> %1 streamed straight into place, %2 gathered, %3 summed (Partial)%4 · %5 %6")
        .arg(direct)
        .arg(gather)
        .arg(sum)
        .arg(p.fusedTensors ? QObject::tr(", %1 fused with their LoRA update").arg(p.fusedTensors) : QString())
        .arg(countText(qint64(replicas), QObject::tr("replica piece"), QObject::tr("replica pieces")),
             verifyReplicas ? QObject::tr("verified against the written copy") : QObject::tr("skipped"));
}

/// A LoRA merge's lines: r, alpha and what is fused, the adapter folder, the notes.
QStringList loraLines(const tessera::PreparedModel& m, const QString& muted)
{
    QStringList lines;
    const auto& c = m.lora->config;
    const auto& plans = *m.loraPlans;
    lines << QObject::tr("<b>LoRA</b> r = %1, alpha = %2 (%3)%4: %5")
                 .arg(c.r)
                 .arg(c.alpha)
                 .arg(qs(c.alphaSource).toHtmlEscaped(), c.useRslora ? QObject::tr(", rsLoRA") : QString(),
                      plans.fused ? QObject::tr("%1 weights fused with W + (B·A)·scale").arg(plans.fused->fusedTensors)
                                  : QObject::tr("no fused model"));
    if (plans.adapter)
        lines << QObject::tr("<b>Adapter</b> %1 in %2/ (adapter_model.safetensors, adapter_config.json)")
                     .arg(countText(qint64(plans.adapter->tensors.size()), QObject::tr("tensor"), QObject::tr("tensors")),
                          qs(plans.adapterFolder));
    for (const auto& n : plans.notes)
        lines << colored(muted, qs(n));
    return lines;
}

/// The messages prepare found (scan and mapping warnings, LoRA notes), as the command line prints them.
QStringList messageLines(const tessera::PreparedModel& m, const QString& muted)
{
    QStringList lines;
    for (const auto& message : m.messages)
        lines << colored(muted, (message.kind == tessera::PrepareMessage::Kind::Warning ? QObject::tr("warning: %1")
                                                                                         : QObject::tr("note: %1"))
                                    .arg(qs(message.text)));
    return lines;
}

/// Why a merge cannot be planned, as the workbench says it: the list of problems is on the Summary page here, not
/// in `tessera inspect`.
QString refusalText(const tessera::PreparedMerge& p)
{
    return qs(p.refusal->error.message)
        .replace(QLatin1String(tessera::kProblemsPointer), QObject::tr(" (the Summary page lists them)"));
}

/// The status line of a merge that cannot be planned: the refusal's first line (the plan box has the rest).
QString refusalStatus(const tessera::PreparedMerge& p)
{
    QString first = refusalText(p).section(QLatin1Char('\n'), 0, 0);
    if (first.endsWith(QLatin1Char(':')))
        first.chop(1);
    if (p.refusal->usage)
        return QObject::tr("Not running: %1").arg(first);
    if (p.request.gguf() && !p.model.refusal)
        return QObject::tr("Refused: cannot be written as GGUF: %1").arg(first);
    return QObject::tr("Refused: %1").arg(first);
}

} // namespace

MergePage::MergePage(QWidget* parent)
    : QWidget(parent)
    , m_planner(new PlanJob(this))
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
    , m_outtype(new ElidingComboBox(this))
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
    , m_openOutput(new QPushButton(tr("Open Output"), this))
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
    createWidgets();
    buildLayout(buildOptions());
    connectOptions();
    connectJobs();
    setMappingJob(m_ownMapping);
}

MergePage::~MergePage() = default;

void MergePage::createWidgets()
{
    // The choices are the command line's own vocabulary (ops/vocabulary.h).
    for (const auto& b : tessera::backends())
        m_backend->addItem(qs(b.name));
    m_backend->setEnabled(false);
    m_backend->setToolTip(tr("The workbench detects the layout; the command line below names it"));
    m_dtype->addItem(tr("keep"), QString());
    for (const auto& d : tessera::outputDtypes())
        m_dtype->addItem(qs(d.name), qs(d.name));
    m_format->addItem(tr("Hugging Face safetensors"), QStringLiteral("safetensors"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama"), QStringLiteral("gguf"));
    m_format->setToolTip(tr("safetensors: a Hugging Face folder. GGUF: one <name>-<type>.gguf file that llama.cpp, "
                            "Ollama and LM Studio load, with the tokenizer and chat template inside"));
    createOutTypeChoice();
    const QMap<tessera::LoraOutput, QString> loraLabels { { tessera::LoraOutput::Both, tr("fused model and adapter") },
                                                          { tessera::LoraOutput::Fused, tr("fused model (W + B·A·α/r)") },
                                                          { tessera::LoraOutput::Adapter, tr("adapter only (PEFT folder)") } };
    for (auto mode : tessera::loraOutputs())
        m_lora->addItem(loraLabels.value(mode), QLatin1String(tessera::loraOutputName(mode)));
    m_lora->setToolTip(tr("LoRA checkpoints: the base model with every adapted weight fused, the PEFT adapter in "
                          "lora_adapter/, or both"));
    m_loraAlpha->setPlaceholderText(tr("from lora_train_meta.json"));
    m_loraAlpha->setToolTip(tr("LoRA alpha, when the checkpoint does not record it; the scale is alpha / r"));
    m_baseModel->setPlaceholderText(tr("only for adapter-only (save_lora_only) checkpoints"));
    m_baseModel->setToolTip(tr("The base model's Hugging Face folder, to fuse an adapter-only checkpoint"));
    m_threads->setRange(0, int(tessera::kMaxThreads));
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
    m_strict->setToolTip(tr("Fail on any missing parameter (Megatron: or unmapped source tensor); off writes what "
                            "there is and warns (--no_strict)"));
    m_tie->setToolTip(tr("Treat lm_head.weight as tied to the embedding even if config.json does not say so"));
    m_valueModel->setToolTip(tr("A value model: score.weight instead of lm_head.weight (Megatron: write output_layer "
                                "as score.weight; also detected from a [1, hidden] output layer)"));
    m_verifyReplicas->setToolTip(tr("Compare every replicated copy with the one written (reads more)"));
    m_atol->setToolTip(tr("Absolute tolerance of the test: |a − b| ≤ atol + rtol·|b| (0 and 0: bit for bit)"));
    m_rtol->setToolTip(m_atol->toolTip());
    m_command->setWordWrap(true);
    m_command->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    m_command->setFont(mono);
    m_log->setFont(mono);
    m_planSummary->setWordWrap(true);
    m_planSummary->setTextFormat(Qt::RichText);
    m_progressText->setWordWrap(true); // a refusal naming a long path wraps instead of widening the page
    m_planSummary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_planView->setModel(m_planModel);
    m_planView->verticalHeader()->hide();
    m_planView->verticalHeader()->setDefaultSectionSize(m_planView->fontMetrics().height() + 6);
    m_planView->horizontalHeader()->setStretchLastSection(true);
    m_planView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_planView->setAlternatingRowColors(true);
    m_planView->setTextElideMode(Qt::ElideMiddle);
    m_planView->setWordWrap(false);
    m_planView->setTabKeyNavigation(false); // one Tab stop: the arrows walk its rows
    m_log->setTabChangesFocus(true);
    const QFontMetrics fm(font());
    m_planView->setColumnWidth(MergePlanModel::FileColumn, fm.horizontalAdvance(QStringLiteral("model-00001-of-00003.safetensors")) + 16);
    m_planView->setColumnWidth(MergePlanModel::TensorsColumn, fm.horizontalAdvance(QStringLiteral("Tensors")) + 20);
    m_planView->setColumnWidth(MergePlanModel::SizeColumn, fm.horizontalAdvance(QStringLiteral("123.45 MB")) + 20);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_log->setPlaceholderText(tr("Merge and test output appears here."));
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_cancel->setEnabled(false);
    m_openInDiff->setEnabled(false);
    m_openOutput->setEnabled(false);
    m_openOutput->setToolTip(tr("Show the merged folder in the file manager"));
    m_openInDiff->setToolTip(tr("Compare this checkpoint with the reference tensor by tensor in the Diff view"));
    m_current->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_current->setForegroundRole(QPalette::PlaceholderText);
}

void MergePage::createOutTypeChoice()
{
    // Every output type, largest file first, the default chosen; each item's data is the plain --outtype name the
    // request is built from, its text what the type is for and, once a GGUF plan is on screen, the size it writes.
    for (const auto& type : tessera::ggufOutTypes())
        m_outtype->addItem(outTypeItemText(type, {}), QLatin1String(type.name));
    selectDefaultOutType();
    // The closed box asks for no more than a name's width, so the options stay as narrow as before (a 1280×720
    // window with the tree beside them); it shows the start of its text, the name and the size, elided, and the
    // list shows every summary in full.
    m_outtype->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_outtype->setMinimumContentsLength(6);
    m_outtype->setEnabled(false);
    showTypeSizes();
}

void MergePage::selectDefaultOutType()
{
    m_outtype->setCurrentIndex(m_outtype->findData(QLatin1String(tessera::ggufOutTypeName(tessera::kDefaultGgufOutType))));
}

void MergePage::showTypeSizes()
{
    // The sizes come from the core (ggufFileSizesByType), for every type from one GGUF plan, so they hold for any
    // type chosen with the same other options: choosing another type keeps them, even when that type's plan is
    // refused; other options (another checkpoint, config, tie) wait for their own plan ("…").
    auto anyType = [](tessera::MergeRequest r) {
        r.outtype.reset();
        return r;
    };
    if (m_prepared && m_prepared->gguf && !m_prepared->refusal) {
        m_typeSizes = tessera::ggufFileSizesByType(*m_prepared->gguf);
        m_typeSizesOf = anyType(m_prepared->request);
    }
    const bool known = isGguf() && m_typeSizesOf && *m_typeSizesOf == anyType(request());
    const QString pending = isGguf() && !known && isPlanning() ? QStringLiteral("…") : QString();
    // Texts change in place: the current item and its data stay, so nothing here asks for another plan.
    const QSignalBlocker blocker(m_outtype);
    int widest = 0;
    for (int i = 0; i < m_outtype->count(); ++i) {
        const auto type = tessera::ggufOutTypeFromName(m_outtype->itemData(i).toString().toStdString());
        if (!type)
            continue;
        QString size = pending;
        for (const auto& [sized, bytes] : known ? m_typeSizes : decltype(m_typeSizes) {})
            if (sized == *type) // 0: the type's mixture refuses this model
                size = bytes ? bytesText(bytes) : tr("cannot be written");
        m_outtype->setItemText(i, outTypeItemText(tessera::ggufOutType(*type), size));
        widest = std::max(widest, m_outtype->fontMetrics().horizontalAdvance(m_outtype->itemText(i)));
    }
    // The list is as wide as its longest item, wider than the closed box, so no summary is cut.
    m_outtype->view()->setMinimumWidth(widest + 2 * m_outtype->style()->pixelMetric(QStyle::PM_ScrollBarExtent));
    m_outtype->setToolTip(tr("%1\n\nThe GGUF type (--outtype); norms and 1-D tensors stay f32, as llama.cpp's converter "
                             "writes them. The sizes are of this checkpoint's GGUF plan.")
                              .arg(m_outtype->currentText()));
}

QGroupBox* MergePage::buildOptions()
{
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
    return options;
}

void MergePage::buildLayout(QGroupBox* options)
{
    auto* planBox = new QGroupBox(tr("Plan (dry run)"), this);
    auto* planLayout = new QVBoxLayout(planBox);
    planLayout->addWidget(m_planSummary);
    planLayout->addWidget(m_planView, 1);

    auto* runBox = new QGroupBox(tr("Run"), this);
    auto* runLayout = new QVBoxLayout(runBox);
    // The command line Merge runs stays in sight beside it, however far the options and plan are scrolled.
    runLayout->addWidget(m_command);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_test);
    buttons->addWidget(m_openInDiff);
    buttons->addWidget(m_openOutput);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_progress, 1);
    runLayout->addLayout(buttons);
    runLayout->addWidget(m_progressText);
    runLayout->addWidget(m_current);

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

    // Options, plan and log scroll in a short window; the command line, Merge, Test and the progress bar stay in
    // sight below them.
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
}

void MergePage::connectOptions()
{
    // Every option is part of the request: the plan follows it on a worker once typing pauses. The mapping flags also
    // go to the Mapping view's table (typing debounced like the filter boxes; switches at once).
    for (QLineEdit* edit : { m_targetDir, m_hfModelPath, m_maxShardSize, m_ignoreMissing, m_loraAlpha, m_baseModel })
        connect(edit, &QLineEdit::textChanged, this, &MergePage::requestChanged);
    for (QComboBox* box : { m_dtype, m_outtype, m_lora })
        connect(box, &QComboBox::currentIndexChanged, this, &MergePage::requestChanged);
    for (QCheckBox* box : { m_strict, m_tie, m_valueModel, m_verifyReplicas })
        connect(box, &QCheckBox::toggled, this, &MergePage::requestChanged);
    connect(m_threads, &QSpinBox::valueChanged, this, &MergePage::requestChanged);
    connect(m_format, &QComboBox::currentIndexChanged, this, [this] {
        m_outtype->setEnabled(isGguf());
        m_dtype->setEnabled(!isGguf());
        m_maxShardSize->setEnabled(!isGguf());
        m_verifyReplicas->setEnabled(!isGguf()); // a GGUF export has no replica check (request() leaves it out)
        requestChanged();
    });
    m_mappingDebounce.setSingleShot(true);
    m_mappingDebounce.setInterval(400);
    connect(&m_mappingDebounce, &QTimer::timeout, this, &MergePage::pushMappingSettings);
    for (QLineEdit* edit : { m_ignoreMissing, m_hfModelPath })
        connect(edit, &QLineEdit::textChanged, this, [this] { m_mappingDebounce.start(); });
    connect(m_ignoreMissing, &QLineEdit::returnPressed, this, &MergePage::pushMappingSettings);
    for (auto* box : { m_strict, m_tie, m_valueModel })
        connect(box, &QCheckBox::toggled, this, &MergePage::pushMappingSettings);
    connect(m_loadRules, &QPushButton::clicked, this, &MergePage::loadRules);
    connect(m_openOutput, &QPushButton::clicked, this, [this] {
        if (!m_writtenDir.isEmpty() && !openFolder(m_writtenDir))
            appendLog(tr("Cannot open %1 in the file manager.").arg(QDir::toNativeSeparators(m_writtenDir)));
    });
    connect(m_reference, &QLineEdit::textChanged, this, &MergePage::updateButtons);
    // The diff it offers is of the reference just tested.
    connect(m_reference, &QLineEdit::textChanged, m_openInDiff, [this] { m_openInDiff->setEnabled(false); });
    connect(m_openInDiff, &QPushButton::clicked, this, [this] {
        Q_EMIT openInDiffRequested(tessera::diffRequestOfTest(m_tested));
    });
}

void MergePage::connectJobs()
{
    connect(m_planner, &PlanJob::busyChanged, this, &MergePage::updateButtons);
    connect(m_planner, &PlanJob::busyChanged, this, &MergePage::showTypeSizes);
    connect(m_planner, &PlanJob::progressText, this, [this](const QString& text) {
        if (!m_job->isRunning() && !m_compare->isRunning())
            m_progressText->setText(tr("Planning: reading %1").arg(text));
    });
    connect(m_run, &QPushButton::clicked, this, &MergePage::run);
    connect(m_test, &QPushButton::clicked, this, &MergePage::runTest);
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
}

void MergePage::setMappingJob(MappingJob* job)
{
    if (!job)
        job = m_ownMapping;
    if (m_mapping == job)
        return;
    if (m_mapping)
        disconnect(m_mapping, nullptr, this, nullptr);
    m_mapping = job;
    connect(m_mapping, &MappingJob::settingsChanged, this, &MergePage::syncMappingWidgets);
    if (m_checkpoint)
        m_mapping->setCheckpoint(m_checkpoint);
    syncMappingWidgets();
}

void MergePage::resetOptions()
{
    const QSignalBlocker b1(m_targetDir), b2(m_reference), b3(m_dtype), b4(m_lora), b5(m_loraAlpha), b6(m_baseModel),
        b7(m_hfModelPath), b8(m_format), b9(m_outtype);
    m_format->setCurrentIndex(0);
    selectDefaultOutType();
    m_outtype->setEnabled(false);
    m_dtype->setEnabled(true);
    m_maxShardSize->setEnabled(true);
    m_verifyReplicas->setEnabled(true);
    m_targetDir->clear();
    m_reference->clear();
    m_hfModelPath->clear();
    m_dtype->setCurrentIndex(0);
    m_lora->setCurrentIndex(0);
    m_loraAlpha->clear();
    m_baseModel->clear();
    m_log->clear();
    m_progress->setValue(0);
    m_current->clear();
    m_openInDiff->setEnabled(false); // the test it offers was of the other checkpoint
}

void MergePage::setCheckpoint(CheckpointPtr checkpoint)
{
    // Another checkpoint: the output folder, reference, dtype, LoRA options and log of the last one do not carry
    // over, so one click can never overwrite the previous merge with this checkpoint's weights.
    const bool another = m_checkpoint && checkpoint && checkpoint->root != m_checkpoint->root;
    if (another && !m_job->isRunning() && !m_compare->isRunning())
        resetOptions();
    m_checkpoint = std::move(checkpoint);
    m_prepared.reset();
    m_typeSizesOf.reset(); // the same folder loaded again may hold other tensors
    m_scans.clear();
    if (m_checkpoint) // the workbench's scan applies the default parameter check (ScanJob)
        m_scans.push_back(loadedScan(m_checkpoint));
    m_localDir->setText(m_checkpoint ? qs(m_checkpoint->root) : QString());
    if (m_checkpoint)
        m_hfModelPath->setPlaceholderText(m_checkpoint->hfConfigDir.empty() ? tr("not found: give --hf_model_path")
                                                                             : qs(m_checkpoint->hfConfigDir));
    const bool megatron = isMegatron();
    m_backend->setCurrentText(m_checkpoint ? qs(tessera::backendForLayout(m_checkpoint->layout)) : QStringLiteral("auto"));
    for (QWidget* w : std::initializer_list<QWidget*> { m_paramMapping, m_loadRules })
        w->setEnabled(megatron);
    m_loraCheckpoint = m_checkpoint && tessera::hasLoraTensors(*m_checkpoint);
    // The base model's row with its Browse button.
    for (QWidget* w : std::initializer_list<QWidget*> { m_lora, m_loraAlpha, m_baseModel->parentWidget() })
        w->setEnabled(m_loraCheckpoint);
    m_mapping->setCheckpoint(m_checkpoint);
    m_planModel->setPlan(nullptr);
    requestChanged();
}

void MergePage::setWrittenDir(const QString& dir)
{
    m_writtenDir = dir;
    m_openOutput->setEnabled(!dir.isEmpty());
    m_openOutput->setToolTip(dir.isEmpty() ? tr("Shows the merged folder in the file manager once a merge is done")
                                           : tr("Show %1 in the file manager").arg(QDir::toNativeSeparators(dir)));
}

bool MergePage::isGguf() const { return m_format->currentData().toString() == QLatin1String("gguf"); }

bool MergePage::isMegatron() const { return m_checkpoint && tessera::isMegatronLayout(m_checkpoint->layout); }

void MergePage::setReferenceDir(const QString& dir) { m_reference->setText(dir); }

void MergePage::setTargetDir(const QString& dir) { m_targetDir->setText(dir); }

tessera::MergeRequest MergePage::request() const
{
    tessera::MergeRequest r;
    auto text = [](const QLineEdit* edit) -> std::optional<std::string> {
        const QString t = edit->text().trimmed();
        return t.isEmpty() ? std::nullopt : std::optional<std::string>(t.toStdString());
    };
    if (m_checkpoint) {
        static_cast<tessera::ModelRequest&>(r) = loadedModelRequest(*m_checkpoint);
        if (auto typed = text(m_hfModelPath))
            r.hfModelPath = typed;
    }
    r.targetDir = m_targetDir->text().trimmed().toStdString(); // empty until chosen: the merge refuses that
    if (isGguf()) {
        r.format = "gguf";
        r.outtype = m_outtype->currentData().toString().toStdString();
    } else {
        if (const QString dtype = m_dtype->currentData().toString(); !dtype.isEmpty())
            r.dtype = dtype.toStdString();
        if (m_maxShardSize->text().trimmed() != QLatin1String("5GB"))
            r.maxShardSize = m_maxShardSize->text().trimmed().toStdString();
        r.verifyReplicas = m_verifyReplicas->isChecked();
    }
    if (m_threads->value() > 0)
        r.threads = std::to_string(m_threads->value());
    if (isMegatron() && m_mapping->settings().hasRules() && !m_mapping->settings().rulesName.isEmpty())
        r.paramMapping = m_mapping->settings().rulesName.toStdString();
    if (!m_ignoreMissing->text().isEmpty())
        r.ignoreMissingParams = m_ignoreMissing->text().toStdString();
    r.strict = m_strict->isChecked();
    r.isValueModel = m_valueModel->isChecked();
    r.tieWordEmbedding = m_tie->isChecked();
    if (m_loraCheckpoint) {
        if (m_lora->currentIndex() > 0)
            r.lora = m_lora->currentData().toString().toStdString();
        r.loraAlpha = text(m_loraAlpha);
        r.baseModel = text(m_baseModel);
    }
    return r;
}

tessera::TestRequest MergePage::testRequest() const
{
    tessera::TestRequest t;
    static_cast<tessera::ModelRequest&>(t) = modelRequest();
    t.testHfDir = m_reference->text().trimmed().toStdString();
    for (auto [edit, field] : { std::pair { m_atol, &t.atol }, std::pair { m_rtol, &t.rtol } })
        if (const QString v = edit->text().trimmed(); v != QLatin1String("0"))
            *field = v.toStdString();
    return t;
}

tessera::PrepareContext MergePage::prepareContext() const
{
    tessera::PrepareContext context;
    context.scans = m_scans;
    const MappingSettings& s = m_mapping->settings();
    if (isMegatron() && s.hasRules())
        context.rules = tessera::EditedRules { s.rulesText.toStdString(), s.rulesOrigin().toStdString() };
    return context;
}

QString MergePage::commandLine() const
{
    QString line = shownCommandLine("merge", request().toArgs(), "DIR");
    if (isMegatron() && m_mapping->settings().hasRules() && m_mapping->settings().rulesName.isEmpty())
        line += tr(" --param_mapping <save the editor's rules first>");
    return line;
}

void MergePage::requestChanged()
{
    // What the last run did was of other options (another folder, another format): the status and the bar start over.
    m_outcome.clear();
    if (!m_job->isRunning() && !m_compare->isRunning()) {
        m_progress->setValue(0);
        m_current->clear();
        setWrittenDir({});
    }
    m_command->setText(commandLine());
    // Typing waits for a pause; a checkpoint, a switch or a choice plans at once.
    const auto* edit = qobject_cast<const QLineEdit*>(sender());
    schedulePlan(edit ? 300 : 0);
    Q_EMIT modelRequestChanged();
}

void MergePage::schedulePlan(int delayMs)
{
    if (!m_checkpoint) {
        m_planner->cancel();
        m_prepared.reset();
        showPlanError(tr("Open a checkpoint to see what a merge would write."));
        Q_EMIT planChanged();
        return;
    }
    const tessera::MergeRequest request = this->request();
    const tessera::PrepareContext context = prepareContext();
    m_planner->schedule(
        [this, request, context](tessera::Progress& progress) -> std::function<void()> {
            tessera::PrepareContext withProgress = context;
            withProgress.progress = &progress;
            std::shared_ptr<const tessera::PreparedMerge> prepared;
            try {
                prepared = std::make_shared<const tessera::PreparedMerge>(tessera::prepareMerge(request, withProgress));
            } catch (const std::exception& e) { // an allocation failure on a huge checkpoint
                auto failed = std::make_shared<tessera::PreparedMerge>();
                failed->request = request;
                failed->refusal = tessera::Refusal { tessera::makeError(e.what()) };
                prepared = failed;
            }
            return [this, prepared] { onPrepared(prepared); };
        },
        delayMs);
    updateButtons();
    showTypeSizes();
}

void MergePage::onPrepared(const std::shared_ptr<const tessera::PreparedMerge>& prepared)
{
    if (prepared->request != request())
        return; // the options changed meanwhile: their own plan is on its way
    m_prepared = prepared;
    // Keep what the prepare read, so the next one (another dtype, a keystroke) does not read it again.
    for (const auto& scan : prepared->model.scans) {
        m_scans.push_back(scan);
        constexpr std::size_t kKept = 6; // the loaded checkpoint and a few others
        if (m_scans.size() > kKept)
            m_scans.erase(m_scans.begin() + 1);
    }
    showPlan();
    Q_EMIT planChanged();
}

void MergePage::showPlanError(const QString& message)
{
    m_planText = message;
    m_planModel->setPlan(nullptr);
    m_planView->hide();
    m_planSummary->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                               .arg(problemColor(palette()).name(), message.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"))));
    updateButtons();
    showTypeSizes();
}

void MergePage::showPlan()
{
    const auto& p = *m_prepared;
    const QString muted = palette().color(QPalette::PlaceholderText).name();
    if (p.refusal) {
        const QString message = refusalText(p);
        if (p.refusal->usage)
            showPlanError(message);
        else
            showPlanError((p.request.gguf() && !p.model.refusal ? tr("This checkpoint cannot be written as GGUF:\n\n%1")
                                                                    : tr("This checkpoint cannot be merged as it is:\n\n%1"))
                              .arg(message));
        return;
    }
    const auto& model = p.model;
    m_planText = p.gguf ? qs(tessera::ggufPlanSummary(*p.gguf, true))
                        : qs(tessera::mergePlanSummary(model.primary(), model.primaryInfo(), true));
    m_planModel->setPlan(p.gguf ? nullptr : plannedModel());
    m_planView->setVisible(!p.gguf);
    QStringList lines;
    if (!p.target && !p.request.target().empty())
        lines << colored(problemColor(palette()).name(), tr("The merge would refuse the output folder: %1")
                                                             .arg(qs(p.target.error().message)));
    if (p.gguf) {
        lines << ggufLines(*p.gguf, muted);
    } else {
        const auto& plan = model.primary();
        lines << tr("<b>Writes %1</b> in %2: %3 of tensors")
                     .arg(countText(qint64(plan.tensors.size()), tr("tensor"), tr("tensors")),
                          countText(qint64(plan.files.size()), tr("safetensors file"), tr("safetensors files")),
                          bytesText(plan.totalBytes))
              << copyLine(plan, p.request.verifyReplicas);
        const QString target = qs(p.request.target());
        QString disk = tr("<b>Disk</b> %1 in total (weights, index, config and tokenizer)").arg(bytesText(plan.diskBytes));
        if (const auto freeBytes = freeBytesFor(target.isEmpty() ? qs(m_checkpoint->root) : target)) {
            disk += *freeBytes > plan.diskBytes
                ? tr(" · %1 free %2").arg(bytesText(*freeBytes), target.isEmpty() ? tr("on the checkpoint's disk") : tr("at the target"))
                : QStringLiteral(" · ") + colored(problemColor(palette()).name(), tr("only %1 free at the target").arg(bytesText(*freeBytes)));
        }
        lines << disk
              << tr("<b>Memory</b> about %1 at peak with %2 (largest tensor %3, largest gather/sum buffer %4)")
                     .arg(bytesText(plan.memoryBytes), countText(model.options.threads, tr("thread"), tr("threads")),
                          bytesText(plan.largestTensorBytes), bytesText(plan.bufferBytes));
        if (plan.configDtype)
            lines << tr("config.json torch_dtype becomes %1").arg(dtypeText(*plan.configDtype));
        if (plan.configDequantized)
            lines << tr("config.json loses its quantization_config: the weights are written unquantized");
        if (model.loraPlans)
            lines << loraLines(model, muted);
        for (const auto& d : plan.dropped)
            lines << colored(muted, tr("not written: %1").arg(qs(d)));
        for (const auto& w : plan.warnings)
            lines << colored(muted, tr("warning: %1").arg(qs(w)));
    }
    lines << messageLines(model, muted);
    m_planSummary->setText(lines.join(QStringLiteral("<br>")));
    updateButtons();
    showTypeSizes();
}

std::shared_ptr<const tessera::MergePlan> MergePage::plannedModel() const
{
    if (!m_prepared || !m_prepared->model.planned() || m_prepared->refusal)
        return nullptr;
    return std::shared_ptr<const tessera::MergePlan>(m_prepared, &m_prepared->model.primary());
}

CheckpointPtr MergePage::plannedInput() const
{
    if (!plannedModel())
        return nullptr;
    return CheckpointPtr(m_prepared, &m_prepared->model.primaryInfo());
}

std::shared_ptr<const tessera::GgufPlan> MergePage::ggufPlan() const
{
    if (!m_prepared || !m_prepared->gguf)
        return nullptr;
    return std::shared_ptr<const tessera::GgufPlan>(m_prepared, &*m_prepared->gguf);
}

bool MergePage::isPlanning() const { return m_planner->isBusy(); }

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
}

void MergePage::syncMappingWidgets()
{
    const MappingSettings& s = m_mapping->settings();
    {
        const QSignalBlocker b1(m_strict), b2(m_tie), b3(m_valueModel);
        m_strict->setChecked(s.strict);
        m_tie->setChecked(s.tieWordEmbeddings);
        m_valueModel->setChecked(s.valueModel);
        if (!m_mappingDebounce.isActive() && m_ignoreMissing->text() != s.ignoreMissing) {
            const QSignalBlocker b4(m_ignoreMissing);
            m_ignoreMissing->setText(s.ignoreMissing);
        }
    }
    m_paramMapping->setText(!s.hasRules() ? QString()
                                : s.rulesName.isEmpty() ? tr("unsaved rules in the Mapping view's editor")
                                                        : QDir::toNativeSeparators(s.rulesName));
    // The Mapping view's rules and switches are the merge's: plan again with them.
    requestChanged();
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

bool MergePage::canRun() const
{
    return m_prepared && !isPlanning() && m_prepared->runnable() && m_prepared->request == request()
        && !m_job->isRunning() && !m_compare->isRunning();
}

bool MergePage::canTest() const
{
    return m_prepared && !isPlanning() && !m_prepared->model.refusal && !m_job->isRunning() && !m_compare->isRunning();
}

QString MergePage::statusText() const { return m_progressText->text(); }

void MergePage::updateButtons()
{
    const bool running = m_job->isRunning() || m_compare->isRunning();
    const bool chosen = !m_targetDir->text().trimmed().isEmpty();
    QString why; // why Merge cannot run, or what it will do
    if (!m_checkpoint)
        why = tr("Not running: no checkpoint.");
    else if (isPlanning())
        why = tr("Planning…");
    else if (!m_prepared)
        why = tr("Not running: no plan yet.");
    else if (m_prepared->refusal)
        why = refusalStatus(*m_prepared);
    else if (!chosen)
        why = tr("Not running. Choose an output folder to merge; a test against a reference writes nothing.");
    else if (!m_prepared->adapterTarget)
        why = tr("Refused: %1").arg(qs(m_prepared->adapterTarget.error().message));
    else if (!m_prepared->target)
        why = tr("Refused: %1").arg(qs(m_prepared->target.error().message));
    else
        why = tr("Ready to merge.");
    m_run->setEnabled(canRun());
    m_run->setToolTip(canRun() ? tr("Merge into the output folder") : why);
    m_test->setEnabled(canTest());
    m_test->setToolTip(tr("Merge in memory and compare every tensor with a Hugging Face folder (tessera test); "
                          "writes nothing"));
    m_cancel->setEnabled(running);
    m_command->setText(commandLine());
    if (!running) // how the last run or test ended, else what Merge would do
        m_progressText->setText(m_outcome.isEmpty() ? why : m_outcome);
}

bool MergePage::confirmReplacing()
{
    // The command line refuses to mix models and notes the files it keeps; here the user may replace a model, and is
    // asked first — once, for everything the folder already holds (prepareMerge() sorted it).
    const auto& p = *m_prepared;
    if (p.replacedFiles.empty() && p.otherFiles.empty())
        return true;
    auto listed = [](const std::vector<std::string>& names) -> QString {
        QStringList shown;
        for (std::size_t i = 0; i < names.size() && i < 3; ++i)
            shown << qs(names[i]);
        if (names.size() > 3)
            shown << tr("and %1 more").arg(names.size() - 3);
        return shown.join(QStringLiteral(", "));
    };
    const QString folder = QDir::toNativeSeparators(QDir(qs(p.request.target())).absolutePath());
    QStringList question;
    if (!p.replacedFiles.empty())
        question << tr("%1 already holds a model (%2). Replace it with the merge of %3?")
                        .arg(folder, listed(p.replacedFiles), qs(m_checkpoint->root));
    else
        question << tr("Merge %1 into %2?").arg(qs(m_checkpoint->root), folder);
    if (!p.otherFiles.empty())
        question << tr("The folder also holds %1 this merge does not write (%2); they are kept as they are.")
                        .arg(countText(qint64(p.otherFiles.size()), tr("file"), tr("files")), listed(p.otherFiles));
    return confirm(this, p.replacedFiles.empty() ? tr("Merge into a folder that is not empty?") : tr("Replace the model?"),
                   question.join(QStringLiteral("\n\n")));
}

void MergePage::run()
{
    // Exactly the plan on screen: the request it was prepared for is the one the options make now.
    if (!canRun())
        return;
    const auto prepared = m_prepared;
    const QString target = qs(prepared->request.target());
    if (!confirmReplacing()) {
        m_log->appendPlainText(tr("Not merged: %1 was left as it is.").arg(QDir(target).absolutePath()));
        return;
    }
    if (prepared->gguf)
        m_log->appendPlainText(tr("Exporting %1 → %2 as GGUF")
                                   .arg(qs(m_checkpoint->root), QDir(target).filePath(qs(prepared->gguf->fileName))));
    else
        m_log->appendPlainText(tr("Merging %1 → %2").arg(qs(m_checkpoint->root), target));
    m_meter.start(prepared->byteCount());
    m_outcome.clear();
    setWrittenDir({});
    m_job->start(prepared);
    showProgress(0, int(prepared->tensorCount()), 0, prepared->byteCount(), {});
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
    // Checked as `tessera test` checks its flags (the tolerances: finite, 0 or more).
    const tessera::TestRequest request = testRequest();
    if (const tessera::Status valid = request.validate(); !valid) {
        m_log->appendPlainText(tr("Not tested: %1").arg(qs(valid.error().message)));
        return;
    }
    m_log->appendPlainText(tr("Testing %1 against %2").arg(qs(m_checkpoint->root), m_reference->text().trimmed()));
    if (m_prepared && m_prepared->model.planned())
        m_meter.start(m_prepared->model.primary().totalBytes);
    m_outcome.clear();
    m_tested = request;
    m_compare->start(request, prepareContext());
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
        setWrittenDir(result.outputDir);
        m_progress->setValue(1000);
        m_outcome = tr("Done: %1").arg(result.message);
        m_log->appendPlainText(tr("Done: %1").arg(result.message));
    } else {
        // Said once, and the bar starts over: nothing of the merge is left.
        m_progress->setValue(0);
        m_outcome = result.canceled ? tr("Canceled; nothing was written.") : tr("Failed: %1").arg(result.message);
        m_log->appendPlainText(result.canceled ? m_outcome : tr("Error: %1").arg(result.message));
    }
    m_current->clear();
    // The target changed (or may have): what a merge would refuse of it is computed again.
    schedulePlan(0);
}

void MergePage::onCompareFinished(const CompareResult& result)
{
    for (const auto& line : result.lines)
        m_log->appendPlainText(line);
    if (result.canceled) {
        m_progress->setValue(0);
        m_outcome = tr("Test canceled.");
        m_log->appendPlainText(m_outcome);
    } else {
        m_openInDiff->setEnabled(true);
        m_progress->setValue(result.lines.isEmpty() && !result.ok ? m_progress->value() : 1000);
        m_outcome = result.ok ? tr("Test passed: %1").arg(result.message) : tr("Test failed: %1").arg(result.message);
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
