// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <memory>
#include <string>

namespace tessera::test {

/// A piece of `tensor` held by `rank` in file "/ckpt/rank_<rank>.pt".
inline Piece makePiece(int rank, Shape offsets, Shape shape, PieceRole role = PieceRole::Primary)
{
    Piece piece;
    piece.file = "/ckpt/run/global_step_5/actor/rank_" + std::to_string(rank) + ".pt";
    piece.rank = rank;
    piece.role = role;
    piece.offsets = std::move(offsets);
    piece.shape = std::move(shape);
    piece.storedDtype = DType::BFloat16;
    return piece;
}

/// Two ranks, a row-sharded matrix, a replicated bias, a tensor with a gap (and its problem), a 0-dim scalar.
inline std::shared_ptr<const CheckpointInfo> smallCheckpoint()
{
    auto info = std::make_shared<CheckpointInfo>();
    info->layout = "verl-fsdp";
    info->root = "/ckpt/run/global_step_5/actor";
    info->parallel.worldSize = 2;
    info->parallel.meshes.push_back(DeviceMesh { { 2 }, { "fsdp" }, { 0, 1 } });
    info->files = { "/ckpt/run/global_step_5/actor/rank_0.pt", "/ckpt/run/global_step_5/actor/rank_1.pt" };

    TensorInfo w { "model.w", DType::BFloat16, { 8, 4 }, "Shard(0) on fsdp=2", 0, {}, {} };
    w.pieces = { makePiece(0, { 0, 0 }, { 4, 4 }), makePiece(1, { 4, 0 }, { 4, 4 }) };
    TensorInfo b { "model.b", DType::BFloat16, { 4 }, "Replicate() on fsdp=2", 0, {}, {} };
    b.pieces = { makePiece(0, { 0 }, { 4 }), makePiece(1, { 0 }, { 4 }, PieceRole::Replica) };
    TensorInfo g { "model.gappy", DType::BFloat16, { 8, 4 }, "Shard(0) on fsdp=2", 0, {}, {} };
    g.pieces = { makePiece(0, { 0, 0 }, { 3, 4 }), makePiece(1, { 4, 0 }, { 4, 4 }) };
    TensorInfo s { "model.scale", DType::BFloat16, {}, "", -1, {}, {} };
    s.pieces = { makePiece(0, {}, {}) };
    info->tensors = { w, b, g, s };
    info->problems.push_back(Problem { "/ckpt/run/global_step_5/actor/rank_0.pt", "model.gappy",
                                       "rows 3–4 are held by no rank" });
    info->problems.push_back(Problem { "/ckpt/run/global_step_5/actor/rank_1.pt", "", "file is truncated" });
    return info;
}

/// `count` tensors sharded over `ranks` ranks, for scale tests.
inline std::shared_ptr<const CheckpointInfo> largeCheckpoint(int count, int ranks)
{
    auto info = std::make_shared<CheckpointInfo>();
    info->layout = "dcp";
    info->root = "/big/dcp";
    info->parallel.worldSize = ranks;
    for (int r = 0; r < ranks; ++r)
        info->files.push_back("/ckpt/run/global_step_5/actor/rank_" + std::to_string(r) + ".pt");
    info->tensors.reserve(static_cast<std::size_t>(count));
    for (int t = 0; t < count; ++t) {
        TensorInfo tensor { "layers." + std::to_string(t / 10) + ".w" + std::to_string(t % 10), DType::BFloat16,
                            { 64 * ranks, 32 }, "Shard(0)", -1, {}, {} };
        for (int r = 0; r < ranks; ++r)
            tensor.pieces.push_back(makePiece(r, { 64 * r, 0 }, { 64, 32 }));
        info->tensors.push_back(std::move(tensor));
    }
    return info;
}

} // namespace tessera::test
