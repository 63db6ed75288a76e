// SPDX-License-Identifier: GPL-3.0-or-later
// Renders the SVG icon into the PNG sizes desktops look up in the hicolor theme, at build time, so the PNGs
// always match the SVG they are made from.
//
// usage: tessera_render_icon ICON.svg OUTDIR SIZE…   writes OUTDIR/SIZExSIZE/apps/org.tessera.Tessera.png

#include <QDir>
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QSvgRenderer>

#include <cstdio>

int main(int argc, char** argv)
{
    if (argc < 4) {
        std::fputs("usage: tessera_render_icon ICON.svg OUTDIR SIZE...\n", stderr);
        return 2;
    }
    // Rendering needs no display.
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QGuiApplication app(argc, argv);
    QSvgRenderer svg(QString::fromLocal8Bit(argv[1]));
    if (!svg.isValid()) {
        std::fprintf(stderr, "tessera_render_icon: cannot read %s\n", argv[1]);
        return 1;
    }
    for (int i = 3; i < argc; ++i) {
        const int size = QString::fromLocal8Bit(argv[i]).toInt();
        if (size < 8 || size > 1024) {
            std::fprintf(stderr, "tessera_render_icon: bad size '%s'\n", argv[i]);
            return 2;
        }
        QImage image(size, size, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::transparent);
        QPainter painter(&image);
        painter.setRenderHint(QPainter::Antialiasing);
        svg.render(&painter);
        painter.end();
        const QString dir = QStringLiteral("%1/%2x%2/apps").arg(QString::fromLocal8Bit(argv[2])).arg(size);
        const QString file = dir + QStringLiteral("/org.tessera.Tessera.png");
        if (!QDir().mkpath(dir) || !image.save(file)) {
            std::fprintf(stderr, "tessera_render_icon: cannot write %s\n", qPrintable(file));
            return 1;
        }
    }
    return 0;
}
