// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "compare/drift.h"

#include <QMetaType>

#include <memory>
#include <vector>

namespace tessera::ui {

/// A drift report with each record found by (tensor, step) at once: the Run page's table, heatmap and plot look
/// records up for every cell they draw. Immutable; built on the worker that read the run.
class IndexedDrift {
public:
    explicit IndexedDrift(tessera::DriftReport report);

    const tessera::DriftReport& report() const { return m_report; }
    std::size_t tensorCount() const { return m_report.tensors.size(); }
    std::size_t stepCount() const { return m_report.steps.size(); }
    /// The record of tensor `tensor` (index into report().tensors) at step `step` (index into report().steps);
    /// null when that step lacks the tensor or an index is out of range.
    const tessera::DriftRecord* record(std::size_t tensor, std::size_t step) const;
    /// The index of `name` in report().tensors, -1 when the run has no such tensor.
    int tensorIndex(const std::string& name) const;
    /// The problem of a damaged step, empty when it was read whole.
    std::string damage(std::size_t step) const;

private:
    tessera::DriftReport m_report;
    std::vector<int> m_records; ///< tensorCount × stepCount indexes into m_report.records, -1 when absent
};

using DriftPtr = std::shared_ptr<const IndexedDrift>;

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::DriftPtr)
