// SPDX-License-Identifier: GPL-3.0-or-later
#include "meshview.h"

#include "megatronranks.h"
#include "formats/layout_registry.h"
#include "rankcolors.h"

#include <QPainter>

#include <algorithm>

namespace tessera::ui {

namespace {
constexpr int kCell = 64;
constexpr int kAxis = 26;
} // namespace

MeshView::MeshView(QWidget* parent) : QWidget(parent) { setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred); }

MeshView::~MeshView() = default;

void MeshView::setTensor(CheckpointPtr checkpoint, int tensorIndex)
{
    m_shape.clear();
    m_dimNames.clear();
    m_ranks.clear();
    m_holding.clear();
    m_folders.clear();
    m_coordinates.clear();
    m_title.clear();
    if (checkpoint && tensorIndex >= 0 && tensorIndex < static_cast<int>(checkpoint->tensors.size())) {
        const auto& info = *checkpoint;
        const auto& tensor = info.tensors[tensorIndex];
        const tessera::DeviceMesh* mesh = nullptr;
        if (tensor.meshIndex >= 0 && tensor.meshIndex < static_cast<int>(info.parallel.meshes.size()))
            mesh = &info.parallel.meshes[tensor.meshIndex];
        else if (info.parallel.meshes.size() == 1)
            mesh = &info.parallel.meshes.front();
        if (mesh) {
            m_shape = QVector<qint64>(mesh->shape.begin(), mesh->shape.end());
            for (const auto& name : mesh->dimNames)
                m_dimNames << QString::fromStdString(name);
            m_ranks = QVector<qint64>(mesh->ranks.begin(), mesh->ranks.end());
        } else if (hasMegatronRankGrid(info)) {
            // The model-parallel grid in rank order, so rows are stages: (pp, ep, tp) for the per-rank layouts,
            // (pp, dp, tp) for torch_dist, whose files are written by every rank.
            const auto& par = info.parallel;
            const int pp = std::max(par.pipelineParallel, 1);
            const int ep = tessera::hasMegatronRankFolders(info.layout) ? std::max(par.expertParallel, 1) : 1;
            const int dp = megatronDataParallel(info);
            for (int r = 0; r < par.tensorParallel * pp * ep * dp; ++r) {
                m_ranks << r;
                if (const auto where = megatronRank(info, r)) {
                    m_folders.insert(r, where->folder);
                    m_coordinates.insert(r, where->coordinates(par));
                }
            }
            m_shape << pp;
            m_dimNames << QStringLiteral("PP");
            for (const auto& [size, name] : { std::pair { ep, "EP" }, std::pair { dp, "DP" } })
                if (size > 1) {
                    m_shape << size;
                    m_dimNames << QLatin1String(name);
                }
            m_shape << par.tensorParallel;
            m_dimNames << QStringLiteral("TP");
        } else {
            // No DTensor mesh (plain tensors, torch_dist): show the ranks that wrote files as one row.
            int maxRank = info.parallel.worldSize - 1;
            for (const auto& piece : tensor.pieces)
                maxRank = std::max(maxRank, piece.rank);
            for (int r = 0; r <= maxRank; ++r)
                m_ranks << r;
            m_shape = { static_cast<qint64>(m_ranks.size()) };
            m_dimNames << tr("ranks");
        }
        for (const auto& piece : tensor.pieces) {
            const Holding h = piece.role == tessera::PieceRole::Primary ? Holding::Primary
                : piece.role == tessera::PieceRole::Replica            ? Holding::Replica
                                                                       : Holding::Partial;
            auto it = m_holding.find(piece.rank);
            if (it == m_holding.end() || (it.value() == Holding::Replica && h != Holding::Replica))
                m_holding.insert(piece.rank, h);
        }
        QStringList dims;
        for (int d = 0; d < m_shape.size(); ++d)
            dims << (d < m_dimNames.size() && !m_dimNames[d].isEmpty() ? m_dimNames[d] : QStringLiteral("dim %1").arg(d))
                    + QLatin1Char('=') + QString::number(m_shape[d]);
        m_title = dims.join(QStringLiteral(" × "));
        if (!m_folders.isEmpty()) {
            const auto& par = info.parallel;
            m_title = QStringLiteral("TP=%1 × PP=%2").arg(par.tensorParallel).arg(std::max(par.pipelineParallel, 1));
            if (par.virtualPipeline > 1)
                m_title += QStringLiteral(" × VPP=%1").arg(par.virtualPipeline);
            if (par.expertParallel > 1)
                m_title += QStringLiteral(" × EP=%1").arg(par.expertParallel);
            if (const int dp = megatronDataParallel(info); dp > 1)
                m_title += QStringLiteral(" × DP=%1").arg(dp);
        }
    }
    m_highlighted = -1;
    updateGeometry();
    update();
}

void MeshView::setHighlightedRank(int rank)
{
    if (rank == m_highlighted)
        return;
    m_highlighted = rank;
    update();
}

QSizeF MeshView::fullCell() const
{
    if (m_folders.isEmpty())
        return { qreal(kCell), qreal(kCell) };
    const QFontMetrics fm(font());
    int widest = 0;
    for (const auto& folder : m_folders)
        widest = std::max(widest, fm.horizontalAdvance(folder));
    for (const auto& coordinates : m_coordinates) // "TP 1 · PP 0" is wider than torch_dist's "rank 1"
        widest = std::max(widest, fm.horizontalAdvance(coordinates));
    return { qreal(std::max(kCell, widest + 12)), qreal(fm.height() * 3 + 10) };
}

