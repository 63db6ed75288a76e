// SPDX-License-Identifier: GPL-3.0-or-later
#include "cli_args.h"

#include "program.h"

#include <iostream>

namespace tessera::cli {

Result<unsigned> threadsOption(const ArgParser& parser) { return threadsValue(parser.given("threads")); }

int usageError(const ArgParser& parser)
{
    std::cerr << kProgram.name << " " << parser.command() << ": " << parser.error() << "\nRun '" << kProgram.name << " "
              << parser.command() << " --help' for usage.\n";
    return ExitUsage;
}

std::optional<int> parseCommandLine(ArgParser& parser, const std::vector<std::string>& args)
{
    if (!parser.parse(args))
        return usageError(parser);
    if (parser.helpRequested()) {
        std::cout << parser.helpText(kProgram.name);
        return ExitOk;
    }
    return std::nullopt;
}

} // namespace tessera::cli
