// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

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

/// Prints "tessera <command>: <error>" and a hint to stderr; returns ExitUsage.
int usageError(const ArgParser& parser);

/// Parses a command's `args`: on a usage error reports it as usageError() does, on --help prints the help text
/// to stdout. Returns the exit code when the command has nothing more to do, std::nullopt when it should run.
std::optional<int> parseCommandLine(ArgParser& parser, const std::vector<std::string>& args);

} // namespace tessera::cli
