// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/mxfp4.h"
#include "text_util.h"

#include <cmath>
#include <limits>
#include <map>

namespace tessera {

namespace {

constexpr float kE2M1[16] = { +0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

/// 2^(scale − 127) as a float32, as torch computes it (pow(2, int) in float32): 2^−127 is a subnormal, exact;
/// 2^128 overflows to infinity.
float scaleFactor(std::uint8_t scale)
{
    if (scale == 255)
        return std::numeric_limits<float>::infinity();
    return std::ldexp(1.0f, static_cast<int>(scale) - 127);
}

/// The one plain piece of a tensor as a Hugging Face folder stores it, or nullptr.
const Piece* wholePiece(const TensorInfo& t)
{
    if (t.dtype != DType::UInt8 || t.pieces.size() != 1)
        return nullptr;
    const Piece& p = t.pieces.front();
    return p.encoding == PieceEncoding::Plain && p.storedDtype == DType::UInt8 && p.shape == t.shape ? &p : nullptr;
}

/// Why `blocks` and `scales` are not one MXFP4 tensor as GPT-OSS stores it (uint8 blocks [E, R, G, 16] with
/// uint8 scales [E, R, G], each one whole piece); empty when they are.
std::string misfit(const TensorInfo& blocks, const TensorInfo& scales)
{
    if (!wholePiece(blocks) || !wholePiece(scales))
        return "they are not each one uint8 tensor";
    if (blocks.shape.size() != 4 || scales.shape.size() != 3
        || blocks.shape[3] != static_cast<std::int64_t>(kMxfp4Blocks.bytes)
        || !std::equal(scales.shape.begin(), scales.shape.end(), blocks.shape.begin()))
        return "their shapes do not fit together";
    for (std::int64_t d : scales.shape)
        if (d <= 0)
            return "they are empty";
    if (blocks.shape[2] > std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(kMxfp4Blocks.elements))
        return "the rows are too long";
    return {};
}

/// `<name>` from its blocks and scales, which fit (misfit() is empty).
TensorInfo joined(const std::string& name, const TensorInfo& blocks, const TensorInfo& scales)
{
    const Piece* b = wholePiece(blocks);
    const Piece* s = wholePiece(scales);
    const std::int64_t experts = blocks.shape[0], rows = blocks.shape[1], groups = blocks.shape[2];
    const std::int64_t columns = groups * static_cast<std::int64_t>(kMxfp4Blocks.elements);

    TensorInfo t;
    t.name = name;
    t.dtype = DType::BFloat16;
    t.shape = { experts, columns, rows };
    Piece piece = *b;
    piece.offsets = { 0, 0, 0 };
    piece.shape = t.shape;
    piece.strides = { rows * columns, 1, columns }; // stored as [E, R, G·32]: the transpose is in the strides
    piece.storedDtype = DType::Float32;
    piece.encoding = PieceEncoding::MXFP4;
    piece.blocks = kMxfp4Blocks;
    piece.scaleFile = s->file;
    piece.scaleOffset = s->dataOffset;
    t.pieces.push_back(std::move(piece));
    return t;
}

} // namespace

void dequantizeMxfp4(const std::uint8_t* codes, const std::uint8_t* scales, std::uint64_t blocks, float* dst)
{
    for (std::uint64_t b = 0; b < blocks; ++b) {
        const float factor = scaleFactor(scales[b]);
        const std::uint8_t* code = codes + b * kMxfp4Blocks.bytes;
        float* out = dst + b * kMxfp4Blocks.elements;
        for (std::uint64_t j = 0; j < kMxfp4Blocks.bytes; ++j) {
            out[2 * j] = kE2M1[code[j] & 0x0F] * factor;
            out[2 * j + 1] = kE2M1[code[j] >> 4] * factor;
        }
    }
}

std::size_t joinMxfp4Pairs(CheckpointInfo& info)
{
    static const std::string kBlocks = "_blocks", kScales = "_scales";
    std::map<std::string, std::size_t> indexOf;
    for (std::size_t i = 0; i < info.tensors.size(); ++i)
        indexOf.emplace(info.tensors[i].name, i);

    std::map<std::size_t, TensorInfo> joinedAt; // blocks' index → the joined tensor, which takes its place
    std::vector<bool> consumed(info.tensors.size(), false);
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        const TensorInfo& t = info.tensors[i];
        if (!endsWith(t.name, kBlocks))
            continue;
        const std::string name = t.name.substr(0, t.name.size() - kBlocks.size());
        const auto scales = indexOf.find(name + kScales);
        if (scales == indexOf.end())
            continue;
        const TensorInfo& s = info.tensors[scales->second];
        if (t.dtype != DType::UInt8 && s.dtype != DType::UInt8)
            continue; // not MXFP4's bytes: two tensors that happen to be named so
        // A pair that is not one tensor would be written as raw codes, under a config.json whose
        // quantization_config the merge drops for the pairs it decodes: never a model anyone can load.
        std::string why = indexOf.count(name) ? "a tensor named " + name + " is there too" : misfit(t, s);
        if (!why.empty()) {
            const std::string file = t.pieces.empty() ? info.root : t.pieces.front().file;
            info.problems.push_back({ file, name, t.name + " " + shapeToString(t.shape) + " and " + s.name + " "
                                                      + shapeToString(s.shape) + " are not one MXFP4 tensor (uint8 "
                                                      "blocks [E, R, G, 16] with scales [E, R, G]): " + why });
            continue;
        }
        consumed[i] = consumed[scales->second] = true;
        joinedAt.emplace(i, joined(name, t, s));
    }
    if (joinedAt.empty())
        return 0;
    std::vector<TensorInfo> tensors;
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        if (const auto one = joinedAt.find(i); one != joinedAt.end())
            tensors.push_back(std::move(one->second));
        else if (!consumed[i])
            tensors.push_back(std::move(info.tensors[i]));
    }
    info.tensors = std::move(tensors);
    info.notes["mxfp4"] = std::to_string(joinedAt.size()) + " MXFP4 tensors (<name>_blocks with <name>_scales) read "
        "as the bfloat16 values transformers dequantizes them to";
    return joinedAt.size();
}

} // namespace tessera
