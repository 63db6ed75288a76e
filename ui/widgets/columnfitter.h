// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QList>
#include <QObject>

class QAbstractItemView;
class QHeaderView;
class QWidget;

namespace tessera::ui {

/// Sizes the name columns of a view to the width its other columns leave, shared equally, as
/// QHeaderView::Stretch would, but keeps them Interactive: once the user drags one (or double-clicks its edge
/// to fit the longest name), the widths are the user's. Each column gets at least `preferred` pixels, or the
/// whole viewport when that is narrower (a narrow pane shows the names, the other columns a scroll away) less the
/// columns kept beside them (setKeptInView: the tree's Size), which stay whole.
class ColumnFitter : public QObject {
    Q_OBJECT
public:
    ColumnFitter(QAbstractItemView* view, QHeaderView* header, QList<int> columns, int preferred);

    /// Fits now (after the model or the other columns changed); does nothing once the user sized a column.
    void fit();
    /// Columns that stay in view beside the names however narrow the pane (as long as the names keep a third of it).
    void setKeptInView(QList<int> columns);
    /// No name column narrower than this: the width its names need once shortened to the parts that tell them apart
    /// (compactTensorName()), so none is cut; the other columns go a scroll away first.
    void setMinimumWidth(int width);
    bool userSized() const { return m_userSized; }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    QWidget* m_viewport;
    QHeaderView* m_header;
    QList<int> m_columns;
    QList<int> m_keptInView;
    int m_preferred;
    int m_minimum = 0;
    bool m_fitting = false;
    bool m_userSized = false;
};

} // namespace tessera::ui
