// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/trainingjob.h"

#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;
class QTextBrowser;
class QToolButton;

namespace tessera::ui {

class TensorNameDelegate;
class TrainingNormsModel;

/// What `tessera inspect` says of a checkpoint's training state: the optimizer, its hyper-parameters, the Adam
/// step, scheduler, RNG and dataloader state, whether every rank has it (each problem in red), and, computed on a
/// worker (Compute Norms, or at once for a small optimizer), each parameter's norms of exp_avg and √exp_avg_sq in
/// a sortable table: which layers are still moving.
class TrainingPage : public QWidget {
    Q_OBJECT
public:
    explicit TrainingPage(QWidget* parent = nullptr);
    ~TrainingPage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    /// Starts reading the norms of the loaded state; false when it has no optimizer state.
    bool computeNorms();
    void cancel();
    /// The state or its norms are being read.
    bool isBusy() const;
    const TrainingStatePtr& state() const { return m_state; }
    TrainingJob* job() const { return m_job; }
    TrainingNormsModel* model() const { return m_model; }
    QTableView* tableView() const { return m_table; }
    QPushButton* computeButton() const { return m_compute; }
    /// The facts shown (for tests).
    QString html() const;

    /// Optimizers whose moments take no more bytes than this have their norms read as soon as they are loaded.
    static constexpr std::uint64_t kAutomaticNormsBytes = 256ull << 20;

Q_SIGNALS:
    void stateShown();
    void normsShown();

protected:
    void changeEvent(QEvent* event) override;

private:
    void onStateRead(const TrainingStatePtr& state);
    void onNormsComputed(const TrainingNormsPtr& norms);
    void onFailed(const QString& message);
    void setRunning(bool running);
    void renderFacts();
    QString factsHtml() const;
    QString problemsHtml() const;

    CheckpointPtr m_checkpoint;
    TrainingStatePtr m_state;
    QString m_error;
    TrainingJob* m_job;
    QTextBrowser* m_facts;
    QPushButton* m_compute;
    QProgressBar* m_progress;
    QToolButton* m_cancel;
    QLabel* m_status;
    QTableView* m_table;
    TrainingNormsModel* m_model;
    QSortFilterProxyModel* m_proxy;
    TensorNameDelegate* m_names;
};

} // namespace tessera::ui
