// SPDX-License-Identifier: GPL-3.0-or-later
#include "mainwindow.h"

#include "confirm.h"
#include "democheckpoint.h"

#include "coreconvert.h"
#include <QScrollArea>
#include "jobs/comparejob.h"
#include "jobs/mergejob.h"
#include "jobs/scanjob.h"
#include "models/mergeverdict.h"
#include "pages/diffpage.h"
#include "pages/mappingpage.h"
#include "pages/mergepage.h"
#include "jobs/splitjob.h"
#include "pages/splitpage.h"
#include "pages/placementpage.h"
#include "pages/runpage.h"
#include "pages/summarypage.h"
#include "pages/trainingpage.h"
#include "pages/treepage.h"
#include "pages/welcomepage.h"
#include "widgets/readmewindow.h"
#include "widgets/statisticswindow.h"
#include "theme.h"

#include <QAbstractItemView>
#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QSettings>
#include <QScreen>
#include <QSet>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolButton>
#include <QTreeView>

#include <algorithm>
#include <functional>

namespace tessera::ui {

namespace {
constexpr int kMaxRecent = 10;

/// `page` in a scroll area that lets it keep its natural size when the window is smaller.
QScrollArea* scrollable(QWidget* page)
{
    auto* area = new QScrollArea;
    area->setWidget(page);
    area->setWidgetResizable(true);
    area->setFrameShape(QFrame::NoFrame);
    return area;
}

/// The page a tab shows: the tab itself, or the page in its scroll area.
QWidget* pageInTab(QWidget* tab)
{
    auto* area = qobject_cast<QScrollArea*>(tab);
    return area ? area->widget() : tab;
}

const QLatin1String kRecentKey("recentFolders");
} // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent)
    , m_scan(new ScanJob(this))
    , m_pages(new QStackedWidget(this))
    , m_welcome(new WelcomePage(this))
    , m_splitter(new QSplitter(Qt::Horizontal, this))
    , m_tree(new TreePage(this))
    , m_tabs(new QTabWidget(this))
    , m_statusText(new QLabel(this))
    , m_progress(new QProgressBar(this))
    , m_cancel(new QToolButton(this))
{
    setWindowTitle(QStringLiteral("Tessera"));
    setWindowIcon(QIcon(QStringLiteral(":/tessera/icons/tessera.svg")));
    setAcceptDrops(true);

    createPages();
    m_tabs->setDocumentMode(true);
    m_splitter->addWidget(m_tree);
    m_splitter->addWidget(m_tabs);
    m_splitter->setStretchFactor(0, 3);
    m_splitter->setStretchFactor(1, 2);
    m_splitter->setChildrenCollapsible(false);
    // The welcome page until a checkpoint is opened, then the workbench.
    m_pages->addWidget(m_welcome);
    m_pages->addWidget(m_splitter);
    setCentralWidget(m_pages);
    const auto demo = findDemoCheckpoint();
    m_welcome->setDemoPath(demo ? demo->checkpoint : QString());
    connect(m_welcome, &WelcomePage::openFolderRequested, this, &MainWindow::openFolderDialog);
    connect(m_welcome, &WelcomePage::openDemoRequested, this, &MainWindow::openDemo);
    connect(m_welcome, &WelcomePage::openPathRequested, this, &MainWindow::openPath);
    connect(m_welcome, &WelcomePage::guideRequested, this, &MainWindow::showGuide);
    connect(m_welcome, &WelcomePage::readmeRequested, this, [this] { showReadme(0); });

    m_progress->setRange(0, 1000);
    m_progress->setMaximumWidth(220);
    m_progress->setTextVisible(false);
    m_cancel->setText(tr("Cancel"));
    m_cancel->setToolTip(tr("Stop scanning (Esc)"));
    statusBar()->addWidget(m_statusText, 1);
    statusBar()->addPermanentWidget(m_progress);
    statusBar()->addPermanentWidget(m_cancel);
    setScanning(false);
    m_statusText->setText(tr("Open a checkpoint folder (Ctrl+O) or drop one here."));

    connect(m_scan, &ScanJob::started, this, &MainWindow::onScanStarted);
    connect(m_scan, &ScanJob::progress, this, &MainWindow::onScanProgress);
    connect(m_scan, &ScanJob::finished, this, &MainWindow::onScanFinished);
    connect(m_scan, &ScanJob::failed, this, &MainWindow::onScanFailed);
    connect(m_scan, &ScanJob::canceled, this, &MainWindow::onScanCanceled);
    connect(m_cancel, &QToolButton::clicked, m_scan, &ScanJob::cancel);
    connect(m_tree, &TreePage::currentTensorChanged, this, &MainWindow::onCurrentTensorChanged);
    connect(m_tree, &TreePage::statisticsRequested, this, &MainWindow::showStatistics);
    connect(m_placement, &PlacementPage::statisticsRequested, this, &MainWindow::showStatistics);
    // One mapping for both views: the merge plan writes exactly the table the Mapping view shows.
    m_merge->setMappingJob(m_mapping->job());
    // One answer to "would a merge refuse it?": the Merge page's plan, said by the Summary, tree and status bar.
    m_summary->followMergePlan(m_merge);
    connect(m_merge, &MergePage::planChanged, this, &MainWindow::showMergeVerdict);
    connect(m_merge, &MergePage::openInDiffRequested, this, [this](const tessera::DiffRequest& request) {
        showView(View::Diff);
        m_diff->compareRequest(request);
    });
    // Split writes the model the Merge page's flags make, in another layout.
    connect(m_merge, &MergePage::modelRequestChanged, this, [this] {
        m_split->setSource(m_merge->modelRequest(), m_merge->prepareContext(), m_checkpoint);
    });
    // A heatmap cell of the Run page: that tensor between the two steps.
    connect(m_run, &RunPage::diffRequested, this, [this](const tessera::DiffRequest& request, const QString& tensor) {
        showView(View::Diff);
        m_diff->compareRequest(request, tensor);
    });
    connect(m_run, &RunPage::openPathRequested, this, &MainWindow::openPath);
    connect(m_mapping, &MappingPage::tensorActivated, this, [this](int tensor) {
        m_tree->selectTensor(tensor);
        showView(View::Placement);
    });

    createActions();
    restoreSettings();
    m_pages->setCurrentWidget(m_welcome); // restoring the last view picks its tab, not the workbench
}

MainWindow::~MainWindow() = default;

void MainWindow::createActions()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    auto* open = file->addAction(tr("&Open Folder…"), this, &MainWindow::openFolderDialog);
    open->setShortcut(QKeySequence::Open);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    auto* demo = file->addAction(tr("Open the &Demo Checkpoint"), this, &MainWindow::openDemo);
    demo->setEnabled(findDemoCheckpoint().has_value());
    m_reloadAction = file->addAction(tr("&Reload"), this, &MainWindow::reload);
    m_reloadAction->setShortcuts({ QKeySequence(Qt::Key_F5), QKeySequence(Qt::CTRL | Qt::Key_R) });
    m_reloadAction->setEnabled(false);
    m_cancelAction = file->addAction(tr("&Cancel Scan"), m_scan, &ScanJob::cancel);
    m_cancelAction->setShortcut(Qt::Key_Escape);
    m_cancelAction->setEnabled(false);
    file->addSeparator();
    auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    auto* view = menuBar()->addMenu(tr("&View"));
    for (const auto& page : workbenchPages()) {
        auto* action = view->addAction(workbenchText(page.menuTitle), this, [this, w = page.view] { showView(w); });
        action->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_0 + page.shortcutDigit)));
    }
    view->addSeparator();
    auto* find = view->addAction(tr("&Filter Tensors"), m_tree, &TreePage::focusFilter);
    find->setShortcut(QKeySequence::Find);
    auto* themeMenu = view->addMenu(tr("&Colours"));
    auto* themes = new QActionGroup(this);
    for (const auto mode : { Theme::Mode::System, Theme::Mode::Light, Theme::Mode::Dark }) {
        const QString label = mode == Theme::Mode::System ? tr("Follow the &System")
            : mode == Theme::Mode::Light                   ? tr("&Light")
                                                           : tr("&Dark");
        auto* action = themeMenu->addAction(label, this, [mode] {
            Theme::apply(mode);
            QSettings().setValue(QStringLiteral("theme"), Theme::modeName(mode));
        });
        action->setCheckable(true);
        action->setChecked(Theme::current() == mode);
        themes->addAction(action);
    }

    auto* help = menuBar()->addMenu(tr("&Help"));
    auto* guide = help->addAction(tr("Quick &Guide"), this, &MainWindow::showGuide);
    guide->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("Keyboard &Shortcuts"), this, &MainWindow::showShortcuts);
    auto* readme = help->addMenu(tr("&Read Me"));
    const QStringList sections = ReadmeWindow::sectionTitles();
    for (int i = 0; i < sections.size(); ++i)
        readme->addAction(sections[i], this, [this, i] { showReadme(i); });
    readme->setEnabled(!sections.isEmpty());
    help->addSeparator();
    help->addAction(tr("&About Tessera"), this, &MainWindow::showAbout);
    help->addAction(tr("Version %1").arg(QApplication::applicationVersion()))->setEnabled(false);
    help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
    updateRecentMenu();
}

