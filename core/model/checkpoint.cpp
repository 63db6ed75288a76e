// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/checkpoint.h"
#include "io/printable.h"

#include <algorithm>

namespace tessera {

std::string shapeToString(const Shape& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::uint64_t storedByteOffset(const Piece& p, std::uint64_t elements)
{
    if (p.encoding != PieceEncoding::Plain) {
        const std::uint64_t per = std::max<std::uint64_t>(1, p.blocks.elements);
        return (elements + per - 1) / per * p.blocks.bytes;
    }
    return elements * dtypeSize(p.storedDtype);
}

void skipStoredElements(Piece& p, std::uint64_t elements)
{
    p.dataOffset += storedByteOffset(p, elements);
    if (p.encoding == PieceEncoding::MXFP4)
        p.scaleOffset += elements / std::max<std::uint64_t>(1, p.blocks.elements); // one scale byte a block
}

std::string storedTypeName(const Piece& p)
{
    if (p.encoding != PieceEncoding::Plain)
        return p.blocks.name;
    return std::string(torchName(p.storedDtype));
}

std::uint64_t shapeNumel(const Shape& shape)
{
    std::uint64_t n = 1;
    for (auto d : shape) {
        if (d <= 0)
            return 0;
        n *= static_cast<std::uint64_t>(d);
    }
    return n;
}

std::uint64_t TensorInfo::numel() const
{
    return shapeNumel(shape);
}

std::string Problem::text() const
{
    // Names and messages quote other people's files; escaped so that they cannot drive the terminal. A message
    // that already starts with the file (a reader's error passed on) does not get it twice.
    std::string body = message;
    std::string out = printableText(file);
    if (!file.empty() && body.size() > file.size() && body.compare(0, file.size() + 2, file + ": ") == 0)
        body = body.substr(file.size() + 2);
    if (!tensor.empty() && body.size() > tensor.size() && body.compare(0, tensor.size() + 2, tensor + ": ") == 0)
        body = body.substr(tensor.size() + 2);
    if (!tensor.empty())
        out += (out.empty() ? "" : ": ") + printableText(tensor);
    out += (out.empty() ? "" : ": ") + printableText(body);
    return out;
}

const char* optimizerLayoutName(OptimizerState::Layout layout)
{
    switch (layout) {
    case OptimizerState::Layout::None:
        return "";
    case OptimizerState::Layout::TorchFlattened:
        return "torch-flattened";
    case OptimizerState::Layout::MegatronCanonical:
        return "megatron-canonical";
    case OptimizerState::Layout::MegatronFlatBuffers:
        return "megatron-flat-buffers";
    }
    return "";
}

const TensorInfo* CheckpointInfo::find(const std::string& name) const
{
    for (const auto& t : tensors)
        if (t.name == name)
            return &t;
    return nullptr;
}

bool CheckpointInfo::isLoraFactor(const std::string& name) const
{
    for (const auto& d : loraDeltas)
        if (d.a == name || d.b == name)
            return true;
    return false;
}

const LoraDelta* CheckpointInfo::loraDeltaFor(const std::string& name) const
{
    for (const auto& d : loraDeltas)
        if (d.weight == name)
            return &d;
    return nullptr;
}

CheckpointInfo CheckpointInfo::withoutLoraUpdates() const
{
    CheckpointInfo base = *this;
    base.tensors.clear();
    for (const auto& t : tensors)
        if (!isLoraFactor(t.name))
            base.tensors.push_back(t);
    base.loraDeltas.clear();
    return base;
}

std::uint64_t CheckpointInfo::totalBytes() const
{
    std::uint64_t total = 0;
    for (const auto& t : tensors)
        total += t.nbytes();
    return total;
}

} // namespace tessera
