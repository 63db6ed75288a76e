// SPDX-License-Identifier: GPL-3.0-or-later
#include "placementview.h"

#include "coreconvert.h"
#include "megatronranks.h"
#include "rankcolors.h"

#include "split/split_preview.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <set>

namespace tessera::ui {

namespace {
constexpr qreal kLeftMargin = 84;
constexpr qreal kTopMargin = 44;
constexpr qreal kPad = 12;
} // namespace

PlacementView::PlacementView(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

PlacementView::~PlacementView() = default;

QSize PlacementView::sizeHint() const { return { 640, 480 }; }
QSize PlacementView::minimumSizeHint() const { return { 240, 160 }; }

void PlacementView::setTensor(CheckpointPtr checkpoint, int tensorIndex)
{
    m_checkpoint = std::move(checkpoint);
    m_tensor = m_checkpoint && tensorIndex >= 0 && tensorIndex < static_cast<int>(m_checkpoint->tensors.size())
        ? tensorIndex
        : -1;
    m_geometry = m_tensor >= 0 ? PlacementGeometry::compute(m_checkpoint->tensors[m_tensor]) : PlacementGeometry();
    m_selected = -1;
    m_hovered = -1;
    update();
}

void PlacementView::setSelectedPiece(int pieceIndex)
{
    if (pieceIndex == m_selected)
        return;
    m_selected = pieceIndex;
    update();
}

QRectF PlacementView::drawingRect() const
{
    const QRectF avail(kLeftMargin, kTopMargin, width() - kLeftMargin - kPad, height() - kTopMargin - kPad);
    if (m_tensor < 0 || avail.width() < 10 || avail.height() < 10)
        return {};
    if (m_geometry.dims == 0)
        return { avail.left(), avail.top(), 96, 96 };
    if (m_geometry.dims == 1)
        return { avail.left(), avail.top(), avail.width(), std::min<qreal>(64, avail.height()) };
    // Keep the true aspect within 1:2…3:1: a [151936, 64] embedding stays tall but wide enough to label.
    const qreal aspect = std::clamp(m_geometry.rows > 0 ? qreal(m_geometry.cols) / qreal(m_geometry.rows) : 1.0,
                                    0.5, 3.0);
    qreal w = avail.width();
    qreal h = w / aspect;
    if (h > avail.height()) {
        h = avail.height();
        w = h * aspect;
    }
    return { avail.left(), avail.top(), w, h };
}

QRectF PlacementView::toPixels(const QRectF& area, const FoldedRect& rect) const
{
    const qreal rows = std::max<qreal>(1, qreal(m_geometry.rows));
    const qreal cols = std::max<qreal>(1, qreal(m_geometry.cols));
    QRectF r(QPointF(area.left() + area.width() * qreal(rect.col0) / cols, area.top() + area.height() * qreal(rect.row0) / rows),
             QPointF(area.left() + area.width() * qreal(rect.col1) / cols, area.top() + area.height() * qreal(rect.row1) / rows));
    // A one-row slice of a 150k-row tensor is still visible.
    if (r.width() < 1.5)
        r.setWidth(1.5);
    if (r.height() < 1.5)
        r.setHeight(1.5);
    return r;
}

QString PlacementView::pieceLabel(const PlacementGeometry::PieceRects& entry, bool brief) const
{
    const auto& tensor = m_checkpoint->tensors[m_tensor];
    const auto& piece = tensor.pieces[entry.piece];
    QString label = piece.rank >= 0 ? (brief ? QStringLiteral("r%1") : tr("rank %1")).arg(piece.rank)
                                    : (brief ? QStringLiteral("#%1") : tr("piece %1")).arg(entry.piece);
    if (piece.role == tessera::PieceRole::PartialTerm)
        label += brief ? QStringLiteral("Σ") : tr(" (partial)");
    else if (piece.role == tessera::PieceRole::Replica)
        label += brief ? QStringLiteral("*") : tr(" (replica)");
    for (const int r : entry.replicas) {
        const int rank = tensor.pieces[r].rank;
        label += (brief ? QStringLiteral("=r%1") : QStringLiteral(" = ") + tr("rank %1")).arg(rank);
    }
    return label;
}

void PlacementView::paintEvent(QPaintEvent* event)
{
    (void)event;
    QPainter painter(this);
    painter.setRenderHint(QPainter::Antialiasing, false);
    const QPalette& pal = palette();
    painter.fillRect(rect(), pal.color(QPalette::Base));
    if (m_tensor < 0) {
        painter.setPen(pal.color(QPalette::PlaceholderText));
        painter.drawText(rect(), Qt::AlignCenter, tr("Select a tensor in the shard tree to see where its pieces are."));
        return;
    }
    const QRectF area = drawingRect();
    if (area.isEmpty())
        return;
    const auto& tensor = m_checkpoint->tensors[m_tensor];
    const QColor red = problemColor(pal);

    // Uncovered background: light grey so gaps read as "nothing here" before they are tinted red.
    painter.fillRect(area, pal.color(QPalette::AlternateBase));

    const QFontMetrics fm(font());
    for (std::size_t e = 0; e < m_geometry.pieces.size(); ++e) {
        const auto& entry = m_geometry.pieces[e];
        const auto& piece = tensor.pieces[entry.piece];
        const QColor fill = rankColor(piece.rank, pal);
        const bool orphanReplica = piece.role == tessera::PieceRole::Replica;
        for (const auto& rect : entry.rects) {
            const QRectF px = toPixels(area, rect);
            painter.fillRect(px, fill);
            if (orphanReplica)
                painter.fillRect(px, QBrush(textColorOn(fill), Qt::BDiagPattern));
            if (px.width() > 3 && px.height() > 3) {
                painter.setPen(QPen(fill.darker(160), 1));
                painter.drawRect(px.adjusted(0, 0, -1, -1));
            }
        }
    }

    // Gaps and overlaps on top, hatched so they stay visible next to red-ish rank colours.
    for (const auto* list : { &m_geometry.gaps, &m_geometry.overlaps }) {
        const bool gap = list == &m_geometry.gaps;
        for (const auto& rect : *list) {
            const QRectF px = toPixels(area, rect);
            QColor tint = red;
            tint.setAlpha(gap ? 90 : 140);
            painter.fillRect(px, tint);
            painter.fillRect(px, QBrush(red, gap ? Qt::DiagCrossPattern : Qt::BDiagPattern));
            painter.setPen(QPen(red, 2));
            painter.drawRect(px.adjusted(1, 1, -1, -1));
        }
    }

    // Labels after all fills so a neighbour's fill never covers them.
    for (const auto& entry : m_geometry.pieces) {
        if (entry.rects.empty())
            continue;
        const auto largest = std::max_element(entry.rects.begin(), entry.rects.end(), [](const auto& a, const auto& b) {
            return (a.row1 - a.row0) * (a.col1 - a.col0) < (b.row1 - b.row0) * (b.col1 - b.col0);
        });
        const QRectF px = toPixels(area, *largest);
        const QColor fill = rankColor(tensor.pieces[entry.piece].rank, pal);
        for (const bool brief : { false, true }) {
            const QString label = pieceLabel(entry, brief);
            if (fm.horizontalAdvance(label) + 6 <= px.width() && fm.height() + 2 <= px.height()) {
                painter.setPen(textColorOn(fill));
                painter.drawText(px, Qt::AlignCenter, label);
                break;
            }
        }
    }

    for (const auto& entry : m_geometry.pieces) {
        const bool selected = entry.piece == m_selected
            || std::find(entry.replicas.begin(), entry.replicas.end(), m_selected) != entry.replicas.end();
        const bool hovered = entry.piece == m_hovered;
        if (!selected && !hovered)
            continue;
        painter.setPen(QPen(selected ? pal.color(QPalette::Highlight) : pal.color(QPalette::Text), selected ? 3 : 2));
        painter.setBrush(Qt::NoBrush);
        for (const auto& rect : entry.rects)
            painter.drawRect(toPixels(area, rect).adjusted(1, 1, -1, -1));
    }

    painter.setPen(QPen(pal.color(QPalette::Mid), 1));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(area.adjusted(0, 0, -1, -1));
    paintAxes(painter, area);
}

void PlacementView::paintAxes(QPainter& painter, const QRectF& area) const
{
    const QPalette& pal = palette();
    const QFontMetrics fm(font());
    const auto& shape = m_checkpoint->tensors[m_tensor].shape;
    painter.setPen(pal.color(QPalette::Text));
    if (m_geometry.dims == 0) {
        painter.drawText(QRectF(area.left(), area.top() - fm.height() - 6, 400, fm.height()), Qt::AlignLeft,
                         tr("0-dim tensor (one element)"));
        return;
    }

    // Column axis: title centred above, tick labels at piece boundaries where there is room.
    const QString colTitle = m_geometry.colAxis + QStringLiteral(" · ") + QString::number(m_geometry.cols);
    QFont bold = font();
    bold.setBold(true);
    painter.setFont(bold);
    painter.drawText(QRectF(area.left(), 2, area.width(), fm.height()), Qt::AlignHCenter, colTitle);
    painter.setFont(font());
    std::set<std::int64_t> colTicks { 0, m_geometry.cols };
    std::set<std::int64_t> rowTicks { 0, m_geometry.rows };
    for (const auto& entry : m_geometry.pieces) {
        for (const auto& rect : entry.rects) {
            colTicks.insert(rect.col0);
            if (entry.rects.size() <= 64)
                rowTicks.insert(rect.row0);
        }
    }
    const qreal cols = std::max<qreal>(1, qreal(m_geometry.cols));
    const qreal rows = std::max<qreal>(1, qreal(m_geometry.rows));
    qreal lastRight = -1e9;
    const qreal tickY = kTopMargin - fm.height() - 4;
    for (const auto tick : colTicks) {
        const qreal x = area.left() + area.width() * qreal(tick) / cols;
        const QString text = QString::number(tick);
        const qreal w = fm.horizontalAdvance(text);
        qreal left = std::clamp(x - w / 2, area.left() - w / 2, area.right() - w / 2);
        if (left < lastRight + 6)
            continue;
        painter.drawLine(QPointF(x, area.top() - 4), QPointF(x, area.top()));
        painter.drawText(QRectF(left, tickY, w + 1, fm.height()), Qt::AlignCenter, text);
        lastRight = left + w;
    }
    if (m_geometry.dims == 1) {
        painter.drawText(QRectF(4, area.top(), kLeftMargin - 10, area.height()), Qt::AlignRight | Qt::AlignVCenter,
                         tr("1-D"));
        return;
    }

    // Row axis: title rotated on the left, tick labels right-aligned against the drawing.
    QString rowTitle = m_geometry.rowAxis + QStringLiteral(" · ") + QString::number(m_geometry.rows);
    if (m_geometry.dims > 2)
        rowTitle += QStringLiteral(" (") + shapeText(tessera::Shape(shape.begin(), shape.end() - 1)) + QLatin1Char(')');
    painter.save();
    painter.translate(2, area.center().y());
    painter.rotate(-90);
    painter.setFont(bold);
    painter.drawText(QRectF(-area.height() / 2, 0, area.height(), fm.height()), Qt::AlignHCenter, rowTitle);
    painter.restore();
    qreal lastBottom = -1e9;
    for (const auto tick : rowTicks) {
        const qreal y = area.top() + area.height() * qreal(tick) / rows;
        const qreal top = std::clamp(y - fm.height() / 2.0, area.top() - fm.height() / 2.0, area.bottom() - fm.height() / 2.0);
        if (top < lastBottom + 2)
            continue;
        painter.drawLine(QPointF(area.left() - 4, y), QPointF(area.left(), y));
        painter.drawText(QRectF(fm.height() + 4, top, kLeftMargin - fm.height() - 12, fm.height()),
                         Qt::AlignRight | Qt::AlignVCenter, QString::number(tick));
        lastBottom = top + fm.height();
    }
}

QString PlacementView::describePiece(int pieceIndex) const
{
    if (m_tensor < 0 || pieceIndex < 0)
        return {};
    const auto& tensor = m_checkpoint->tensors[m_tensor];
    if (pieceIndex >= static_cast<int>(tensor.pieces.size()))
        return {};
    const auto& piece = tensor.pieces[pieceIndex];
    QStringList offsets, sizes;
    for (const auto v : piece.offsets)
        offsets << QString::number(v);
    for (const auto v : piece.shape)
        sizes << QString::number(v);
    QString who = piece.rank >= 0 ? tr("rank %1").arg(piece.rank) : tr("piece %1").arg(pieceIndex);
    if (const auto grid = megatronRank(*m_checkpoint, piece.rank))
        who += QStringLiteral(" (%1)").arg(grid->coordinates(m_checkpoint->parallel));
    QString text = who + QStringLiteral(" · ") + roleText(piece.role) + QLatin1Char('\n')
        + tr("box %1 — offsets (%2), shape (%3)")
              .arg(boxText(piece.offsets, piece.shape), offsets.join(QStringLiteral(", ")), sizes.join(QStringLiteral(", ")))
        + QLatin1Char('\n');
    // A split's plan has no bytes yet: its pieces say which file and key they will be written to.
    if (tessera::isSplitPlacementPreview(*m_checkpoint))
        text += tr("to be written to %1 as %2, %3 %4")
                    .arg(qs(piece.file), qs(piece.storageRecord), bytesText(pieceBytes(piece)), storedText(piece));
    else
        text += tr("file %1, data at byte %2, %3 %4")
                    .arg(fileNameUnder(piece.file, m_checkpoint->root))
                    .arg(piece.dataOffset)
                    .arg(bytesText(pieceBytes(piece)), storedText(piece));
    for (const auto& entry : m_geometry.pieces) {
        if (entry.piece != pieceIndex || entry.replicas.empty())
            continue;
        QStringList copies;
        for (const int r : entry.replicas)
            copies << tr("rank %1 (%2)").arg(tensor.pieces[r].rank).arg(fileNameUnder(tensor.pieces[r].file, m_checkpoint->root));
        text += QLatin1Char('\n') + tr("replicas: %1").arg(copies.join(QStringLiteral(", ")));
    }
    return text;
}

QString PlacementView::hoverText(const QPointF& pos, int* pieceIndex) const
{
    *pieceIndex = -1;
    const QRectF area = drawingRect();
    if (m_tensor < 0 || !area.contains(pos))
        return {};
    const auto col = static_cast<std::int64_t>((pos.x() - area.left()) / area.width() * qreal(m_geometry.cols));
    const auto row = static_cast<std::int64_t>((pos.y() - area.top()) / area.height() * qreal(m_geometry.rows));
    const QString where = m_geometry.dims >= 2 ? tr("row %1, column %2").arg(row).arg(col) : tr("element %1").arg(col);
    for (const auto& rect : m_geometry.overlaps) {
        if (rect.contains(row, col))
            return tr("overlap: several pieces hold rows %1–%2, columns %3–%4")
                .arg(rect.row0).arg(rect.row1 - 1).arg(rect.col0).arg(rect.col1 - 1);
    }
    for (const auto& rect : m_geometry.gaps) {
        if (rect.contains(row, col))
            return tr("gap: no piece holds rows %1–%2, columns %3–%4")
                .arg(rect.row0).arg(rect.row1 - 1).arg(rect.col0).arg(rect.col1 - 1);
    }
    const int entry = m_geometry.pieceAt(row, col);
    if (entry < 0)
        return where;
    *pieceIndex = m_geometry.pieces[entry].piece;
    return describePiece(*pieceIndex) + QLatin1Char('\n') + where;
}

void PlacementView::mouseMoveEvent(QMouseEvent* event)
{
    int piece = -1;
    const QString text = hoverText(event->position(), &piece);
    if (piece != m_hovered) {
        m_hovered = piece;
        update();
    }
    Q_EMIT hoverChanged(piece, text);
    QWidget::mouseMoveEvent(event);
}

void PlacementView::leaveEvent(QEvent* event)
{
    if (m_hovered != -1) {
        m_hovered = -1;
        update();
    }
    Q_EMIT hoverChanged(-1, {});
    QWidget::leaveEvent(event);
}

bool PlacementView::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        int piece = -1;
        const QString text = hoverText(help->pos(), &piece);
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QWidget::event(event);
}

} // namespace tessera::ui