void MainWindow::openFolderDialog()
{
    const QStringList recent = QSettings().value(kRecentKey).toStringList();
    const QString start = !m_loadedPath.isEmpty() ? m_loadedPath : recent.value(0, QDir::homePath());
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open Checkpoint Folder"), start);
    if (!dir.isEmpty())
        openPath(dir);
}

bool MainWindow::openDemo()
{
    const auto demo = findDemoCheckpoint();
    if (!demo)
        return false;
    // The reference is set once the demo is loaded: loading another checkpoint clears the Merge page's options.
    const QString checkpoint = QFileInfo(demo->checkpoint).absoluteFilePath();
    connect(
        this, &MainWindow::checkpointLoaded, this,
        [this, checkpoint, reference = demo->reference] {
            if (m_loadedPath == checkpoint)
                setReferenceDir(reference);
        },
        Qt::SingleShotConnection);
    openPath(checkpoint);
    return true;
}

bool MainWindow::isWelcomeShown() const { return m_pages->currentWidget() == m_welcome; }

void MainWindow::showWorkbench() { m_pages->setCurrentWidget(m_splitter); }

void MainWindow::showReadme(int section)
{
    if (!m_readme)
        m_readme = new ReadmeWindow(this);
    m_readme->showSection(section);
    m_readme->show();
    m_readme->raise();
}

