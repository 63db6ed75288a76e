// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "plots/qcp.h"

#include <QModelIndex>
#include <QPointer>
#include <QSizeF>

namespace tessera::ui {

class DriftGridModel;

/// The Run page's heatmap: DriftGridModel's cells (layers down, modules across) coloured by one step's relative
/// change on a logarithmic scale shared by every step, a cell holding NaN or Inf hatched in red and labelled, a
/// cell without a change (the first step) grey, the tensors outside the layers labelled in their own row. Hovering
/// a cell shows its values; clicking it says which (cellClicked). A QCustomPlot, so it saves as PNG, SVG or PDF.
class DriftHeatmap : public QCustomPlot {
    Q_OBJECT
public:
    explicit DriftHeatmap(QWidget* parent = nullptr);
    ~DriftHeatmap() override;

    void setModel(DriftGridModel* model);
    /// The cell under `pos` (widget coordinates); invalid outside the cells and on an empty one.
    QModelIndex cellAt(const QPointF& pos) const;
    /// The centre of `index`'s cell in widget coordinates.
    QPoint cellCenter(const QModelIndex& index) const;
    /// What the heatmap shows, e.g. "Relative change at step 30 (vs 20)".
    QString title() const;
    /// The cells drawn as NaN/Inf (for tests).
    int nonFiniteMarks() const { return m_nonFiniteMarks; }

Q_SIGNALS:
    void cellClicked(const QModelIndex& index);

protected:
    bool event(QEvent* event) override;
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    /// The axes, the colour range and the map's size, after the model was reset.
    void rebuild();
    /// The cells' colours, marks and labels of the step shown.
    /// Labels the colour scale with powers of ten when it spans decades, else with plain numbers.
    void setScaleTicks(bool decades);
    void refill();
    /// Each cell's colour (its relative change), or none.
    void fillCells();
    /// The rows' and columns' labels; returns the widest column label's width.
    int setTicks();
    void drawSeparators();
    /// NaN/Inf hatched in red and labelled; the "other" cells' names; the values when they all fit `cell`.
    void labelCells(const QSizeF& cell);
    void applyPalette();

    QPointer<DriftGridModel> m_model;
    QCPColorMap* m_map;
    QCPColorScale* m_scale;
    QCPTextElement* m_title;
    QPoint m_pressedAt;
    int m_nonFiniteMarks = 0;
};

} // namespace tessera::ui
