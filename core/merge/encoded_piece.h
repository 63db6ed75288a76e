// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A block-quantized piece (a GGUF file's Q8_0, a Hugging Face folder's MXFP4) is read by decoding whole blocks
// of its stored elements into float32 first; what follows reads those floats as a plain piece's bytes.

#include "io/mapped_file.h"
#include "model/checkpoint.h"
#include "result.h"

#include <cstdint>
#include <vector>

namespace tessera {

/// Elements per block of a piece's encoding; 1 for a plain piece.
std::uint64_t blockElements(const Piece& p);

/// Checks that the scale bytes an MXFP4 piece's first `elements` stored elements need lie inside `scales` (its
/// scaleFile); nothing to check for other encodings.
Status checkScaleBounds(const Piece& p, std::uint64_t elements, const MappedFile* scales, const std::string& tensor);

/// Stored elements [first, first + count) of an encoded piece, decoded into `out` (resized to whole blocks):
/// `codes` is the piece's data (at its dataOffset), `scales` its scale bytes (at scaleOffset; MXFP4 only). `first`
/// must start a block: a box of such a piece covers whole rows of whole blocks. A ggml piece is decoded by its type's
/// row in formats/gguf_types.h.
Status decodePieceElements(const Piece& p, const std::uint8_t* codes, const std::uint8_t* scales, std::uint64_t first,
                           std::uint64_t count, std::vector<float>& out);

} // namespace tessera