void MainWindow::openPath(const QString& path)
{
    const QString absolute = QFileInfo(path).absoluteFilePath();
    m_scan->start(absolute);
}

void MainWindow::reload()
{
    if (!m_loadedPath.isEmpty())
        openPath(m_loadedPath);
}

bool MainWindow::isScanning() const { return m_scan->isRunning(); }

void MainWindow::setTreeShare(double share)
{
    const int total = m_splitter->width() > 0 ? m_splitter->width() : width();
    const int tree = static_cast<int>(total * share);
    m_splitter->setSizes({ tree, total - tree });
}

void MainWindow::setScanning(bool scanning)
{
    m_progress->setVisible(scanning);
    m_cancel->setVisible(scanning);
    if (m_cancelAction)
        m_cancelAction->setEnabled(scanning);
}

void MainWindow::onScanStarted(const QString& path)
{
    setScanning(true);
    m_progress->setValue(0);
    m_statusText->setText(tr("Scanning %1…").arg(QDir::toNativeSeparators(path)));
}

void MainWindow::onScanProgress(int permille, const QString& text)
{
    m_progress->setValue(permille);
    if (!text.isEmpty())
        m_statusText->setText(tr("Scanning %1").arg(text));
}

void MainWindow::onScanFinished(const CheckpointPtr& checkpoint)
{
    setScanning(false);
    m_checkpoint = checkpoint;
    m_loadedPath = m_scan->path();
    m_reloadAction->setEnabled(true);
    showWorkbench();
    addRecent(m_loadedPath);
    m_summary->setCheckpoint(checkpoint);
    m_placement->setCheckpoint(checkpoint);
    m_mapping->setCheckpoint(checkpoint);
    m_merge->setCheckpoint(checkpoint);
    m_diff->setCheckpoint(checkpoint);
    m_training->setCheckpoint(checkpoint);
    m_run->setRun(m_loadedPath, checkpoint);
    m_tree->setCheckpoint(checkpoint);
    if (m_statistics) {
        // Its tensor belonged to the checkpoint before.
        m_statistics->job()->cancel();
        m_statistics->hide();
    }
    const QFileInfo info(m_loadedPath);
    setWindowTitle(tr("%1 — Tessera").arg(info.dir().dirName() + QLatin1Char('/') + info.fileName()));
    setWindowFilePath(m_loadedPath);
    m_mergeNote.clear();
    showLoadedStatus();
    if (currentView() == View::Placement)
        selectInterestingTensor();
    Q_EMIT checkpointLoaded(checkpoint);
}

