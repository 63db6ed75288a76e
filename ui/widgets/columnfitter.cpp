// SPDX-License-Identifier: GPL-3.0-or-later
#include "columnfitter.h"

#include <QAbstractItemView>
#include <QEvent>
#include <QHeaderView>

#include <algorithm>

namespace tessera::ui {

ColumnFitter::ColumnFitter(QAbstractItemView* view, QHeaderView* header, QList<int> columns, int preferred)
    : QObject(view), m_viewport(view->viewport()), m_header(header), m_columns(std::move(columns)), m_preferred(preferred)
{
    for (int column : m_columns)
        m_header->setSectionResizeMode(column, QHeaderView::Interactive);
    m_viewport->installEventFilter(this);
    connect(m_header, &QHeaderView::sectionResized, this, [this](int logical) {
        if (!m_fitting && m_columns.contains(logical))
            m_userSized = true;
    });
    // Other columns sized to their contents change what is left.
    connect(m_header, &QHeaderView::geometriesChanged, this, &ColumnFitter::fit);
}

void ColumnFitter::fit()
{
    if (m_userSized || m_fitting || m_columns.isEmpty())
        return;
    int others = 0;
    for (int column = 0; column < m_header->count(); ++column)
        if (!m_columns.contains(column) && !m_header->isSectionHidden(column))
            others += m_header->sectionSize(column);
    int kept = 0;
    for (int column : m_keptInView)
        if (!m_header->isSectionHidden(column))
            kept += m_header->sectionSize(column);
    const int n = int(m_columns.size());
    const int viewport = m_viewport->width();
    const int narrow = std::max(viewport - kept, viewport / 3);
    const int width = std::max({ std::min(m_preferred, narrow / n), (viewport - others) / n, m_minimum });
    m_fitting = true;
    for (int column : m_columns)
        if (m_header->sectionSize(column) != width)
            m_header->resizeSection(column, width);
    m_fitting = false;
}

void ColumnFitter::setKeptInView(QList<int> columns)
{
    m_keptInView = std::move(columns);
    fit();
}

void ColumnFitter::setMinimumWidth(int width)
{
    m_minimum = width;
    fit();
}

bool ColumnFitter::eventFilter(QObject* watched, QEvent* event)
{
    // The viewport still gets events while its view is being destroyed: only its own resizes are looked at, and
    // nothing of the view is called.
    if (event->type() == QEvent::Resize && watched == m_viewport)
        fit();
    return QObject::eventFilter(watched, event);
}

} // namespace tessera::ui
