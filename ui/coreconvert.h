// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <QString>

#include <cstdint>
#include <string>

namespace tessera::ui {

// Conversions at the core/Qt boundary: core values are std types, the workbench shows QStrings.

inline QString qs(const std::string& text) { return QString::fromStdString(text); }
/// "[512, 64]"
QString shapeText(const tessera::Shape& shape);
/// "BF16"
QString dtypeText(tessera::DType dtype);
/// "1.23 MB"
QString bytesText(std::uint64_t bytes);
/// "wrote 9 files, 486 KB in 0.1 s to DIR": a finished merge's or split's one-line summary.
QString writtenSummary(std::size_t files, std::uint64_t bytes, double seconds, const std::string& dir);
/// "[0:256, 0:64]"
QString boxText(const tessera::Shape& offsets, const tessera::Shape& shape);
/// "primary", "replica", "partial term"
QString roleText(tessera::PieceRole role);
/// Last path component of a core path.
QString fileName(const std::string& path);
/// `path` relative to `root` when it lies below it ("mp_rank_00_001/model.pt"), else its file name.
QString fileNameUnder(const std::string& path, const std::string& root);
/// Elements of a box.
std::uint64_t boxNumel(const tessera::Shape& shape);
/// Bytes a piece stores.
std::uint64_t pieceBytes(const tessera::Piece& piece);
/// What a piece's bytes are: its dtype, or "Q8_0" for blocks read as float32.
QString storedText(const tessera::Piece& piece);

} // namespace tessera::ui

namespace tessera::ui {
/// "1 tensor", "4 tensors": English plurals without a translator installed (tr's %n would print "tensor(s)").
QString countText(long long count, const QString& singular, const QString& plural);
} // namespace tessera::ui
