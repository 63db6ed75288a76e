// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <QMetaType>

#include <memory>

namespace tessera::ui {

/// A scanned checkpoint as the workbench shares it: immutable once published by the scan job, so models and
/// views on the GUI thread can hold it while a new scan runs on a worker.
using CheckpointPtr = std::shared_ptr<const tessera::CheckpointInfo>;

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::CheckpointPtr)
