// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QAbstractTableModel>
#include <QVector>

#include <memory>

namespace tessera {
struct SplitPlan;
}

namespace tessera::ui {

/// The files a split writes, from its plan: each rank's file with its rank, tensors and size, then the files
/// written beside them (fsdp_config.json, .metadata, transformer_config.json…) and the config folder.
class SplitPlanModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { FileColumn, RankColumn, TensorsColumn, SizeColumn, ColumnCount };

    explicit SplitPlanModel(QObject* parent = nullptr);
    ~SplitPlanModel() override;

    /// Null clears the table.
    void setPlan(std::shared_ptr<const tessera::SplitPlan> plan);
    const tessera::SplitPlan* plan() const { return m_plan.get(); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    /// The training state's files (an FSDP run's optimizer and extra state, a DCP folder's training items).
    void addTrainingRows();
    struct Row {
        QString name;
        int rank;       ///< -1 for files that are not a rank's
        qint64 tensors; ///< -1 when not a rank's file
        quint64 size;   ///< 0 when not known before writing
        QString tooltip;
    };
    std::shared_ptr<const tessera::SplitPlan> m_plan;
    QVector<Row> m_rows;
};

} // namespace tessera::ui
