// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/encoded_piece.h"

#include "formats/gguf_types.h"
#include "formats/mxfp4.h"

#include <algorithm>

namespace tessera {

std::uint64_t blockElements(const Piece& p)
{
    return p.encoding == PieceEncoding::Plain ? 1 : std::max<std::uint64_t>(1, p.blocks.elements);
}

Status checkScaleBounds(const Piece& p, std::uint64_t elements, const MappedFile* scales, const std::string& tensor)
{
    if (p.encoding != PieceEncoding::MXFP4)
        return Status::success();
    const std::uint64_t per = blockElements(p);
    const std::uint64_t blocks = (elements + per - 1) / per;
    if (!scales || p.scaleOffset > scales->size() || blocks > scales->size() - p.scaleOffset)
        return makeError(p.scaleFile + ": " + tensor + ": the scales of its MXFP4 blocks reach past the end of the "
                         "file (truncated or damaged?)");
    return Status::success();
}

Status decodePieceElements(const Piece& p, const std::uint8_t* codes, const std::uint8_t* scales, std::uint64_t first,
                           std::uint64_t count, std::vector<float>& out)
{
    const std::uint64_t per = blockElements(p);
    if (first % per != 0)
        return makeError("a box of a " + storedTypeName(p) + " tensor must hold whole blocks of " + std::to_string(per)
                         + " values (rows of a multiple of " + std::to_string(per) + ")");
    const std::uint64_t blocks = (count + per - 1) / per;
    out.resize(static_cast<std::size_t>(blocks * per));
    switch (p.encoding) {
    case PieceEncoding::GgmlBlocks: {
        // The type's row in the table the reader took the piece's geometry from, and its dequantizer.
        const GgmlTypeInfo* type = findGgmlType(p.blocks.ggmlType);
        if (!type || !type->quantized() || type->blockElements != per || type->blockBytes != p.blocks.bytes)
            return makeError("a piece of ggml type " + ggmlTypeName(p.blocks.ggmlType) + " cannot be decoded");
        type->dequantize(codes + storedByteOffset(p, first), blocks, out.data());
        return Status::success();
    }
    case PieceEncoding::MXFP4:
        dequantizeMxfp4(codes + storedByteOffset(p, first), scales + first / per, blocks, out.data());
        return Status::success();
    case PieceEncoding::Plain:
        break;
    }
    return makeError("a plain piece has nothing to decode");
}

} // namespace tessera