QString MeshView::cellLabel(qint64 rank) const
{
    if (!m_folders.contains(rank))
        return {};
    return m_folders.value(rank) + QLatin1Char('\n') + m_coordinates.value(rank);
}

QSize MeshView::sizeHint() const
{
    if (m_shape.isEmpty())
        return { 200, 100 };
    const qint64 cols = m_shape.last();
    const qint64 rows = m_ranks.isEmpty() ? 1 : std::max<qint64>(1, m_ranks.size() / std::max<qint64>(1, cols));
    const QSizeF cell = fullCell();
    return { int(qreal(std::min<qint64>(cols, 16)) * cell.width() + kAxis + 16),
             int(qreal(std::min<qint64>(rows, 16)) * cell.height() + kAxis + 16) };
}

QSize MeshView::minimumSizeHint() const { return { 160, 90 }; }

void MeshView::paintEvent(QPaintEvent* event)
{
    (void)event;
    QPainter painter(this);
    const QPalette& pal = palette();
    if (m_shape.isEmpty() || m_ranks.isEmpty()) {
        painter.setPen(pal.color(QPalette::PlaceholderText));
        painter.drawText(rect(), Qt::AlignCenter, tr("no device mesh"));
        return;
    }
    const qint64 cols = std::max<qint64>(1, m_shape.last());
    const qint64 rows = std::max<qint64>(1, (m_ranks.size() + cols - 1) / cols);
    const QFontMetrics fm(font());
    // Cells keep their shape and shrink together to fit.
    const QSizeF full = fullCell();
    const qreal scale = std::clamp<qreal>(std::min((width() - kAxis - 8) / (qreal(cols) * full.width()),
                                                   (height() - kAxis - 8) / (qreal(rows) * full.height())),
                                          12 / full.height(), 1);
    const qreal cellW = full.width() * scale, cellH = full.height() * scale;
    const QRectF grid(kAxis, kAxis, cellW * qreal(cols), cellH * qreal(rows));

    auto dimLabel = [&](int d) -> QString {
        const QString name = d < m_dimNames.size() && !m_dimNames[d].isEmpty() ? m_dimNames[d] : QStringLiteral("dim %1").arg(d);
        return name + QStringLiteral(" = ") + QString::number(m_shape[d]);
    };
    painter.setPen(pal.color(QPalette::Text));
    painter.drawText(QRectF(grid.left(), 2, std::max<qreal>(grid.width(), 200), kAxis - 4), Qt::AlignLeft | Qt::AlignVCenter,
                     dimLabel(int(m_shape.size()) - 1) + QStringLiteral("  →"));
    if (m_shape.size() >= 2) {
        QStringList rowDims;
        for (int d = 0; d + 1 < m_shape.size(); ++d)
            rowDims << dimLabel(d);
        painter.save();
        painter.translate(2, grid.bottom());
        painter.rotate(-90);
        painter.drawText(QRectF(0, 0, std::max<qreal>(grid.height(), 120), kAxis - 4), Qt::AlignLeft | Qt::AlignVCenter,
                         rowDims.join(QStringLiteral(" × ")) + QStringLiteral("  →"));
        painter.restore();
    }

    for (int i = 0; i < m_ranks.size(); ++i) {
        const qint64 rank = m_ranks[i];
        const QRectF box(grid.left() + qreal(i % cols) * cellW, grid.top() + qreal(i / cols) * cellH, cellW, cellH);
        const QRectF inner = box.adjusted(2, 2, -2, -2);
        const Holding holding = m_holding.value(rank, Holding::Nothing);
        const QColor color = rankColor(int(rank), pal);
        if (holding == Holding::Nothing) {
            painter.setPen(QPen(pal.color(QPalette::Mid), 1, Qt::DashLine));
            painter.setBrush(Qt::NoBrush);
            painter.drawRect(inner);
            painter.setPen(pal.color(QPalette::PlaceholderText));
        } else {
            painter.fillRect(inner, color);
            if (holding == Holding::Replica)
                painter.fillRect(inner, QBrush(textColorOn(color), Qt::BDiagPattern));
            painter.setPen(textColorOn(color));
        }
        const QString what = holding == Holding::Primary ? tr("shard")
            : holding == Holding::Replica                ? tr("replica")
            : holding == Holding::Partial                ? tr("partial")
                                                         : tr("nothing");
        QString text = QString::number(rank);
        if (m_folders.contains(rank) && scale == 1)
            text = cellLabel(rank) + QLatin1Char('\n') + what;
        else if (std::min(cellW, cellH) >= 40 && holding != Holding::Nothing)
            text += QLatin1Char('\n') + what;
        if (std::min(cellW, cellH) >= fm.height()) {
            if (holding == Holding::Replica) {
                // A plate under the text keeps it readable over the hatching.
                const QRectF plate = painter.boundingRect(inner, Qt::AlignCenter, text).adjusted(-3, -1, 3, 1);
                painter.fillRect(plate, color);
            }
            painter.drawText(inner, Qt::AlignCenter, text);
        }
        if (rank == m_highlighted) {
            painter.setPen(QPen(pal.color(QPalette::Highlight), 3));
            painter.setBrush(Qt::NoBrush);
            painter.drawRect(inner.adjusted(1, 1, -1, -1));
        }
    }
}

} // namespace tessera::ui
