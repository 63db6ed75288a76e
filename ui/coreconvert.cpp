// SPDX-License-Identifier: GPL-3.0-or-later
#include "coreconvert.h"

#include "io/byte_size.h"
#include "model/checkpoint_report.h"
#include "model/placement.h"

namespace tessera::ui {

QString shapeText(const tessera::Shape& shape) { return qs(tessera::shapeToString(shape)); }

QString dtypeText(tessera::DType dtype) { return qs(tessera::dtypeLabel(dtype)); }

QString bytesText(std::uint64_t bytes) { return qs(tessera::formatBytes(bytes)); }

QString writtenSummary(std::size_t files, std::uint64_t bytes, double seconds, const std::string& dir)
{
    return QStringLiteral("wrote %1 files, %2 in %3 s to %4").arg(files).arg(bytesText(bytes)).arg(seconds, 0, 'f', 1).arg(qs(dir));
}

QString boxText(const tessera::Shape& offsets, const tessera::Shape& shape)
{
    return qs(tessera::boxText(offsets, shape));
}

QString roleText(tessera::PieceRole role)
{
    switch (role) {
    case tessera::PieceRole::Primary:
        return QStringLiteral("primary");
    case tessera::PieceRole::Replica:
        return QStringLiteral("replica");
    case tessera::PieceRole::PartialTerm:
        return QStringLiteral("partial term");
    }
    return {};
}

QString fileName(const std::string& path)
{
    const auto slash = path.find_last_of('/');
    return qs(slash == std::string::npos ? path : path.substr(slash + 1));
}

QString fileNameUnder(const std::string& path, const std::string& root)
{
    // Megatron folders hold one model.pt per mp_rank_* folder: the part below the root tells them apart.
    if (!root.empty() && path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0
        && path[root.size()] == '/')
        return qs(path.substr(root.size() + 1));
    return fileName(path);
}

std::uint64_t boxNumel(const tessera::Shape& shape)
{
    std::uint64_t n = 1;
    for (const auto size : shape)
        n *= size > 0 ? static_cast<std::uint64_t>(size) : 0;
    return n;
}

std::uint64_t pieceBytes(const tessera::Piece& piece)
{
    return tessera::storedByteOffset(piece, boxNumel(piece.shape));
}

QString storedText(const tessera::Piece& piece)
{
    return piece.encoding == tessera::PieceEncoding::Plain ? dtypeText(piece.storedDtype) : qs(tessera::storedTypeName(piece));
}

} // namespace tessera::ui

namespace tessera::ui {
QString countText(long long count, const QString& singular, const QString& plural)
{
    return QString::number(count) + QLatin1Char(' ') + (count == 1 ? singular : plural);
}
} // namespace tessera::ui
