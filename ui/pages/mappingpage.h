// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QWidget>

class QTableView;
class QSortFilterProxyModel;

namespace tessera::ui {

class FilterBar;
class MappingModel;

/// Source → target names with status. Lists the checkpoint's tensors until the core's name mapping
/// (Megatron → Hugging Face) is available.
class MappingPage : public QWidget {
    Q_OBJECT
public:
    explicit MappingPage(QWidget* parent = nullptr);
    ~MappingPage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    MappingModel* model() const { return m_model; }

Q_SIGNALS:
    void tensorActivated(int tensorIndex);

private:
    MappingModel* m_model;
    QSortFilterProxyModel* m_proxy;
    FilterBar* m_filter;
    QTableView* m_view;
};

} // namespace tessera::ui
