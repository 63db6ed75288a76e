// SPDX-License-Identifier: GPL-3.0-or-later
#include "mappingpage.h"

#include "models/mappingmodel.h"
#include "models/roles.h"
#include "widgets/filterbar.h"

#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

namespace tessera::ui {

MappingPage::MappingPage(QWidget* parent)
    : QWidget(parent)
    , m_model(new MappingModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_filter(new FilterBar(this))
    , m_view(new QTableView(this))
{
    auto* note = new QLabel(tr("Names are written unchanged for this layout. Megatron checkpoints will show the "
                               "Hugging Face name each tensor maps to, with its status, once the name mapping is "
                               "available in this build."), this);
    note->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addWidget(note);
    layout->addWidget(m_filter);
    layout->addWidget(m_view, 1);
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(SortRole);
    m_proxy->setFilterKeyColumn(-1);
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(-1, Qt::AscendingOrder);
    m_view->setAlternatingRowColors(true);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 6);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->setTextElideMode(Qt::ElideMiddle);
    const QFontMetrics fm(font());
    m_view->setColumnWidth(MappingModel::SourceColumn, fm.horizontalAdvance(QLatin1Char('m')) * 32);
    m_view->setColumnWidth(MappingModel::TargetColumn, fm.horizontalAdvance(QLatin1Char('m')) * 32);
    m_view->setColumnWidth(MappingModel::ShapeColumn, fm.horizontalAdvance(QStringLiteral("[151936, 4096]")) + 20);
    m_view->setColumnWidth(MappingModel::DTypeColumn, fm.horizontalAdvance(QStringLiteral("DType")) + 40);
    connect(m_filter, &FilterBar::filterChanged, m_proxy,
            [this](const QRegularExpression& re) { m_proxy->setFilterRegularExpression(re); });
    connect(m_view, &QTableView::activated, this,
            [this](const QModelIndex& index) { Q_EMIT tensorActivated(index.data(TensorIndexRole).toInt()); });
}

MappingPage::~MappingPage() = default;

void MappingPage::setCheckpoint(CheckpointPtr checkpoint) { m_model->setCheckpoint(std::move(checkpoint)); }

} // namespace tessera::ui
