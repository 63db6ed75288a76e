// SPDX-License-Identifier: GPL-3.0-or-later
// Commands whose engines are still being built report so clearly instead of failing obscurely.

#include "commands.h"

#include <iostream>

namespace tessera::cli {

namespace {
int notYet(const char* command)
{
    std::cerr << "tessera " << command << ": not available in this build yet\n";
    return 1;
}
} // namespace

int runSplit(const std::vector<std::string>&) { return notYet("split"); }

} // namespace tessera::cli
