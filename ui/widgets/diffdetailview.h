// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "compare/tensor_diff.h"

#include <QWidget>

class QCustomPlot;
class QCPColorMap;
class QCPGraph;
class QLabel;
class QScrollArea;
class QTableWidget;

namespace tessera::ui {

/// The detail of one tensor of a diff: the statistics of A and B side by side, their overlaid value histograms,
/// the histogram of a − b, heatmaps of a 2-D slice of A, B (one colour scale) and |A − B|, and the elements with
/// the largest |a − b|. Only displays what the core computed (tessera::diffTensorDetail).
class DiffDetailView : public QWidget {
    Q_OBJECT
public:
    explicit DiffDetailView(QWidget* parent = nullptr);
    ~DiffDetailView() override;

    /// Shows `detail`; in an `updateView` (a LoRA update: a fused model against its base) a differing weight is
    /// labelled "updated", what its adapter adds, not a failure.
    void setDetail(const tessera::TensorDiffDetail& detail, bool updateView = false);
    /// The title line as shown (tests).
    QString titleText() const;
    /// Empties the plots and shows `message` instead (no selection, computing, an error).
    void showMessage(const QString& message);
    /// The tensor shown, empty when none.
    QString tensorName() const { return m_name; }
    /// Rows of the worst-elements table (tests).
    int worstRowCount() const;
    QString worstIndexText(int row) const;
    /// The cells the A, B and |A − B| colour maps draw (columns, rows), for tests; (0, 0) when none.
    QSize heatmapCells() const;
    /// Cells of map `map` (0: A, 1: B, 2: |A − B|) painted as missing, for tests.
    int missingCellCount(int map = 0) const;
    /// The statistics panel's text (tests).
    QString statsText() const;

protected:
    void changeEvent(QEvent* event) override;

private:
    QFont boldFont() const;
    void setUpTexts();
    /// Values: A filled, B as a dashed outline on top, so equal distributions read as one shape.
    void setUpValuesPlot();
    /// Differences on a log scale: the spike of equal elements at 0 would flatten everything else.
    void setUpDifferencesPlot();
    /// Heatmaps of A, B and |A − B|, with the rings around the worst elements.
    void setUpHeatmaps();
    /// The statistics and the worst elements on the left, the histograms and heatmaps on the right.
    void layOut();
    void applyPalette();
    void clearPlots();
    /// Shows the statistics and worst elements (`statistics`) and the plots (`plots`), or hides them.
    void showBody(bool statistics, bool plots);
    void plotHistograms(const tessera::TensorDiffDetail& detail);
    void plotHeatmaps(const tessera::TensorDiffDetail& detail);
    QString statsHtml(const tessera::TensorDiff& t) const;

    QString m_name;
    QLabel* m_title;
    QLabel* m_stats;
    QScrollArea* m_statsScroll;
    QTableWidget* m_worst;
    QLabel* m_worstTitle;
    QCustomPlot* m_values;
    QCustomPlot* m_differences;
    QCustomPlot* m_heatmaps;
    QCPGraph* m_worstMarks = nullptr;
    QLabel* m_heatmapNote;
    QWidget* m_leftBox = nullptr; ///< the statistics and the worst elements
    QWidget* m_heatBox = nullptr; ///< the heatmaps and their note
    QList<QCPColorMap*> m_maps;        ///< A, B, |A − B|
    QList<QCPColorMap*> m_missingMaps; ///< over each: the cells a side lacks elements of
};

} // namespace tessera::ui
