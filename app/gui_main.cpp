// SPDX-License-Identifier: GPL-3.0-or-later
#include "gui_main.h"

#include "jobs/mappingjob.h"
#include "mainwindow.h"
#include "pages/diffpage.h"
#include "pages/mappingpage.h"
#include "pages/mergepage.h"
#include "pages/runpage.h"
#include "pages/splitpage.h"
#include "pages/trainingpage.h"
#include "terminal_text.h"
#include "theme.h"

#include "io/number_text.h"

#include <QApplication>
#include <QDir>
#include <QSettings>
#include <QStandardPaths>
#include <QTimer>

#include <cstdio>

namespace tessera::app {

namespace {

/// The views' names as a list a sentence can hold: "tree, placement, … or diff".
QString viewList(const QString& lastJoin)
{
    QStringList names = tessera::ui::viewNames();
    const QString last = names.takeLast();
    return names.join(QStringLiteral(", ")) + lastJoin + last;
}

QString guiUsage()
{
    return QStringLiteral(R"(usage: tessera gui [PATH] [--screenshot FILE.png] [--view VIEW] [--reference DIR]

Open the workbench, optionally with the checkpoint at PATH loaded.

options:
  --screenshot FILE.png   render the window with PATH loaded (without PATH: the welcome page), write the PNG
                          and exit
  --view VIEW             view to show: %1
  --reference DIR         a Hugging Face folder to compare with (merge test, diff)
  --size WxH              with --screenshot: the window size (default 1440x880), e.g. 1280x720
  -h, --help              show this help and exit
)")
        .arg(viewList(QStringLiteral(" or ")));
}

bool takeValue(const QStringList& args, int& i, const QString& flag, QString& value, QString& error)
{
    const QString arg = args[i];
    if (arg.startsWith(flag + QLatin1Char('='))) {
        value = arg.mid(flag.size() + 1);
        return true;
    }
    if (arg != flag)
        return false;
    if (i + 1 >= args.size()) {
        error = QStringLiteral("%1 needs a value").arg(flag);
        return true;
    }
    value = args[++i];
    return true;
}

} // namespace

GuiOptions parseGuiArgs(const QStringList& args)
{
    GuiOptions options;
    for (int i = 0; i < args.size() && options.error.isEmpty(); ++i) {
        QString arg = args[i];
        if (arg.startsWith(QLatin1String("--")))
            arg.replace(QLatin1Char('_'), QLatin1Char('-'));
        QStringList normalized = args;
        normalized[i] = arg;
        if (arg == QLatin1String("-h") || arg == QLatin1String("--help")) {
            options.help = true;
        } else if (takeValue(normalized, i, QStringLiteral("--screenshot"), options.screenshot, options.error)
                   || takeValue(normalized, i, QStringLiteral("--view"), options.view, options.error)
                   || takeValue(normalized, i, QStringLiteral("--reference"), options.reference, options.error)
                   || takeValue(normalized, i, QStringLiteral("--size"), options.size, options.error)) {
        } else if (arg.startsWith(QLatin1Char('-'))) {
            options.error = QStringLiteral("unknown option '%1'").arg(arg);
        } else if (options.path.isEmpty()) {
            options.path = arg;
        } else {
            options.error = QStringLiteral("unexpected argument '%1'").arg(arg);
        }
    }
    if (options.error.isEmpty() && !options.view.isEmpty() && !tessera::ui::viewFromName(options.view))
        options.error = QStringLiteral("unknown view '%1' (%2)").arg(options.view, viewList(QStringLiteral(", ")));
    if (options.error.isEmpty() && !options.size.isEmpty()) {
        // Whole numbers as every numeric option takes them (QString::toInt would also take "+1280" or " 720").
        const QStringList parts = options.size.split(QLatin1Char('x'));
        const auto w = parts.size() == 2 ? tessera::parseWholeNumber(parts[0].toStdString(), 8192) : std::nullopt;
        const auto h = parts.size() == 2 ? tessera::parseWholeNumber(parts[1].toStdString(), 8192) : std::nullopt;
        options.width = w ? static_cast<int>(*w) : 0;
        options.height = h ? static_cast<int>(*h) : 0;
        if (options.width < 320 || options.height < 240)
            options.error = QStringLiteral("--size must be WIDTHxHEIGHT, e.g. 1280x720 (got '%1')").arg(options.size);
    }
    return options;
}

namespace {

/// Without a display Qt would abort with a terse message; says what to do instead. Screenshots and tests set
/// QT_QPA_PLATFORM=offscreen and need no display.
bool haveDisplay()
{
    if (!qEnvironmentVariableIsEmpty("DISPLAY") || !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")
        || !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        return true;
    std::fputs("tessera: no display to open the workbench on (DISPLAY and WAYLAND_DISPLAY are not set).\n"
               "Run a headless command instead (tessera --help lists them), or set QT_QPA_PLATFORM=offscreen\n"
               "with --screenshot to render the workbench to a PNG.\n",
               stderr);
    return false;
}

/// The application's names, and its settings and colours: the user's, or for a screenshot fixed ones that
/// neither depend on nor change the user's saved window state, recent list or theme.
void setUpApplication(bool screenshot)
{
    QApplication::setApplicationName(QStringLiteral("Tessera"));
    QApplication::setOrganizationName(QStringLiteral("Tessera"));
    QApplication::setApplicationVersion(QStringLiteral(TESSERA_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("org.tessera.Tessera"));
    if (screenshot) {
        QSettings::setDefaultFormat(QSettings::IniFormat);
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope,
                           QDir::tempPath() + QStringLiteral("/tessera-screenshot-settings"));
        QSettings().clear();
        QApplication::setStyle(QStringLiteral("Fusion"));
    }
    tessera::ui::Theme::captureSystemPalette();
    if (screenshot)
        tessera::ui::Theme::apply(tessera::ui::Theme::Mode::Light);
    else
        tessera::ui::Theme::apply(tessera::ui::Theme::modeFromName(QSettings().value(QStringLiteral("theme")).toString()));
}

/// `--view diff --reference DIR` compares the loaded checkpoint with DIR as soon as it is loaded.
bool comparesOnLoad(tessera::ui::View view, const GuiOptions& options)
{
    return view == tessera::ui::View::Diff && !options.reference.isEmpty();
}

int runInteractive(QApplication& app, tessera::ui::MainWindow& window, const GuiOptions& options,
                   tessera::ui::View view)
{
    if (!options.view.isEmpty())
        window.showView(view);
    if (comparesOnLoad(view, options)) {
        auto* diff = window.diffPage();
        QObject::connect(&window, &tessera::ui::MainWindow::checkpointLoaded, diff, [diff] { diff->compare(); },
                         Qt::SingleShotConnection);
    }
    if (!options.path.isEmpty())
        window.openPath(options.path);
    return app.exec();
}

/// Writes the window to the screenshot's file; true when it was written.
bool saveScreenshot(tessera::ui::MainWindow& window, const GuiOptions& options)
{
    const bool saved = window.grab().save(options.screenshot);
    if (!saved)
        std::fprintf(stderr, "tessera gui: could not write %s\n", qPrintable(options.screenshot));
    return saved;
}

/// Renders the window once the checkpoint at PATH is loaded (and, for the diff, compared) and the view has
/// settled; the exit status says whether it was loaded and written.
int runScreenshot(QApplication& app, tessera::ui::MainWindow& window, const GuiOptions& options,
                  tessera::ui::View view)
{
    int exitCode = 1;
    auto capture = [&](bool loaded) {
        window.showView(view);
        // The right-hand pages need room; the tree view shows the tree wide.
        window.setTreeShare(tessera::ui::pageSpec(view).treeShare);
        // Let layouts and the tree settle before grabbing, and the workers the pages show finish (the name mapping,
        // then the merge and split plans that wait for it: the Summary says what the merge plan says; the training
        // state and a small optimizer's norms; a small run's drift), for at most ten seconds.
        auto* mapping = window.findChild<tessera::ui::MappingPage*>();
        auto* merge = window.findChild<tessera::ui::MergePage*>();
        auto* split = window.findChild<tessera::ui::SplitPage*>();
        auto* training = window.trainingPage();
        auto* run = window.runPage();
        auto busy = [mapping, merge, split, training, run] {
            return (mapping && mapping->job()->isBusy()) || (merge && merge->isPlanning())
                || (split && split->isPlanning()) || (training && training->isBusy()) || (run && run->isBusy());
        };
        auto* settle = new QTimer(&window);
        settle->setInterval(50);
        QObject::connect(settle, &QTimer::timeout, &window, [&, loaded, busy, settle, polls = 0, quiet = 0]() mutable {
            // Two idle polls in a row: what the last worker delivered has been laid out and drawn too.
            quiet = busy() ? 0 : quiet + 1;
            if (++polls < 200 && quiet < 2)
                return;
            settle->stop();
            exitCode = saveScreenshot(window, options) && loaded ? 0 : 1;
            app.quit();
        });
        settle->start();
    };
    auto* diff = window.diffPage();
    QObject::connect(&window, &tessera::ui::MainWindow::checkpointLoaded, &window, [&] {
        if (!comparesOnLoad(view, options)) {
            capture(true);
            return;
        }
        // The diff screenshot shows the finished comparison and the detail of the tensor it selects.
        window.showView(view);
        QObject::connect(diff, &tessera::ui::DiffPage::detailShown, &window, [&] { capture(true); },
                         Qt::SingleShotConnection);
        QObject::connect(
            diff, &tessera::ui::DiffPage::comparisonFailed, &window,
            [&](const QString& message) {
                std::fprintf(stderr, "tessera gui: diff: %s\n", cli::printableMessage(message.toStdString()).c_str());
                capture(false);
            },
            Qt::SingleShotConnection);
        if (!diff->compare())
            capture(false);
    });
    QObject::connect(&window, &tessera::ui::MainWindow::scanFailed, &window, [&](const QString& message) {
        std::fprintf(stderr, "tessera gui: %s\n", cli::printableMessage(message.toStdString()).c_str());
        capture(false);
    });
    if (options.path.isEmpty()) {
        // The welcome page: nothing to load, only the layout to settle.
        QTimer::singleShot(100, &window, [&] {
            exitCode = saveScreenshot(window, options) ? 0 : 1;
            app.quit();
        });
    } else {
        window.openPath(options.path);
    }
    app.exec();
    return exitCode;
}

} // namespace

int runGui(int argc, char** argv)
{
    QStringList args;
    for (int i = 1; i < argc; ++i)
        args << QString::fromLocal8Bit(argv[i]);
    if (!args.isEmpty() && args.first() == QLatin1String("gui"))
        args.removeFirst();
    const GuiOptions options = parseGuiArgs(args);
    if (options.help) {
        std::fputs(qPrintable(guiUsage()), stdout);
        return 0;
    }
    if (!options.error.isEmpty()) {
        std::fprintf(stderr, "tessera gui: %s\n\n%s", qPrintable(options.error), qPrintable(guiUsage()));
        return 2;
    }
    if (!haveDisplay())
        return 1;

    QApplication app(argc, argv);
    const bool screenshot = !options.screenshot.isEmpty();
    setUpApplication(screenshot);
    tessera::ui::MainWindow window;
    if (!options.reference.isEmpty())
        window.setReferenceDir(QDir(options.reference).absolutePath());
    if (screenshot)
        window.resize(options.width, options.height);
    window.show();
    const auto view = tessera::ui::viewFromName(options.view.isEmpty() ? QStringLiteral("tree") : options.view);
    return screenshot ? runScreenshot(app, window, options, *view) : runInteractive(app, window, options, *view);
}

} // namespace tessera::app
