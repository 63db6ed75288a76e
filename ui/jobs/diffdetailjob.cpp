// SPDX-License-Identifier: GPL-3.0-or-later
#include "diffdetailjob.h"

#include "latestonlyrunner.h"

namespace tessera::ui {

DiffDetailJob::DiffDetailJob(QObject* parent) : QObject(parent), m_runner(new LatestOnlyRunner(this)) { }

DiffDetailJob::~DiffDetailJob() = default;

void DiffDetailJob::start(CheckpointPtr a, CheckpointPtr b, const QString& tensor, const tessera::DiffOptions& options)
{
    const std::string name = tensor.toStdString();
    m_runner->start(resultWork<tessera::TensorDiffDetail>(
        [a, b, name, options](tessera::Progress& progress) { return tessera::diffTensorDetail(*a, *b, name, options, progress); },
        [this](const DiffDetailPtr& detail) { Q_EMIT finished(detail); },
        [this, tensor](const QString& error) { Q_EMIT failed(tensor, error); }));
}

void DiffDetailJob::cancel() { m_runner->cancel(); }

bool DiffDetailJob::isRunning() const { return m_runner->isRunning(); }

} // namespace tessera::ui
