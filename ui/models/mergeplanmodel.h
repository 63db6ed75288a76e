// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QAbstractTableModel>
#include <QVector>

#include <memory>

namespace tessera {
struct MergePlan;
}

namespace tessera::ui {

/// The files a merge writes, from the dry-run plan: each safetensors file with its tensors and size, the index,
/// and the config and tokenizer files copied next to them.
class MergePlanModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { FileColumn, TensorsColumn, SizeColumn, ContentsColumn, ColumnCount };
    enum class Kind { Weights, Index, SideFile };

    explicit MergePlanModel(QObject* parent = nullptr);
    ~MergePlanModel() override;

    /// Null clears the table.
    void setPlan(std::shared_ptr<const tessera::MergePlan> plan);
    const tessera::MergePlan* plan() const { return m_plan.get(); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Row {
        Kind kind;
        QString name;
        qint64 tensors;     ///< -1 when not a weights file
        quint64 size;
        QString contents;
    };
    std::shared_ptr<const tessera::MergePlan> m_plan;
    QVector<Row> m_rows;
};

} // namespace tessera::ui