void MainWindow::showLoadedStatus()
{
    if (!m_checkpoint)
        return;
    QString text = tr("%1 · %2 · %3 tensors · %4 · %5")
                       .arg(QDir::toNativeSeparators(m_loadedPath), qs(m_checkpoint->layout))
                       .arg(m_checkpoint->tensors.size())
                       .arg(bytesText(m_checkpoint->totalBytes()),
                            countText(static_cast<long long>(m_checkpoint->problems.size()), tr("problem"),
                                      tr("problems")));
    if (!m_mergeNote.isEmpty())
        text += QStringLiteral(" · ") + m_mergeNote;
    if (m_run->isRun()) // the folder opened is a run root: the Run view compares its steps
        text += QStringLiteral(" · ") + tr("a run of %1 saved steps (View → Run)").arg(m_run->steps().size());
    m_statusText->setText(text);
}

void MainWindow::showMergeVerdict()
{
    const MergeVerdict verdict = mergeVerdict(m_merge->prepared().get(), m_checkpoint);
    if (!verdict.known)
        return;
    const bool changed = verdict.shortText() != m_mergeNote;
    m_mergeNote = verdict.shortText();
    m_tree->setMergeNote(m_mergeNote);
    // The status line speaks of the loaded checkpoint unless a scan (or its outcome) holds it.
    if (changed && !m_scan->isRunning())
        showLoadedStatus();
}

void MainWindow::onScanFailed(const QString& message)
{
    setScanning(false);
    m_statusText->setText(tr("Could not read %1: %2").arg(QDir::toNativeSeparators(m_scan->path()), message));
    if (!m_checkpoint) {
        m_summary->showError(m_scan->path(), message);
        m_tabs->setCurrentWidget(m_summary);
        showWorkbench();
    }
    Q_EMIT scanFailed(message);
}

void MainWindow::onScanCanceled()
{
    setScanning(false);
    m_statusText->setText(tr("Scan canceled."));
}

void MainWindow::showStatistics(int tensorIndex)
{
    if (!m_checkpoint)
        return;
    if (!m_statistics)
        m_statistics = new StatisticsWindow(this);
    m_statistics->showTensor(m_checkpoint, tensorIndex);
    m_statistics->show();
    m_statistics->raise();
}

void MainWindow::onCurrentTensorChanged(int tensorIndex, int pieceIndex)
{
    m_placement->showTensor(tensorIndex, pieceIndex);
    // The Split page draws the same tensor's planned placement, when the model has it under this name.
    if (m_checkpoint && tensorIndex >= 0 && std::size_t(tensorIndex) < m_checkpoint->tensors.size()) {
        const QString name = qs(m_checkpoint->tensors[std::size_t(tensorIndex)].name);
        m_split->previewTensorNamed(name);
        // In the Diff view, the tree picks the row whose detail is shown (when the comparison has that tensor).
        if (currentView() == View::Diff)
            m_diff->selectTensor(name);
    }
}

void MainWindow::selectInterestingTensor()
{
    if (!m_checkpoint || m_placement->tensorIndex() >= 0)
        return;
    // Prefer a tensor with a problem, then a sharded matrix: the drawing is most telling for those.
    const auto& tensors = m_checkpoint->tensors;
    int pick = -1;
    for (const auto& problem : m_checkpoint->problems) {
        for (std::size_t t = 0; t < tensors.size() && pick < 0; ++t) {
            if (!problem.tensor.empty() && tensors[t].name == problem.tensor)
                pick = static_cast<int>(t);
        }
        if (pick >= 0)
            break;
    }
    for (std::size_t t = 0; t < tensors.size() && pick < 0; ++t) {
        if (tensors[t].shape.size() >= 2 && tensors[t].pieces.size() >= 2)
            pick = static_cast<int>(t);
    }
    if (pick < 0 && !tensors.empty())
        pick = 0;
    if (pick >= 0)
        m_tree->selectTensor(pick);
}

void MainWindow::showView(View view)
{
    showWorkbench();
    m_tabs->setCurrentWidget(m_viewTabs[static_cast<std::size_t>(view)]);
    if (view == View::Tree)
        m_tree->view()->setFocus();
    else if (view == View::Placement)
        selectInterestingTensor();
}

