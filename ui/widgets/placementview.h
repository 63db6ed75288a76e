// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "placementgeometry.h"

#include <QRectF>
#include <QWidget>

namespace tessera::ui {

/// Draws one tensor as a 2-D rectangle (leading dims folded into rows) with every piece's box filled in its
/// rank's colour and labelled; gaps and overlaps are red. Replicas are listed on the primary they copy.
/// Hovering shows the piece's offsets, shape and file.
class PlacementView : public QWidget {
    Q_OBJECT
public:
    explicit PlacementView(QWidget* parent = nullptr);
    ~PlacementView() override;

    /// Shows tensor `tensorIndex` of `checkpoint` (-1 or null clears the drawing).
    void setTensor(CheckpointPtr checkpoint, int tensorIndex);
    /// Outlines a piece (index into the tensor's pieces; -1 for none), e.g. the one selected in the tree.
    void setSelectedPiece(int pieceIndex);
    int hoveredPiece() const { return m_hovered; }
    const PlacementGeometry& geometry() const { return m_geometry; }
    /// Several lines about a piece: rank, role, box, file and byte offset, replicas.
    QString describePiece(int pieceIndex) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

Q_SIGNALS:
    /// The piece under the mouse changed (-1 when none); `text` describes it, or the gap/overlap under the mouse.
    void hoverChanged(int pieceIndex, const QString& text);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;
    bool event(QEvent* event) override;

private:
    QRectF drawingRect() const;
    QRectF toPixels(const QRectF& area, const FoldedRect& rect) const;
    QString hoverText(const QPointF& pos, int* pieceIndex) const;
    void paintAxes(QPainter& painter, const QRectF& area) const;
    QString pieceLabel(const PlacementGeometry::PieceRects& entry, bool brief) const;

    CheckpointPtr m_checkpoint;
    int m_tensor = -1;
    PlacementGeometry m_geometry;
    int m_selected = -1;
    int m_hovered = -1;
};

} // namespace tessera::ui
