// SPDX-License-Identifier: GPL-3.0-or-later
#include "readmewindow.h"

#include <QApplication>
#include <QDesktopServices>
#include <QFile>
#include <QImage>
#include <QKeySequence>
#include <QLabel>
#include <QScreen>
#include <QScrollBar>
#include <QShortcut>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>

namespace tessera::ui {

namespace {
/// Where ui/CMakeLists.txt puts README.md and the screenshots it shows (under their paths in the repository).
const QLatin1String kReadmeRoot(":/tessera/readme/");
constexpr int kMaxImageWidth = 960;
/// The size the window opens at on a large screen; a smaller one gets its available area less a margin.
constexpr QSize kPreferredSize(1060, 760);

/// A text browser that finds the README's images in the resources and fits wide screenshots to a readable width.
class ReadmeBrowser : public QTextBrowser {
public:
    using QTextBrowser::QTextBrowser;

    QVariant loadResource(int type, const QUrl& name) override
    {
        if (type != QTextDocument::ImageResource || !name.isRelative())
            return QTextBrowser::loadResource(type, name);
        QImage image(kReadmeRoot + name.path());
        if (image.isNull())
            return QTextBrowser::loadResource(type, name);
        if (image.width() > kMaxImageWidth)
            image = image.scaledToWidth(kMaxImageWidth, Qt::SmoothTransformation);
        return image;
    }
};
} // namespace

QList<ReadmeWindow::Section> ReadmeWindow::sections()
{
    QFile file(kReadmeRoot + QStringLiteral("README.md"));
    if (!file.open(QIODevice::ReadOnly))
        return {};
    const QStringList lines = QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'));
    QList<Section> out{ { tr("Introduction"), {} } };
    bool inCode = false;
    for (const QString& line : lines) {
        if (line.startsWith(QLatin1String("```")))
            inCode = !inCode;
        if (!inCode && line.startsWith(QLatin1String("## "))) {
            out.append({ line.mid(3).trimmed(), {} });
        }
        out.last().markdown += line + QLatin1Char('\n');
    }
    return out;
}

QStringList ReadmeWindow::sectionTitles()
{
    QStringList titles;
    for (const Section& section : sections())
        titles << section.title;
    return titles;
}

ReadmeWindow::ReadmeWindow(QWidget* parent)
    : QWidget(parent, Qt::Window), m_navigation(new QLabel(this)), m_text(new ReadmeBrowser(this))
{
    setWindowTitle(tr("Tessera %1 — Read Me").arg(QApplication::applicationVersion()));
    m_navigation->setWordWrap(true);
    m_navigation->setTextInteractionFlags(Qt::LinksAccessibleByMouse | Qt::LinksAccessibleByKeyboard);
    m_text->setOpenLinks(false);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_navigation);
    layout->addWidget(m_text, 1);
    connect(m_navigation, &QLabel::linkActivated, this, [this](const QString& link) { showSection(link.toInt()); });
    // Links to the web open in the browser; the README's links to other files of the repository have nothing to
    // open in an installed program.
    connect(m_text, &QTextBrowser::anchorClicked, this, [](const QUrl& url) {
        if (url.scheme() == QLatin1String("http") || url.scheme() == QLatin1String("https"))
            QDesktopServices::openUrl(url);
    });
    // Esc and Ctrl+W close it, as they close a help window anywhere else.
    for (const QKeySequence& keys : { QKeySequence(Qt::Key_Escape), QKeySequence(QKeySequence::Close) })
        connect(new QShortcut(keys, this), &QShortcut::activated, this, &QWidget::close);
    fitToScreen();
}

void ReadmeWindow::fitToScreen()
{
    // A window taller than the screen hides its own title bar or bottom (a 1280×720 laptop): open inside the
    // screen it will appear on, with room for the window frame.
    const QScreen* shownOn = parentWidget() ? parentWidget()->screen() : screen();
    if (!shownOn) {
        resize(kPreferredSize);
        return;
    }
    const QRect available = shownOn->availableGeometry();
    resize(std::min(kPreferredSize.width(), available.width() * 9 / 10),
           std::min(kPreferredSize.height(), available.height() * 9 / 10));
}

ReadmeWindow::~ReadmeWindow() = default;

void ReadmeWindow::showSection(int index)
{
    const QList<Section> all = sections();
    if (index < 0 || index >= all.size())
        return;
    m_current = index;
    QStringList links;
    for (int i = 0; i < all.size(); ++i)
        links << (i == index ? QStringLiteral("<b>%1</b>").arg(all[i].title.toHtmlEscaped())
                             : QStringLiteral("<a href='%1'>%2</a>").arg(i).arg(all[i].title.toHtmlEscaped()));
    m_navigation->setText(links.join(QStringLiteral(" · ")));
    m_text->setMarkdown(all[index].markdown);
    m_text->verticalScrollBar()->setValue(0);
}

QString ReadmeWindow::currentMarkdown() const
{
    const QList<Section> all = sections();
    return m_current >= 0 && m_current < all.size() ? all[m_current].markdown : QString();
}

} // namespace tessera::ui