MainWindow::View MainWindow::currentView() const
{
    const auto at = std::find(m_viewTabs.begin(), m_viewTabs.end(), m_tabs->currentWidget());
    return at == m_viewTabs.end() ? View::Tree : workbenchPages()[std::size_t(at - m_viewTabs.begin())].view;
}

void MainWindow::setReferenceDir(const QString& dir)
{
    m_merge->setReferenceDir(dir);
    m_diff->setReferenceDir(dir);
}

void MainWindow::addRecent(const QString& path)
{
    QSettings settings;
    QStringList recent = settings.value(kRecentKey).toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    while (recent.size() > kMaxRecent)
        recent.removeLast();
    settings.setValue(kRecentKey, recent);
    updateRecentMenu();
}

void MainWindow::updateRecentMenu()
{
    if (!m_recentMenu)
        return;
    m_recentMenu->clear();
    const QStringList recent = QSettings().value(kRecentKey).toStringList();
    for (int i = 0; i < recent.size(); ++i) {
        const QString path = recent[i];
        auto* action = m_recentMenu->addAction(QDir::toNativeSeparators(path), this, [this, path] { openPath(path); });
        if (i < 9)
            action->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key(Qt::Key_1 + i)));
    }
    if (!recent.isEmpty()) {
        m_recentMenu->addSeparator();
        m_recentMenu->addAction(tr("Clear List"), this, [this] {
            QSettings().remove(kRecentKey);
            updateRecentMenu();
        });
    }
    m_recentMenu->setEnabled(!recent.isEmpty());
    m_welcome->setRecent(recent);
}

QString MainWindow::guideHtml() const
{
    QString views;
    for (const auto& page : workbenchPages())
        views += QStringLiteral("<li>") + workbenchText(page.guide) + QStringLiteral("</li>");
    return tr("<h3>Tessera in one minute</h3>"
              "<ol><li><b>Open</b> a checkpoint folder (File → Open Folder…, or drop it on the window): a verl "
              "actor/ or global_step_N folder, a DCP folder, Megatron mp_rank_* folders, or a Hugging Face model.</li>")
        + views
        + tr("</ol><p>Names too long for a column drop whole parts, never the layer, expert or projection; Ctrl+C (or "
             "right-click → Copy Name) copies them whole.</p>"
             "<p>Everything the workbench does, the <tt>tessera</tt> command line does too: the Merge page shows "
             "the equivalent command.</p>");
}

void MainWindow::createPages()
{
    // Each view's page, in its tab; the form pages scroll when the window is smaller than their forms (1280×720
    // and below).
    for (const auto& spec : workbenchPages()) {
        Q_ASSERT(static_cast<std::size_t>(spec.view) == m_viewTabs.size()); // the rows are in View's order
        QWidget* page = spec.create(this);
        QWidget* tab = spec.scrolls ? scrollable(page) : page;
        m_tabs->addTab(tab, workbenchText(spec.tabTitle));
        m_viewTabs.push_back(tab);
    }
    auto pageOf = [this](View view) { return pageInTab(m_viewTabs[static_cast<std::size_t>(view)]); };
    m_summary = qobject_cast<SummaryPage*>(pageOf(View::Tree));
    m_placement = qobject_cast<PlacementPage*>(pageOf(View::Placement));
    m_mapping = qobject_cast<MappingPage*>(pageOf(View::Mapping));
    m_merge = qobject_cast<MergePage*>(pageOf(View::Merge));
    m_split = qobject_cast<SplitPage*>(pageOf(View::Split));
    m_diff = qobject_cast<DiffPage*>(pageOf(View::Diff));
    m_training = qobject_cast<TrainingPage*>(pageOf(View::Training));
    m_run = qobject_cast<RunPage*>(pageOf(View::Run));
}

