// SPDX-License-Identifier: GPL-3.0-or-later
#include "mergepage.h"

#include "byte_size.h"
#include "coreconvert.h"
#include "jobs/mergejob.h"
#include "merge_plan.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>

#include <algorithm>
#include <thread>

namespace tessera::ui {

namespace {
QWidget* withBrowse(QLineEdit* edit, QWidget* parent)
{
    auto* box = new QWidget(parent);
    auto* layout = new QHBoxLayout(box);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(edit, 1);
    auto* browse = new QPushButton(MergePage::tr("Browse…"), box);
    layout->addWidget(browse);
    QObject::connect(browse, &QPushButton::clicked, edit, [edit] {
        const QString dir = QFileDialog::getExistingDirectory(edit, MergePage::tr("Choose a folder"), edit->text());
        if (!dir.isEmpty())
            edit->setText(dir);
    });
    return box;
}
} // namespace

MergePage::MergePage(QWidget* parent)
    : QWidget(parent)
    , m_localDir(new QLineEdit(this))
    , m_targetDir(new QLineEdit(this))
    , m_backend(new QComboBox(this))
    , m_hfModelPath(new QLineEdit(this))
    , m_dtype(new QComboBox(this))
    , m_maxShardSize(new QLineEdit(QStringLiteral("5GB"), this))
    , m_threads(new QSpinBox(this))
    , m_reference(new QLineEdit(this))
    , m_plan(new QPlainTextEdit(this))
    , m_run(new QPushButton(tr("Merge"), this))
    , m_cancel(new QPushButton(tr("Cancel"), this))
    , m_progress(new QProgressBar(this))
    , m_progressText(new QLabel(this))
    , m_current(new QLabel(this))
    , m_log(new QPlainTextEdit(this))
{
    m_job = new MergeJob(this);
    m_backend->addItems({ QStringLiteral("auto"), QStringLiteral("fsdp"), QStringLiteral("dcp"), QStringLiteral("megatron") });
    m_dtype->addItem(tr("keep"), QString());
    for (const auto* name : { "bf16", "fp16", "fp32" })
        m_dtype->addItem(QLatin1String(name), QLatin1String(name));
    m_threads->setRange(0, 256);
    m_threads->setSpecialValueText(tr("one per core"));
    m_localDir->setReadOnly(true);
    m_targetDir->setPlaceholderText(tr("output folder for config, tokenizer and safetensors"));
    m_hfModelPath->setPlaceholderText(tr("found automatically (huggingface/ next to the shards)"));
    m_reference->setPlaceholderText(tr("optional: a Hugging Face folder to compare with (tessera test)"));
    m_plan->setReadOnly(true);
    m_plan->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_cancel->setEnabled(false);
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    m_plan->setFont(mono);
    m_log->setFont(mono);

    auto* options = new QGroupBox(tr("Options (tessera merge)"), this);
    auto* form = new QFormLayout(options);
    form->addRow(tr("Checkpoint (--local_dir)"), m_localDir);
    form->addRow(tr("Output (--target_dir)"), withBrowse(m_targetDir, options));
    form->addRow(tr("Backend (--backend)"), m_backend);
    form->addRow(tr("Config (--hf_model_path)"), withBrowse(m_hfModelPath, options));
    form->addRow(tr("DType (--dtype)"), m_dtype);
    form->addRow(tr("Shard size (--max_shard_size)"), m_maxShardSize);
    form->addRow(tr("Threads (--threads)"), m_threads);
    form->addRow(tr("Reference (tessera test)"), withBrowse(m_reference, options));

    auto* run = new QGroupBox(tr("Run"), this);
    auto* runLayout = new QVBoxLayout(run);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_progress, 1);
    runLayout->addLayout(buttons);
    runLayout->addWidget(m_progressText);
    runLayout->addWidget(m_current);
    m_progressText->setText(tr("Not running."));

    auto* top = new QVBoxLayout;
    top->addWidget(options);
    auto* planBox = new QGroupBox(tr("Plan (dry run)"), this);
    auto* planLayout = new QVBoxLayout(planBox);
    planLayout->addWidget(m_plan);
    top->addWidget(planBox, 1);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addLayout(top, 3);
    layout->addWidget(run);
    auto* logBox = new QGroupBox(tr("Log"), this);
    auto* logLayout = new QVBoxLayout(logBox);
    logLayout->addWidget(m_log);
    layout->addWidget(logBox, 2);

