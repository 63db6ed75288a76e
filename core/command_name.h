// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The executable's name as users type it ("tessera", or "tessera-cli" on a node with only the headless package), for
// the commands the core's messages tell them to run. Each executable sets it once, before any work starts.

#include <string>
#include <string_view>

namespace tessera {

inline std::string& commandNameSlot()
{
    static std::string name = "tessera";
    return name;
}

/// "tessera" unless the executable said otherwise.
inline const std::string& commandName() { return commandNameSlot(); }

/// Called by main(), before any thread starts.
inline void setCommandName(std::string_view name) { commandNameSlot() = std::string(name); }

} // namespace tessera