QString MainWindow::shortcutsHtml() const
{
    QString rows;
    std::function<void(const QMenu*, const QString&)> walk = [&](const QMenu* menu, const QString& path) {
        for (QAction* action : menu->actions()) {
            const QString name = path + action->text().remove(QLatin1Char('&'));
            if (action->menu())
                walk(action->menu(), name + QStringLiteral(" → "));
            else if (!action->shortcut().isEmpty())
                rows += QStringLiteral("<tr><td style='padding-right:16px'><b>%1</b></td><td>%2</td></tr>")
                            .arg(action->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped(), name.toHtmlEscaped());
        }
    };
    for (QAction* top : menuBar()->actions())
        if (top->menu())
            walk(top->menu(), top->text().remove(QLatin1Char('&')) + QStringLiteral(" → "));
    // The views' own shortcuts (Ctrl+C → Copy Name in the tree and the tables), listed once each.
    QSet<QString> listed;
    for (const QAbstractItemView* view : findChildren<QAbstractItemView*>())
        for (QAction* action : view->actions()) {
            const QString keys = action->shortcut().toString(QKeySequence::NativeText);
            const QString name = tr("In the tree and tables → %1").arg(action->text().remove(QLatin1Char('&')));
            if (keys.isEmpty() || listed.contains(keys + name))
                continue;
            listed.insert(keys + name);
            rows += QStringLiteral("<tr><td style='padding-right:16px'><b>%1</b></td><td>%2</td></tr>")
                        .arg(keys.toHtmlEscaped(), name.toHtmlEscaped());
        }
    return tr("<h3>Keyboard shortcuts</h3>") + QStringLiteral("<table>") + rows + QStringLiteral("</table>");
}

void MainWindow::showGuide() { QMessageBox::information(this, tr("Quick Guide"), guideHtml()); }

void MainWindow::showShortcuts() { QMessageBox::information(this, tr("Keyboard Shortcuts"), shortcutsHtml()); }

void MainWindow::showAbout()
{
    QMessageBox::about(
        this, tr("About Tessera"),
        tr("<h3>Tessera %1</h3>"
           "<p>Turns distributed PyTorch training checkpoints (FSDP, DCP, Megatron) into Hugging Face models, and "
           "shows why when it can't: every shard, rank and placement, with gaps and overlaps in red.</p>"
           "<p>No Python needed. Licensed under the GNU General Public License v3 or later.</p>"
           "<p>Built with Qt %2.</p>")
            .arg(QApplication::applicationVersion(), QString::fromLatin1(qVersion())));
}

void MainWindow::restoreSettings()
{
    QSettings settings;
    // The first window fits the screen (a 1280×720 laptop too); a geometry saved on a larger screen is brought
    // back inside this one.
    const QRect available = screen() ? screen()->availableGeometry() : QRect(0, 0, 1400, 860);
    resize(std::min(1400, available.width() * 19 / 20), std::min(860, available.height() * 19 / 20));
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    if (width() > available.width() || height() > available.height())
        resize(std::min(width(), available.width()), std::min(height(), available.height()));
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    if (!m_splitter->restoreState(settings.value(QStringLiteral("window/splitter")).toByteArray()))
        m_splitter->setSizes({ width() * 2 / 5, width() * 3 / 5 });
    m_tree->setGroupBy(settings.value(QStringLiteral("tree/groupBy")).toString() == QLatin1String("tensor")
                           ? ShardTreeModel::GroupBy::Tensor
                           : ShardTreeModel::GroupBy::File);
    if (const auto view = viewFromName(settings.value(QStringLiteral("view/current")).toString()))
        showView(*view);
}

void MainWindow::saveSettings() const
{
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/splitter"), m_splitter->saveState());
    settings.setValue(QStringLiteral("tree/groupBy"),
                      m_tree->groupBy() == ShardTreeModel::GroupBy::Tensor ? QStringLiteral("tensor") : QStringLiteral("file"));
    settings.setValue(QStringLiteral("view/current"), viewName(currentView()));
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (m_merge->job()->isRunning() || m_merge->compareJob()->isRunning()) {
        const bool merging = m_merge->job()->isRunning();
        if (!confirm(this, merging ? tr("Cancel the merge?") : tr("Cancel the test?"),
                     merging ? tr("A merge is running. Cancel it and close? Nothing of it is left in the output folder.")
                             : tr("A test against the reference is running. Cancel it and close?"))) {
            event->ignore();
            return;
        }
        m_merge->cancel(); // the jobs' destructors wait for their workers to stop
    }
    if (m_split->job()->isRunning()) {
        if (!confirm(this, tr("Cancel the split?"),
                     tr("A split is running. Cancel it and close? Nothing of it is left in the output folder."))) {
            event->ignore();
            return;
        }
        m_split->cancel();
    }
    m_scan->cancel();
    saveSettings();
    event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (!urls.isEmpty() && urls.first().isLocalFile())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (urls.isEmpty() || !urls.first().isLocalFile())
        return;
    openPath(urls.first().toLocalFile());
    event->acceptProposedAction();
}

} // namespace tessera::ui
