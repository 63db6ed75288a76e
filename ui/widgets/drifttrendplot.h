// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "plots/qcp.h"

#include <QPointer>

namespace tessera::ui {

class DriftTableModel;

/// One tensor over every saved step of a run: its norm ‖W‖ (left axis) and its relative change from the step
/// before (right axis, logarithmic); a step where it holds NaN or Inf is a red line labelled so, and the step the
/// heatmap shows is marked. A QCustomPlot, so it saves as PNG, SVG or PDF.
class DriftTrendPlot : public QCustomPlot {
    Q_OBJECT
public:
    explicit DriftTrendPlot(QWidget* parent = nullptr);
    ~DriftTrendPlot() override;

    /// Plots row `row` of `model` (a tensor); -1 clears the plot.
    void setTensor(const DriftTableModel* model, int row);
    QString tensor() const { return m_tensor; }
    /// Marks step index `step` (the heatmap's); -1 for none.
    void markStep(int step);
    /// Steps drawn as NaN/Inf (for tests).
    int nonFiniteMarks() const { return m_nonFiniteMarks; }

protected:
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    void redraw();
    /// The title: the tensor's name, cut in the middle when the plot is narrower than it, or what to do.
    void showTitle();
    void applyPalette();

    QPointer<const DriftTableModel> m_model;
    int m_row = -1;
    int m_step = -1;
    QString m_tensor;
    QCPTextElement* m_title;
    int m_nonFiniteMarks = 0;
};

} // namespace tessera::ui