    connect(m_dtype, &QComboBox::currentIndexChanged, this, &MergePage::updatePlan);
    connect(m_maxShardSize, &QLineEdit::textChanged, this, &MergePage::updatePlan);
    connect(m_hfModelPath, &QLineEdit::textChanged, this, &MergePage::updatePlan);
    connect(m_targetDir, &QLineEdit::textChanged, this, &MergePage::updateButtons);
    connect(m_run, &QPushButton::clicked, this, &MergePage::run);
    connect(m_cancel, &QPushButton::clicked, m_job, &MergeJob::cancel);
    connect(m_job, &MergeJob::progress, this, [this](const MergeStatus& s) {
        showProgress(int(s.tensorsDone), int(s.tensorsTotal), s.bytesDone, s.bytesTotal, s.currentTensor);
    });
    connect(m_job, &MergeJob::finished, this, &MergePage::onFinished);
    updatePlan();
}

MergePage::~MergePage() = default;

void MergePage::setCheckpoint(CheckpointPtr checkpoint)
{
    m_checkpoint = std::move(checkpoint);
    m_localDir->setText(m_checkpoint ? qs(m_checkpoint->root) : QString());
    if (m_checkpoint && m_hfModelPath->text().isEmpty())
        m_hfModelPath->setPlaceholderText(m_checkpoint->hfConfigDir.empty() ? tr("not found: give --hf_model_path")
                                                                             : qs(m_checkpoint->hfConfigDir));
    updatePlan();
}

void MergePage::setReferenceDir(const QString& dir) { m_reference->setText(dir); }

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
    return o;
}

QString MergePage::planText() const { return m_plan->toPlainText(); }

void MergePage::updatePlan()
{
    m_mergePlan.reset();
    if (!m_checkpoint) {
        m_plan->setPlainText(tr("Open a checkpoint to see what a merge would write."));
        updateButtons();
        return;
    }
    // The same plan `tessera merge --dry-run` prints; computed from the scan alone, so it is cheap to redo.
    tessera::MergeOptions options;
    const auto limit = tessera::parseByteSize(m_maxShardSize->text().toStdString());
    if (!limit) {
        m_plan->setPlainText(tr("--max_shard_size: %1").arg(qs(limit.error().message)));
        updateButtons();
        return;
    }
    options.maxShardSize = *limit;
    const QString dtype = m_dtype->currentData().toString();
    if (!dtype.isEmpty())
        options.dtype = tessera::dtypeFromUserName(dtype.toStdString());
    options.hfConfigDir = m_hfModelPath->text().toStdString();
    options.threads = m_threads->value() > 0 ? unsigned(m_threads->value()) : std::max(1u, std::thread::hardware_concurrency());
    auto plan = tessera::planMerge(*m_checkpoint, options);
    if (!plan) {
        m_plan->setPlainText(tr("This checkpoint cannot be merged as it is:\n\n%1").arg(qs(plan.error().message)));
        updateButtons();
        return;
    }
    m_mergePlan = std::make_shared<const tessera::MergePlan>(std::move(plan).value());
    m_plan->setPlainText(qs(tessera::mergePlanSummary(*m_mergePlan, *m_checkpoint, true)));
    updateButtons();
}

bool MergePage::canRun() const
{
    return m_mergePlan && !m_targetDir->text().trimmed().isEmpty() && !m_job->isRunning();
}

void MergePage::updateButtons()
{
    const bool running = m_job->isRunning();
    m_run->setEnabled(canRun());
    m_run->setToolTip(!m_mergePlan ? tr("No plan: see the plan box")
                          : m_targetDir->text().trimmed().isEmpty() ? tr("Choose an output folder first")
                                                                    : tr("Merge into the output folder"));
    m_cancel->setEnabled(running);
}

void MergePage::run()
{
    if (!canRun())
        return;
    m_log->appendPlainText(tr("Merging %1 → %2").arg(qs(m_checkpoint->root), m_targetDir->text()));
    m_meter.start(m_mergePlan->totalBytes);
    m_job->start(m_checkpoint, m_mergePlan, m_targetDir->text().trimmed(), unsigned(m_threads->value()));
    showProgress(0, int(m_mergePlan->tensors.size()), 0, m_mergePlan->totalBytes, {});
    updateButtons();
}

void MergePage::onFinished(const MergeResult& result)
{
    for (const auto& warning : result.warnings)
        m_log->appendPlainText(tr("warning: %1").arg(warning));
    if (result.ok) {
        m_progress->setValue(1000);
        m_progressText->setText(tr("Done: %1").arg(result.message));
        m_log->appendPlainText(tr("Done: %1").arg(result.message));
    } else {
        m_progressText->setText(result.canceled ? tr("Canceled; nothing was written.") : tr("Failed."));
        m_log->appendPlainText(result.canceled ? tr("Canceled: %1").arg(result.message) : tr("Error: %1").arg(result.message));
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

} // namespace tessera::ui
