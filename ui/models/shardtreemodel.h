// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QAbstractItemModel>
#include <QColor>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::ui {

/// The shard tree: run → step → role → file (or rank) → tensor → piece, or with GroupBy::Tensor
/// run → step → role → tensor → piece.
///
/// A hand-written model over the immutable CheckpointInfo rather than QStandardItemModel: the only per-row state
/// is a few integers built once per checkpoint, and text is formatted on demand, so 100,000 tensors cost
/// milliseconds and a few megabytes.
class ShardTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { NameColumn, SizeColumn, DTypeColumn, ShapeColumn, PlacementColumn, ProblemColumn, ColumnCount };
    enum class GroupBy { File, Tensor };
    enum class NodeKind { Chain, Group, Entry, Piece };

    explicit ShardTreeModel(QObject* parent = nullptr);
    ~ShardTreeModel() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    CheckpointPtr checkpoint() const { return m_checkpoint; }
    void setGroupBy(GroupBy groupBy);
    GroupBy groupBy() const { return m_groupBy; }
    /// Text colour of rows with problems; follows the palette (set by the window on palette changes).
    void setProblemColor(const QColor& color);

    /// The first row showing tensor `tensorIndex` (invalid if none).
    QModelIndex indexForTensor(int tensorIndex) const;
    /// The row of the last chain node (the role or checkpoint folder), parent of the groups.
    QModelIndex checkpointIndex() const;
    int tensorCount() const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Chain {
        QString name;
        QString path;
    };
    struct Group {
        QString name;
        QString path;
        int firstRank = -1;
        int lastRank = -1;
        std::uint64_t bytes = 0;
        std::vector<int> entries;
        QString problem;
    };
    struct Entry {
        int tensor = -1;
        int group = -1; ///< -1 in GroupBy::Tensor
        int row = 0;    ///< row under its parent
        std::uint64_t bytes = 0;
        std::vector<int> pieces; ///< indices into the tensor's pieces
    };

    void rebuild();
    /// The run → step → role nodes above the files, from the folder names verl and Megatron write.
    void buildChain();
    /// The group of one file's pieces, made on first use; groupByFile maps a file to its group.
    int groupOfFile(const std::string& file, std::unordered_map<std::string, int>& groupByFile);
    void groupPiecesByFile(std::unordered_map<std::string, int>& groupByFile);
    void listTensorsInModelOrder();
    /// Each reader problem goes to the row it is about: its tensor, else its file's group, else the root.
    void attachProblems(const std::unordered_map<std::string, int>& groupByFile);
    /// Fills m_tensorNotes for a LoRA checkpoint: which weight each factor adapts, and the factors of each weight.
    void describeLora();
    NodeKind kindOf(const QModelIndex& index) const;
    std::uint64_t payloadOf(const QModelIndex& index) const;
    int chainRow() const { return static_cast<int>(m_chain.size()) - 1; }
    QVariant chainData(int chain, int column, int role) const;
    QVariant groupData(int group, int column, int role) const;
    QVariant entryData(int entry, int column, int role) const;
    QVariant pieceData(int entry, int piece, int column, int role) const;

    CheckpointPtr m_checkpoint;
    GroupBy m_groupBy = GroupBy::File;
    QColor m_problemColor { 0xd0, 0x2b, 0x2b };
    std::vector<Chain> m_chain;
    std::vector<Group> m_groups;
    std::vector<Entry> m_entries;
    std::vector<int> m_topEntries; ///< entries under the last chain node in GroupBy::Tensor
    std::vector<int> m_firstEntryOfTensor;
    std::vector<QString> m_tensorProblems;
    std::vector<QString> m_tensorNotes; ///< per tensor: its part in a LoRA adapter, or where a merge took it from
                                       ///< (merge_report.json); shown in the tooltip, empty for most
    QString m_rootProblems;
};

} // namespace tessera::ui
