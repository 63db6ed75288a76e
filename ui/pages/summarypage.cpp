// SPDX-License-Identifier: GPL-3.0-or-later
#include "summarypage.h"

#include "mapping/lora.h"
#include "models/provenance.h"
#include "pages/mergepage.h"

#include "coreconvert.h"
#include "widgets/megatronranks.h"
#include "widgets/rankcolors.h"

#include <QDir>
#include <QEvent>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <algorithm>

namespace tessera::ui {

namespace {
/// `line` without the checkpoint's folder in front: the heading names it.
QString belowRoot(QString line, const tessera::CheckpointInfo& info)
{
    const QString root = qs(info.root);
    if (line.startsWith(root + QLatin1String(": ")))
        return line.mid(root.size() + 2);
    if (line.startsWith(root + QLatin1Char('/')))
        return line.mid(root.size() + 1);
    return line;
}

QString refusalHtml(const QString& refusal, const tessera::CheckpointInfo& info)
{
    QStringList lines;
    for (const QString& line : refusal.split(QLatin1Char('\n')))
        lines << belowRoot(line.trimmed(), info).toHtmlEscaped();
    return lines.join(QStringLiteral("<br>"));
}
} // namespace

QString SummaryPage::parallelText(const tessera::CheckpointInfo& info)
{
    // The sizes the checkpoint says, alike for every layout: TP and PP always, the others only when they split
    // something (a layout that writes VPP 1 or leaves DP unknown reads the same as one that says nothing).
    const auto& p = info.parallel;
    if (!p.tensorParallel && !p.pipelineParallel && !p.expertParallel && !p.dataParallel)
        return {};
    QStringList parts { tr("TP %1").arg(std::max(p.tensorParallel, 1)),
                        tr("PP %1").arg(std::max(p.pipelineParallel, 1)) };
    if (p.virtualPipeline > 1)
        parts << tr("VPP %1").arg(p.virtualPipeline);
    if (p.expertParallel > 1)
        parts << tr("EP %1").arg(p.expertParallel);
    if (const int dp = std::max(p.dataParallel, megatronDataParallel(info)); dp > 1)
        parts << tr("DP %1").arg(dp);
    return parts.join(QStringLiteral(" · "));
}

SummaryPage::SummaryPage(QWidget* parent)
    : QWidget(parent), m_text(new QTextBrowser(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_text);
    m_text->setOpenLinks(false);
    m_text->setFrameShape(QFrame::NoFrame);
    render();
}

SummaryPage::~SummaryPage() = default;

void SummaryPage::setCheckpoint(CheckpointPtr checkpoint)
{
    m_checkpoint = std::move(checkpoint);
    m_verdict = {};
    render();
}

void SummaryPage::followMergePlan(const MergePage* merge)
{
    m_merge = merge;
    connect(merge, &MergePage::planChanged, this, [this] {
        const MergeVerdict verdict = mergeVerdict(m_merge->prepared().get(), m_checkpoint);
        if (verdict.known)
            setMergeVerdict(verdict);
    });
}

void SummaryPage::setMergeVerdict(const MergeVerdict& verdict)
{
    m_verdict = verdict;
    render();
}

bool SummaryPage::isCheckingMerge() const
{
    return m_checkpoint && m_merge && (!m_verdict.known || m_merge->isPlanning());
}

void SummaryPage::showError(const QString& path, const QString& message)
{
    m_checkpoint.reset();
    m_verdict = {};
    m_text->setHtml(QStringLiteral("<h3>") + path.toHtmlEscaped() + QStringLiteral("</h3><p style='color:")
                    + problemColor(palette()).name() + QStringLiteral("'>") + message.toHtmlEscaped()
                    + QStringLiteral("</p>"));
}

QString SummaryPage::html() const { return m_text->toHtml(); }

void SummaryPage::render()
{
    if (!m_checkpoint) {
        m_text->setHtml(tr("<h3>No checkpoint loaded</h3><p>Open a folder with <b>File → Open Folder…</b> (Ctrl+O), "
                           "drop one on the window, or start <tt>tessera gui PATH</tt>.</p>"));
        return;
    }
    const auto& info = *m_checkpoint;
    auto row = [](const QString& key, const QString& value) -> QString {
        return QStringLiteral("<tr><td style='padding-right:16px'><b>") + key + QStringLiteral("</b></td><td>")
            + value.toHtmlEscaped() + QStringLiteral("</td></tr>");
    };
    std::uint64_t pieces = 0;
    for (const auto& tensor : info.tensors)
        pieces += tensor.pieces.size();
    QString html = QStringLiteral("<h3>") + qs(info.root).toHtmlEscaped() + QStringLiteral("</h3><table>");
    html += row(tr("Layout"), qs(info.layout));
    if (info.parallel.worldSize > 0)
        html += row(tr("World size"), QString::number(info.parallel.worldSize));
    for (const auto& mesh : info.parallel.meshes) {
        QStringList dims;
        for (std::size_t d = 0; d < mesh.shape.size(); ++d)
            dims << (d < mesh.dimNames.size() ? qs(mesh.dimNames[d]) + QLatin1Char('=') : QString()) + QString::number(mesh.shape[d]);
        html += row(tr("Device mesh"), dims.join(QStringLiteral(" × ")));
    }
    if (const QString parallel = parallelText(info); !parallel.isEmpty())
        html += row(tr("Parallel"), parallel);
    html += row(tr("Tensors"), tr("%1 (%2, %3 in %4)")
                                   .arg(info.tensors.size())
                                   .arg(bytesText(info.totalBytes()),
                                        countText(static_cast<long long>(pieces), tr("piece"), tr("pieces")),
                                        countText(static_cast<long long>(info.files.size()), tr("file"), tr("files"))));
    html += row(tr("HF config"), info.hfConfigDir.empty() ? tr("not found") : qs(info.hfConfigDir));
    for (const auto& [key, value] : info.notes)
        html += row(qs(key), qs(value));
    if (const Provenance provenance = readProvenance(info); provenance.found)
        html += row(tr("Merged from"), tr("%1 · layout %2 · Tessera %3 (merge_report.json: where each tensor came from)")
                                           .arg(QDir::toNativeSeparators(provenance.checkpoint), provenance.layout,
                                                provenance.version));
    const auto lora = tessera::loraSummaryLines(info);
    for (std::size_t i = 0; i < lora.size(); ++i)
        html += row(i == 0 ? tr("LoRA") : QString(), qs(lora[i]));
    html += QStringLiteral("</table>");
    if (m_verdict.refused()) {
        // The problems below are why; a refusal about the mapping or the options says its own.
        const QString why = !info.problems.empty() && m_verdict.mappingProblems == 0
            ? tr("the problems below.")
            : refusalHtml(m_verdict.refusal, info);
        QString counts;
        if (m_verdict.mappingProblems > 0)
            counts = QStringLiteral(" (")
                + countText(m_verdict.mappingProblems, tr("mapping problem"), tr("mapping problems"))
                + tr(": see the Mapping view)");
        html += QStringLiteral("<p style='color:") + problemColor(palette()).name() + QStringLiteral("'><b>")
            + tr("A merge would refuse it") + counts + QStringLiteral(":</b> ") + why + QStringLiteral("</p>");
    }
    for (const auto& warning : info.warnings)
        html += QStringLiteral("<p><b>") + tr("Warning:") + QStringLiteral("</b> ") + qs(warning).toHtmlEscaped()
            + QStringLiteral("</p>");
    if (info.problems.empty()) {
        html += tr("<p><b>Problems:</b> none</p>");
    } else {
        html += QStringLiteral("<p><b>") + countText(static_cast<long long>(info.problems.size()), tr("problem"), tr("problems"))
            + QStringLiteral("</b></p><ul style='color:") + problemColor(palette()).name() + QStringLiteral("'>");
        // The heading names the folder; each problem names only what lies below it.
        for (const auto& problem : info.problems)
            html += QStringLiteral("<li>") + belowRoot(qs(problem.text()), info).toHtmlEscaped()
                + QStringLiteral("</li>");
        html += QStringLiteral("</ul>");
    }
    m_text->setHtml(html);
}

void SummaryPage::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange)
        render();
    QWidget::changeEvent(event);
}

} // namespace tessera::ui
