// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QTimer>
#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;
class QSplitter;
class QTableView;

namespace tessera::ui {

class ColumnFitter;
class TensorNameDelegate;

class FilterBar;
class MappingFilterProxy;
class MappingJob;
class MappingModel;
class RulesEditor;
struct MappingOutcome;

/// The mapping view: source name → Hugging Face name, rule, transform, shapes and status for every tensor,
/// coloured and filterable by status; a summary of the counts; and an editor for user rules (the file
/// `--param_mapping` takes) that re-evaluates the table on a worker as the text changes.
class MappingPage : public QWidget {
    Q_OBJECT
public:
    explicit MappingPage(QWidget* parent = nullptr);
    ~MappingPage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    /// The mapping shared with the merge panel.
    MappingJob* job() const { return m_job; }
    MappingModel* model() const { return m_model; }
    MappingFilterProxy* proxy() const { return m_proxy; }
    RulesEditor* rulesEditor() const { return m_editor; }
    QComboBox* statusCombo() const { return m_status; }
    FilterBar* filterBar() const { return m_filter; }
    QString summaryText() const;
    QString errorText() const;

    /// Replaces the editor text with the file's; an error message, or empty.
    QString loadRulesFile(const QString& path);
    /// Writes the editor text to `path`; an error message, or empty.
    QString saveRulesFile(const QString& path);
    /// Sends edited rules to the mapping now instead of after the typing pause.
    void flushRules();

Q_SIGNALS:
    void tensorActivated(int tensorIndex);

private:
    void pushRules();
    void onStarted();
    void onFinished(const MappingOutcome& outcome);
    void onSettingsChanged();
    void updateStatusCombo();
    void updateHeader();
    void updateRulesLabel();
    void chooseLoad();
    void chooseSave();

    MappingJob* m_job;
    MappingModel* m_model;
    MappingFilterProxy* m_proxy;
    QLabel* m_header;
    QLabel* m_summary;
    QComboBox* m_status;
    FilterBar* m_filter;
    QTableView* m_view;
    QSplitter* m_splitter;
    QWidget* m_rulesPanel;
    QLabel* m_rulesFile;
    QLabel* m_rulesState;
    RulesEditor* m_editor;
    QLabel* m_error;
    QPushButton* m_load;
    QPushButton* m_save;
    QTimer m_rulesDebounce;
    QString m_rulesName;
    QString m_root; ///< the folder of the checkpoint last set, to tell another checkpoint from a reload
    bool m_settingText = false;
    TensorNameDelegate* m_sourceNames;
    TensorNameDelegate* m_targetNames;
    ColumnFitter* m_nameColumns = nullptr;
};

} // namespace tessera::ui
