// SPDX-License-Identifier: GPL-3.0-or-later
#include "mergepage.h"

#include "byte_size.h"
#include "coreconvert.h"

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
    m_run->setEnabled(false);
    m_run->setToolTip(tr("The merge engine is not part of this build yet"));
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

    auto* top = new QHBoxLayout;
    top->addWidget(options, 3);
    auto* planBox = new QGroupBox(tr("Plan (dry run)"), this);
    auto* planLayout = new QVBoxLayout(planBox);
    planLayout->addWidget(m_plan);
    top->addWidget(planBox, 4);

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

MergeOptions MergePage::options() const
{
    MergeOptions o;
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
    if (!m_checkpoint) {
        m_plan->setPlainText(tr("Open a checkpoint to see what a merge would write."));
        return;
    }
    const auto limit = tessera::parseByteSize(m_maxShardSize->text().toStdString());
    if (!limit) {
        m_plan->setPlainText(tr("--max_shard_size: %1").arg(qs(limit.error().message)));
        return;
    }
    const QString dtype = m_dtype->currentData().toString();
    const auto target = dtype == QLatin1String("bf16")   ? std::optional<tessera::DType>(tessera::DType::BFloat16)
        : dtype == QLatin1String("fp16")                  ? std::optional<tessera::DType>(tessera::DType::Float16)
        : dtype == QLatin1String("fp32")                  ? std::optional<tessera::DType>(tessera::DType::Float32)
                                                          : std::nullopt;
    // Estimate: transformers' greedy sharding in checkpoint order. The engine's own plan replaces this text.
    std::uint64_t total = 0, current = 0;
    int shards = m_checkpoint->tensors.empty() ? 0 : 1;
    for (const auto& tensor : m_checkpoint->tensors) {
        const auto bytes = tensor.numel() * tessera::dtypeSize(target && tessera::isFloatingPoint(tensor.dtype) ? *target : tensor.dtype);
        if (current > 0 && current + bytes > *limit) {
            ++shards;
            current = 0;
        }
        current += bytes;
        total += bytes;
    }
    QString text = tr("Estimate from the scan (the merge engine's dry run will replace it):\n");
    text += tr("  %1 tensors, %2 → %3\n")
                .arg(m_checkpoint->tensors.size())
                .arg(bytesText(total), countText(shards, tr("safetensors file"), tr("safetensors files")));
    text += tr("  config and tokenizer from %1\n")
                .arg(m_checkpoint->hfConfigDir.empty() ? tr("(not found)") : qs(m_checkpoint->hfConfigDir));
    if (!m_checkpoint->problems.empty())
        text += tr("  %1 must be fixed first; see the shard tree\n")
                    .arg(countText(static_cast<long long>(m_checkpoint->problems.size()), tr("problem"), tr("problems")));
    m_plan->setPlainText(text);
}

void MergePage::showProgress(int tensorsDone, int tensorsTotal, quint64 bytesDone, quint64 bytesTotal, const QString& current)
{
    if (tensorsDone == 0)
        m_meter.start(bytesTotal);
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
