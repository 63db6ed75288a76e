// SPDX-License-Identifier: GPL-3.0-or-later
#include "readmewindow.h"

#include <QApplication>
#include <QDesktopServices>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QScrollBar>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

namespace tessera::ui {

namespace {
/// Where ui/CMakeLists.txt puts README.md and the screenshots it shows (under their paths in the repository).
const QLatin1String kReadmeRoot(":/tessera/readme/");
constexpr int kMaxImageWidth = 960;

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
    resize(1060, 760);
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
