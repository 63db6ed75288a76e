// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/statisticsjob.h"

#include <QDialog>

class QCustomPlot;
class QLabel;

namespace tessera::ui {

/// One tensor on its own, with no B: min, max, mean, std, zeros, NaN, ±Inf, missing elements and a histogram of
/// its values, computed on a worker. Opened from the shard tree (Statistics…) and the Placement page; showing
/// another tensor supersedes the computation. Not modal, so the tree stays usable beside it.
class StatisticsWindow : public QDialog {
    Q_OBJECT
public:
    explicit StatisticsWindow(QWidget* parent = nullptr);
    ~StatisticsWindow() override;

    void showTensor(CheckpointPtr checkpoint, int tensorIndex);
    StatisticsJob* job() const { return m_job; }
    /// The statistics panel's text (tests).
    QString statsText() const;
    QString titleText() const;

Q_SIGNALS:
    /// A tensor's statistics are shown (or its error).
    void shown(const QString& tensor);

private:
    void onFinished(const TensorStatisticsPtr& statistics);

    StatisticsJob* m_job;
    QLabel* m_title;
    QLabel* m_stats;
    QCustomPlot* m_histogram;
    QString m_name;
};

} // namespace tessera::ui
