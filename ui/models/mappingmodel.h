// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "jobs/mappingjob.h"
#include "roles.h"

#include <QAbstractTableModel>

#include "mapping/megatron_mapping.h"

class QColor;
class QPalette;

namespace tessera::ui {

/// The mapping table: source name → Hugging Face name with the rule, transform, shapes and status of every
/// source tensor and expected parameter (MappingResult::rows). Megatron layouts show mapMegatronToHf's table,
/// other layouts identity rows (see MappingJob::evaluate).
class MappingModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        LayerColumn, ///< "3", "3 · expert 5": sorting by it groups rows by layer, keeping the table's order within
        SourceColumn,
        TargetColumn,
        RuleColumn,
        TransformColumn,
        SourceShapeColumn,
        TargetShapeColumn,
        StatusColumn,
        ColumnCount
    };
    enum MappingRole {
        StatusRole = RankRole + 1, ///< int: tessera::MappingStatus
        DetailRole,                ///< QString: why, for anything but ok
    };

    explicit MappingModel(QObject* parent = nullptr);
    ~MappingModel() override;

    void setOutcome(const MappingOutcome& outcome);
    const MappingOutcome& outcome() const { return m_outcome; }
    const tessera::MappingRow* row(int row) const;

    /// The colour a status is drawn in; invalid for ok (the palette's text colour).
    static QColor statusColor(tessera::MappingStatus status, const QPalette& palette);
    /// "unmapped", … for the status filter and the summary.
    static QString statusText(tessera::MappingStatus status);
    /// True for the statuses that stop a strict merge or need a look (red and orange).
    static bool isProblem(tessera::MappingStatus status);
    /// The layer (and expert) a name belongs to as "3" / "3 · expert 5", empty for names outside the layers; with
    /// `sortKey` set to a key that orders layers numerically, experts within them, and non-layer names last.
    static QString layerText(const QString& name, qulonglong* sortKey = nullptr);
    /// Every status, in the order the summary and the filter list them.
    static const QVector<tessera::MappingStatus>& statuses();

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    MappingOutcome m_outcome;
};

} // namespace tessera::ui
