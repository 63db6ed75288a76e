// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include "compare/tensor_diff.h"

#include <QObject>
#include <QString>

#include <memory>

namespace tessera::ui {

using DiffDetailPtr = std::shared_ptr<const tessera::TensorDiffDetail>;

class LatestOnlyRunner;

/// Computes tessera::diffTensorDetail for the selected row on a worker. Selecting another row supersedes the
/// running computation, so only the detail of the row selected last is ever shown.
class DiffDetailJob : public QObject {
    Q_OBJECT
public:
    explicit DiffDetailJob(QObject* parent = nullptr);
    ~DiffDetailJob() override;

    void start(CheckpointPtr a, CheckpointPtr b, const QString& tensor, const tessera::DiffOptions& options);
    void cancel();
    bool isRunning() const;

Q_SIGNALS:
    void finished(const tessera::ui::DiffDetailPtr& detail);
    void failed(const QString& tensor, const QString& message);

private:
    LatestOnlyRunner* m_runner;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::DiffDetailPtr)
