// SPDX-License-Identifier: GPL-3.0-or-later
#include "statisticsjob.h"

#include "latestonlyrunner.h"

namespace tessera::ui {

StatisticsJob::StatisticsJob(QObject* parent) : QObject(parent), m_runner(new LatestOnlyRunner(this)) { }

StatisticsJob::~StatisticsJob() = default;

void StatisticsJob::start(CheckpointPtr checkpoint, const QString& tensor)
{
    const std::string name = tensor.toStdString();
    m_runner->start(resultWork<tessera::TensorStatistics>(
        [checkpoint, name](tessera::Progress& progress) { return tessera::tensorStatistics(*checkpoint, name, 64, progress); },
        [this](const TensorStatisticsPtr& statistics) { Q_EMIT finished(statistics); },
        [this, tensor](const QString& error) { Q_EMIT failed(tensor, error); }));
}

void StatisticsJob::cancel() { m_runner->cancel(); }

bool StatisticsJob::isRunning() const { return m_runner->isRunning(); }

} // namespace tessera::ui
