// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QHash>
#include <QStringList>
#include <QVector>
#include <QWidget>

namespace tessera::ui {

/// The device mesh of the selected tensor as a grid of ranks: one cell per rank in its rank colour, filled when
/// the rank holds a primary piece, hatched when it holds a replica, grey when it holds nothing of this tensor.
/// Meshes with more than two dims fold their leading dims into rows. A Megatron per-rank checkpoint shows its
/// model-parallel grid instead: TP across, PP (× EP) down, each cell labelled with its mp_rank_* folder and
/// coordinates.
class MeshView : public QWidget {
    Q_OBJECT
public:
    explicit MeshView(QWidget* parent = nullptr);
    ~MeshView() override;

    /// The tensor's mesh (its DTensor mesh, the checkpoint's only mesh, or the ranks as a row).
    void setTensor(CheckpointPtr checkpoint, int tensorIndex);
    void setHighlightedRank(int rank);
    QString meshText() const { return m_title; }
    /// The label of `rank`'s cell: its mp_rank_* folder and coordinates for Megatron, else empty.
    QString cellLabel(qint64 rank) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    /// Width and height of a full-size cell: square, or wide enough for a folder name.
    QSizeF fullCell() const;

    enum class Holding { Nothing, Primary, Replica, Partial };

    QVector<qint64> m_shape;
    QStringList m_dimNames;
    QVector<qint64> m_ranks;
    QHash<qint64, Holding> m_holding;
    QHash<qint64, QString> m_folders;     ///< Megatron: rank → its mp_rank_* folder
    QHash<qint64, QString> m_coordinates; ///< Megatron: rank → "TP 1 · PP 0"
    QString m_title;
    int m_highlighted = -1;
};

} // namespace tessera::ui
