// SPDX-License-Identifier: GPL-3.0-or-later
#include "indexeddrift.h"

#include <string>
#include <unordered_map>

namespace tessera::ui {

IndexedDrift::IndexedDrift(tessera::DriftReport report) : m_report(std::move(report))
{
    std::unordered_map<std::string, std::size_t> tensors;
    for (std::size_t t = 0; t < m_report.tensors.size(); ++t)
        tensors.emplace(m_report.tensors[t], t);
    std::unordered_map<long long, std::size_t> steps;
    for (std::size_t s = 0; s < m_report.steps.size(); ++s)
        steps.emplace(m_report.steps[s].step, s);
    m_records.assign(tensorCount() * stepCount(), -1);
    for (std::size_t r = 0; r < m_report.records.size(); ++r) {
        const auto& record = m_report.records[r];
        const auto tensor = tensors.find(record.name);
        const auto step = steps.find(record.step);
        if (tensor != tensors.end() && step != steps.end())
            m_records[tensor->second * stepCount() + step->second] = static_cast<int>(r);
    }
}

const tessera::DriftRecord* IndexedDrift::record(std::size_t tensor, std::size_t step) const
{
    if (tensor >= tensorCount() || step >= stepCount())
        return nullptr;
    const int r = m_records[tensor * stepCount() + step];
    return r < 0 ? nullptr : &m_report.records[std::size_t(r)];
}

int IndexedDrift::tensorIndex(const std::string& name) const
{
    for (std::size_t t = 0; t < m_report.tensors.size(); ++t)
        if (m_report.tensors[t] == name)
            return static_cast<int>(t);
    return -1;
}

std::string IndexedDrift::damage(std::size_t step) const
{
    if (step >= stepCount())
        return {};
    std::string problems;
    for (const auto& damaged : m_report.damaged)
        if (damaged.step == m_report.steps[step].step)
            problems += (problems.empty() ? "" : "; ") + damaged.problem;
    return problems;
}

} // namespace tessera::ui
