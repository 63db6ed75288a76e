// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include "compare/tensor_diff.h"

#include <QObject>
#include <QString>

#include <memory>

namespace tessera::ui {

class LatestOnlyRunner;

using TensorStatisticsPtr = std::shared_ptr<const tessera::TensorStatistics>;

/// Computes tessera::tensorStatistics for one tensor on a worker; asking for another tensor supersedes it.
class StatisticsJob : public QObject {
    Q_OBJECT
public:
    explicit StatisticsJob(QObject* parent = nullptr);
    ~StatisticsJob() override;

    void start(CheckpointPtr checkpoint, const QString& tensor);
    void cancel();
    bool isRunning() const;

Q_SIGNALS:
    void finished(const tessera::ui::TensorStatisticsPtr& statistics);
    void failed(const QString& tensor, const QString& message);

private:
    LatestOnlyRunner* m_runner;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::TensorStatisticsPtr)
