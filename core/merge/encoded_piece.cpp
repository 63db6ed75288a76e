// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/encoded_piece.h"

#include "formats/gguf_quant.h"
#include "formats/mxfp4.h"
#include "model/quant_blocks.h"

namespace tessera {

std::uint64_t blockElements(const Piece& p)
{
    switch (p.encoding) {
    case PieceEncoding::Q8_0:
        return kQ8_0BlockElements;
    case PieceEncoding::MXFP4:
        return kMxfp4BlockElements;
    case PieceEncoding::Plain:
        break;
    }
    return 1;
}

Status checkScaleBounds(const Piece& p, std::uint64_t elements, const MappedFile* scales, const std::string& tensor)
{
    if (p.encoding != PieceEncoding::MXFP4)
        return Status::success();
    const std::uint64_t blocks = (elements + kMxfp4BlockElements - 1) / kMxfp4BlockElements;
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
    case PieceEncoding::Q8_0:
        dequantizeQ8_0(codes + storedByteOffset(p, first), blocks * per, out.data());
        return Status::success();
    case PieceEncoding::MXFP4:
        dequantizeMxfp4(codes + storedByteOffset(p, first), scales + first / per, blocks, out.data());
        return Status::success();
    case PieceEncoding::Plain:
        break;
    }
    return makeError("a plain piece has nothing to decode");
}

} // namespace tessera
