// SPDX-License-Identifier: GPL-3.0-or-later
#include "theme.h"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>

namespace tessera::ui {

namespace {
QPalette& systemPalette()
{
    static QPalette palette;
    return palette;
}
Theme::Mode& currentMode()
{
    static Theme::Mode mode = Theme::Mode::System;
    return mode;
}

/// Both themes draw every kind of text in one colour, and disabled text in one dimmer colour.
void setTextColors(QPalette& p, const QColor& text, const QColor& disabledText)
{
    for (const auto role : { QPalette::WindowText, QPalette::ToolTipText, QPalette::Text, QPalette::ButtonText })
        p.setColor(role, text);
    for (const auto role : { QPalette::Text, QPalette::ButtonText, QPalette::WindowText })
        p.setColor(QPalette::Disabled, role, disabledText);
}
} // namespace

void Theme::captureSystemPalette() { systemPalette() = QApplication::palette(); }

QPalette Theme::lightPalette()
{
    QPalette p;
    p.setColor(QPalette::Window, QColor(0xef, 0xef, 0xef));
    p.setColor(QPalette::Base, QColor(0xff, 0xff, 0xff));
    p.setColor(QPalette::AlternateBase, QColor(0xf4, 0xf5, 0xf7));
    p.setColor(QPalette::ToolTipBase, QColor(0xff, 0xff, 0xe8));
    p.setColor(QPalette::PlaceholderText, QColor(0x80, 0x80, 0x80));
    p.setColor(QPalette::Button, QColor(0xe6, 0xe6, 0xe6));
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Mid, QColor(0xa0, 0xa0, 0xa0));
    p.setColor(QPalette::Highlight, QColor(0x2a, 0x6f, 0xdb));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x1f, 0x5f, 0xbf));
    setTextColors(p, QColor(0x1e, 0x1e, 0x1e), QColor(0x9a, 0x9a, 0x9a));
    return p;
}

QPalette Theme::darkPalette()
{
    QPalette p;
    p.setColor(QPalette::Window, QColor(0x2b, 0x2d, 0x30));
    p.setColor(QPalette::Base, QColor(0x1f, 0x20, 0x22));
    p.setColor(QPalette::AlternateBase, QColor(0x27, 0x29, 0x2c));
    p.setColor(QPalette::ToolTipBase, QColor(0x3a, 0x3c, 0x40));
    p.setColor(QPalette::PlaceholderText, QColor(0x8a, 0x8a, 0x8a));
    p.setColor(QPalette::Button, QColor(0x36, 0x38, 0x3c));
    p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
    p.setColor(QPalette::Light, QColor(0x4a, 0x4c, 0x50));
    p.setColor(QPalette::Midlight, QColor(0x3e, 0x40, 0x44));
    p.setColor(QPalette::Mid, QColor(0x5a, 0x5c, 0x60));
    p.setColor(QPalette::Dark, QColor(0x18, 0x19, 0x1a));
    p.setColor(QPalette::Shadow, Qt::black);
    p.setColor(QPalette::Highlight, QColor(0x3d, 0x7e, 0xe6));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x6a, 0xa7, 0xff));
    setTextColors(p, QColor(0xe3, 0xe3, 0xe3), QColor(0x70, 0x70, 0x70));
    return p;
}

void Theme::apply(Mode mode)
{
    currentMode() = mode;
    switch (mode) {
    case Mode::System:
        QApplication::setPalette(systemPalette());
        break;
    case Mode::Light:
        QApplication::setPalette(lightPalette());
        break;
    case Mode::Dark:
        QApplication::setPalette(darkPalette());
        break;
    }
}

Theme::Mode Theme::current() { return currentMode(); }

QString Theme::modeName(Mode mode)
{
    switch (mode) {
    case Mode::Light:
        return QStringLiteral("light");
    case Mode::Dark:
        return QStringLiteral("dark");
    case Mode::System:
        break;
    }
    return QStringLiteral("system");
}

Theme::Mode Theme::modeFromName(const QString& name)
{
    if (name == QLatin1String("light"))
        return Mode::Light;
    if (name == QLatin1String("dark"))
        return Mode::Dark;
    return Mode::System;
}

} // namespace tessera::ui
