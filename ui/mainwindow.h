// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "page_registry.h"

#include <QMainWindow>

#include <optional>
#include <vector>

class QAction;
class QLabel;
class QMenu;
class QProgressBar;
class QSplitter;
class QStackedWidget;
class QTabWidget;
class QToolButton;

namespace tessera::ui {

class DiffPage;
class TrainingPage;
class StatisticsWindow;
class MappingPage;
class MergePage;
class SplitPage;
class PlacementPage;
class ReadmeWindow;
class RunPage;
class ScanJob;
class SummaryPage;
class TreePage;
class WelcomePage;

/// The workbench: the shard tree on the left, the views of the selected checkpoint on the right (the pages of
/// page_registry.h, one tab each), scanning on a worker with progress and Cancel in the status bar.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    using View = tessera::ui::View;

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Scans `path` on a worker; the window stays responsive and shows progress. Replaces the loaded checkpoint
    /// when the scan succeeds.
    void openPath(const QString& path);
    /// Opens the bundled demo checkpoint (installed, or in the source tree) with its reference model set for the
    /// merge test and the diff; false when there is no demo.
    bool openDemo();
    void showView(View view);
    /// The Help menu's short guide and the list of every menu shortcut, as shown.
    QString guideHtml() const;
    QString shortcutsHtml() const;
    View currentView() const;
    /// A reference folder for the merge test and the diff (`--reference DIR`).
    void setReferenceDir(const QString& dir);
    CheckpointPtr checkpoint() const { return m_checkpoint; }
    bool isScanning() const;
    /// Share of the width given to the shard tree (0–1), e.g. for screenshots of a wide view.
    void setTreeShare(double share);

    /// The first page, shown until a checkpoint is opened.
    WelcomePage* welcomePage() const { return m_welcome; }
    bool isWelcomeShown() const;
    /// The Help menu's Read Me, at section `index` of ReadmeWindow::sectionTitles().
    void showReadme(int section);
    ReadmeWindow* readmeWindow() const { return m_readme; }
    TreePage* treePage() const { return m_tree; }
    PlacementPage* placementPage() const { return m_placement; }
    DiffPage* diffPage() const { return m_diff; }
    TrainingPage* trainingPage() const { return m_training; }
    RunPage* runPage() const { return m_run; }
    SplitPage* splitPage() const { return m_split; }
    /// The Statistics window, once a tensor's statistics were asked for; null before.
    StatisticsWindow* statisticsWindow() const { return m_statistics; }
    /// Opens the Statistics window on `tensorIndex` of the loaded checkpoint.
    void showStatistics(int tensorIndex);

Q_SIGNALS:
    void checkpointLoaded(const tessera::ui::CheckpointPtr& checkpoint);
    void scanFailed(const QString& message);

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    /// The pages of workbenchPages(), one tab each, and the typed pointers the window connects to.
    void createPages();
    void createActions();
    void openFolderDialog();
    void reload();
    void addRecent(const QString& path);
    void updateRecentMenu();
    void onScanStarted(const QString& path);
    void onScanProgress(int permille, const QString& text);
    void onScanFinished(const CheckpointPtr& checkpoint);
    void onScanFailed(const QString& message);
    void onScanCanceled();
    /// The status line of the loaded checkpoint: folder, layout, size, problems, and what a merge would refuse.
    void showLoadedStatus();
    /// The Merge page has a new plan: the tree and the status line say what a merge would refuse.
    void showMergeVerdict();
    void setScanning(bool scanning);
    void onCurrentTensorChanged(int tensorIndex, int pieceIndex);
    void selectInterestingTensor();
    void showAbout();
    void showGuide();
    void showShortcuts();
    void restoreSettings();
    void saveSettings() const;

    void showWorkbench();

    ScanJob* m_scan;
    CheckpointPtr m_checkpoint;
    QString m_loadedPath;
    QString m_mergeNote; ///< "a merge would refuse it …" of the loaded checkpoint's merge plan, or empty
    QStackedWidget* m_pages;
    WelcomePage* m_welcome;
    QSplitter* m_splitter;
    TreePage* m_tree;
    QTabWidget* m_tabs;
    std::vector<QWidget*> m_viewTabs; ///< each view's tab, in the order of workbenchPages()
    SummaryPage* m_summary;
    PlacementPage* m_placement;
    MappingPage* m_mapping;
    MergePage* m_merge;
    SplitPage* m_split;
    DiffPage* m_diff;
    TrainingPage* m_training;
    RunPage* m_run;
    StatisticsWindow* m_statistics = nullptr; ///< created when first asked for
    ReadmeWindow* m_readme = nullptr;         ///< created when first asked for
    QLabel* m_statusText;
    QProgressBar* m_progress;
    QToolButton* m_cancel;
    QMenu* m_recentMenu = nullptr;
    QAction* m_reloadAction = nullptr;
    QAction* m_cancelAction = nullptr;
};

} // namespace tessera::ui
