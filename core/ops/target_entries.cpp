// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/target_entries.h"

#include "io/path_kinds.h"
#include "io/printable.h"
#include "listed_items.h"

#include <algorithm>
#include <filesystem>

namespace tessera {

std::vector<std::string> targetEntryNames(const std::string& target)
{
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : folderEntries(normalTarget(target), ec)) {
        std::string name = entry.path().filename().string();
        if (name.rfind(".tessera-", 0) != 0)
            names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string keptFilesNote(const std::string& target, const std::vector<std::string>& names, const std::string& action)
{
    std::vector<std::string> shown;
    for (const auto& name : names)
        shown.push_back(printableText(name));
    return printableText(target) + " already holds " + std::to_string(names.size()) + " file(s) this " + action
        + " does not write; they are kept as they are:" + listedItems(shown, 10);
}

} // namespace tessera
