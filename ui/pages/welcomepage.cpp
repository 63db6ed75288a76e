// SPDX-License-Identifier: GPL-3.0-or-later
#include "welcomepage.h"

#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QFrame>
#include <QHBoxLayout>
#include <QIcon>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QStyle>
#include <QVBoxLayout>

#include <utility>

namespace tessera::ui {

namespace {
constexpr int kShownRecent = 8;

QLabel* heading(const QString& text, QWidget* parent)
{
    auto* label = new QLabel(text, parent);
    QFont font = label->font();
    font.setBold(true);
    font.setPointSizeF(font.pointSizeF() * 1.15);
    label->setFont(font);
    return label;
}

QLabel* note(const QString& text, QWidget* parent)
{
    auto* label = new QLabel(text, parent);
    label->setWordWrap(true);
    label->setForegroundRole(QPalette::PlaceholderText);
    return label;
}

/// A wide button with a title and, in a second line, the detail (a path); left-aligned like a link list.
QPushButton* entryButton(const QString& title, const QString& detail, QWidget* parent)
{
    auto* button = new QPushButton(parent);
    button->setText(detail.isEmpty() ? title : title + QLatin1Char('\n') + detail);
    button->setStyleSheet(QStringLiteral("QPushButton { text-align: left; padding: 6px 10px; }"));
    button->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    return button;
}
} // namespace

WelcomePage::WelcomePage(QWidget* parent)
    : QWidget(parent)
    , m_open(entryButton(tr("Open a Checkpoint Folder…"), tr("a verl actor/ or global_step_N folder, DCP, Megatron "
                                                             "mp_rank_* or torch_dist, or a Hugging Face model"),
                         this))
    , m_demo(entryButton(tr("Open the Demo Checkpoint"), tr("a verl FSDP2 run of 4 ranks, with the model it must "
                                                            "merge into as the reference"),
                         this))
    , m_demoNote(note({}, this))
    , m_recentLayout(new QVBoxLayout)
    , m_noRecent(note(tr("Folders you open are listed here."), this))
{
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    column->setContentsMargins(32, 28, 32, 28);
    column->setSpacing(10);

    auto* title = new QHBoxLayout;
    auto* icon = new QLabel(content);
    icon->setPixmap(QIcon(QStringLiteral(":/tessera/icons/tessera.svg")).pixmap(64, 64));
    title->addWidget(icon);
    auto* name = new QLabel(tr("<span style='font-size:xx-large; font-weight:600'>Tessera</span> %1")
                                .arg(QApplication::applicationVersion().toHtmlEscaped()),
                            content);
    title->addWidget(name);
    title->addStretch(1);
    column->addLayout(title);
    column->addWidget(note(tr("Turns the shards of a distributed training run into a complete, correct Hugging Face "
                              "model, and shows you why when it can't. Nothing is written until you merge or split."),
                           content));
    column->addSpacing(8);

    column->addWidget(heading(tr("Start"), content));
    m_open->setIcon(QIcon::fromTheme(QStringLiteral("document-open"), style()->standardIcon(QStyle::SP_DirOpenIcon)));
    m_demo->setIcon(style()->standardIcon(QStyle::SP_FileDialogInfoView));
    column->addWidget(m_open);
    column->addWidget(m_demo);
    column->addWidget(m_demoNote);
    column->addWidget(note(tr("Or drop a checkpoint folder anywhere on this window."), content));
    column->addSpacing(8);

    column->addWidget(heading(tr("Recent"), content));
    m_recentLayout->setSpacing(4);
    m_recentLayout->addWidget(m_noRecent);
    column->addLayout(m_recentLayout);
    column->addSpacing(8);

    column->addWidget(heading(tr("Learn"), content));
    auto* learn = note(tr("<a href='guide'>Quick guide</a> (F1) · <a href='readme'>Read Me</a>, also in the Help "
                          "menu · <tt>tessera --help</tt> and <tt>man tessera</tt> for the command line"),
                       content);
    learn->setTextInteractionFlags(Qt::LinksAccessibleByMouse | Qt::LinksAccessibleByKeyboard);
    connect(learn, &QLabel::linkActivated, this, [this](const QString& link) {
        if (link == QLatin1String("guide"))
            Q_EMIT guideRequested();
        else
            Q_EMIT readmeRequested();
    });
    column->addWidget(learn);
    column->addStretch(1);
    content->setMaximumWidth(760);

    // Centred in a wide window, scrolling in a small one.
    auto* centre = new QWidget;
    auto* row = new QHBoxLayout(centre);
    row->addStretch(1);
    row->addWidget(content, 4);
    row->addStretch(1);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(centre);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(scroll);

    connect(m_open, &QPushButton::clicked, this, &WelcomePage::openFolderRequested);
    connect(m_demo, &QPushButton::clicked, this, &WelcomePage::openDemoRequested);
    setDemoPath({});
}

WelcomePage::~WelcomePage() = default;

void WelcomePage::setRecent(const QStringList& folders)
{
    // Later, not now: the list may change while one of these buttons is delivering its click.
    for (QPushButton* button : std::as_const(m_recentButtons)) {
        button->hide();
        m_recentLayout->removeWidget(button);
        button->deleteLater();
    }
    m_recentButtons.clear();
    for (const QString& folder : folders.mid(0, kShownRecent)) {
        const QFileInfo info(folder);
        // verl's folders are all called actor/: the parent says which run and step.
        const QString name = info.dir().dirName() + QLatin1Char('/') + info.fileName();
        auto* button = entryButton(name, QDir::toNativeSeparators(folder), this);
        if (!info.isDir()) {
            button->setEnabled(false);
            button->setToolTip(tr("This folder is no longer there."));
        }
        connect(button, &QPushButton::clicked, this, [this, folder] { Q_EMIT openPathRequested(folder); });
        m_recentLayout->addWidget(button);
        m_recentButtons << button;
    }
    m_noRecent->setVisible(m_recentButtons.isEmpty());
}

void WelcomePage::setDemoPath(const QString& checkpoint)
{
    m_demo->setEnabled(!checkpoint.isEmpty());
    m_demo->setToolTip(QDir::toNativeSeparators(checkpoint));
    m_demoNote->setText(checkpoint.isEmpty()
                            ? tr("The demo is not installed here (the package puts it in /usr/share/tessera/demo).")
                            : tr("Then try the Merge tab: the reference is already filled in for Test against "
                                 "reference."));
}

} // namespace tessera::ui
