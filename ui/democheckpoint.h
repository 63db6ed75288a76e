// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

#include <optional>

namespace tessera::ui {

/// The bundled demo: a verl FSDP2 run of 4 ranks and the Hugging Face model it must merge into.
struct DemoCheckpoint {
    QString checkpoint; ///< the actor folder to open
    QString reference;  ///< the model a merge of it must equal
};

/// Where the demo is: installed beside the executable (`PREFIX/share/tessera/demo`, as the package puts it), in
/// the source tree this build came from (`resources/demo`), or in the system's data folders. `demoRoot` overrides
/// the search (a folder laid out like `resources/demo`); std::nullopt when no complete demo is found.
std::optional<DemoCheckpoint> findDemoCheckpoint(const QString& demoRoot = {});

} // namespace tessera::ui
