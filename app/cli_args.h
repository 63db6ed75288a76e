// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {

/// Exit codes shared by every command.
enum ExitCode { ExitOk = 0, ExitProblems = 1, ExitUsage = 2 };

/// A small command-line parser for one subcommand. Flags are accepted with underscores and with dashes
/// (`--local_dir`, `--local-dir`), as `--flag value` or `--flag=value`, so scripts written for verl work.
/// Switches also take a boolean the way Python scripts pass them: `--strict False`, `--strict=true`, `--strict 0`.
class ArgParser {
public:
    ArgParser(std::string command, std::string synopsis, std::string description);

    /// A flag taking a value. `name` is spelled with underscores; `metavar` names the value in --help.
    void addOption(const std::string& name, const std::string& metavar, const std::string& help,
                   const std::string& defaultValue = {});
    /// A flag without a value.
    void addSwitch(const std::string& name, const std::string& help);
    /// A positional argument (required unless `optional`).
    void addPositional(const std::string& name, const std::string& help, bool optional = false);

    /// Parses `args` (without the program and command names). On failure returns false and sets error().
    /// `--help`/`-h` sets helpRequested().
    bool parse(const std::vector<std::string>& args);

    bool helpRequested() const { return m_help; }
    const std::string& error() const { return m_error; }
    std::string helpText() const;
    const std::string& command() const { return m_command; }

    bool isSet(const std::string& name) const; ///< switch given (and not given as false), or option given
    /// A switch given as false (`--strict False`, `--strict=0`): the user turned it off explicitly.
    bool isTurnedOff(const std::string& name) const;
    std::string value(const std::string& name) const; ///< option value or its default
    std::string positional(const std::string& name) const;
    /// Gives option `name` a value as if the user had passed it (an alias such as split's --hf_dir).
    void assign(const std::string& name, const std::string& value) { m_values[name] = value; }

private:
    struct Spec {
        std::string name, metavar, help, defaultValue;
        bool takesValue = false;
    };
    const Spec* find(const std::string& flag) const;

    std::string m_command, m_synopsis, m_description;
    std::vector<Spec> m_specs;
    std::vector<std::pair<std::string, std::pair<std::string, bool>>> m_positionals; // name, (help, optional)
    std::map<std::string, std::string> m_values;
    std::map<std::string, std::string> m_positionalValues;
    bool m_help = false;
    std::string m_error;
};

/// The most worker threads --threads takes: more than any machine Tessera runs on has cores, few enough that a
/// mistyped number cannot start a million threads.
inline constexpr unsigned kMaxThreads = 1024;

/// Option `name` as a whole number from `min` to `max`: decimal digits only (parseWholeNumber), so "1e3", "-1",
/// "" or a number past `max` are refused, not read as 1, wrapped or clamped. The error names the option, the
/// range and what was given.
Result<std::uint64_t> wholeNumberOption(const ArgParser& parser, const std::string& name, std::uint64_t min,
                                        std::uint64_t max);
/// Option `name` as a finite decimal number (parseDecimalNumber) of at least `min` (above it when `aboveMin`) and at
/// most `max`; the error names the option, the range and what was given.
Result<double> decimalOption(const ArgParser& parser, const std::string& name, double min, double max,
                             bool aboveMin = false);
/// --threads: 0 when not given (one per core), else 1 to kMaxThreads.
Result<unsigned> threadsOption(const ArgParser& parser);

/// Prints "<program> <command>: <error>" and a hint to stderr; returns ExitUsage.
int usageError(const ArgParser& parser);

/// Parses a command's `args`: on a usage error reports it as usageError() does, on --help prints the help text
/// to stdout. Returns the exit code when the command has nothing more to do, std::nullopt when it should run.
std::optional<int> parseCommandLine(ArgParser& parser, const std::vector<std::string>& args);

} // namespace tessera::cli
