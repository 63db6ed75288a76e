// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "models/mergeverdict.h"

#include <QWidget>

class QTextBrowser;

namespace tessera::ui {

class MergePage;

/// What `tessera inspect` says about the checkpoint: layout, parallel configuration, sizes, notes, problems, and
/// what a merge would refuse as the Merge page's plan found it.
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
    /// Says what a merge would refuse from `merge`'s plan whenever it changes (the one prepareMerge() the Merge
    /// page runs with its flags and the Mapping view's rules).
    void followMergePlan(const MergePage* merge);
    void setMergeVerdict(const MergeVerdict& verdict);
    /// The merge plan of the loaded checkpoint is not on screen yet.
    bool isCheckingMerge() const;
    /// The sizes of the parallel configuration, alike for every layout ("TP 2 · PP 2"); empty when unknown.
    static QString parallelText(const tessera::CheckpointInfo& info);

protected:
    void changeEvent(QEvent* event) override;

private:
    void render();

    CheckpointPtr m_checkpoint;
    MergeVerdict m_verdict;
    const MergePage* m_merge = nullptr;
    QTextBrowser* m_text;
};

} // namespace tessera::ui
