// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <Qt>

namespace tessera::ui {

/// Item data roles shared by the workbench models. DisplayRole is formatted text, SortRole the raw value.
enum Role {
    SortRole = Qt::UserRole + 1,
    TensorIndexRole,  ///< int: index into CheckpointInfo::tensors, -1 when the row is not about one tensor
    PieceIndexRole,   ///< int: index into TensorInfo::pieces, -1 when the row is not one piece
    NodeKindRole,     ///< int: a model-specific node kind
    ProblemRole,      ///< QString: the problems of the row, empty when it has none
    RankRole,         ///< int: rank of a piece or file, -1 when unknown
};

} // namespace tessera::ui
