// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QWidget>

class QTextBrowser;

namespace tessera::ui {

class PlanJob;

/// What `tessera inspect` says about the checkpoint: layout, parallel configuration, sizes, notes, problems.
class SummaryPage : public QWidget {
    Q_OBJECT
public:
    explicit SummaryPage(QWidget* parent = nullptr);
    ~SummaryPage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    /// Shows why a scan failed instead of a summary.
    void showError(const QString& path, const QString& message);
    /// The HTML shown (for tests).
    QString html() const;
    /// What a merge would refuse is being found (prepareMerge() on a worker).
    bool isCheckingMerge() const;

protected:
    void changeEvent(QEvent* event) override;

private:
    void render();
    void checkMerge();

    CheckpointPtr m_checkpoint;
    QString m_mergeRefusal; ///< why `tessera merge` with the default flags would refuse m_checkpoint; empty if not
    PlanJob* m_planner;
    QTextBrowser* m_text;
};

} // namespace tessera::ui
