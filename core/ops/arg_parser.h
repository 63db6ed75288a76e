// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The words of a command line, as `tessera` and verl's scripts spell them. Requests (ops/*_request.h) declare their
// flags here and read their fields from a parse; the command line's --help is written from the same declarations.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

/// A small command-line parser for one subcommand. Flags are accepted with underscores and with dashes
/// (`--local_dir`, `--local-dir`), as `--flag value` or `--flag=value`, so scripts written for verl work.
/// Switches also take a boolean the way Python scripts pass them: `--strict False`, `--strict=true`, `--strict 0`.
class ArgParser {
public:
    /// One flag: `name` spelled with underscores, `metavar` naming its value in --help (empty for a switch).
    struct Option {
        std::string name, metavar, help, defaultValue;
        bool takesValue = false;
    };
    struct Positional {
        std::string name, help;
        bool optional = false;
    };

    ArgParser(std::string command, std::string synopsis, std::string description);

    /// A flag taking a value; `defaultValue` is only shown in --help.
    void addOption(const std::string& name, const std::string& metavar, const std::string& help,
                   const std::string& defaultValue = {});
    /// A flag without a value.
    void addSwitch(const std::string& name, const std::string& help);
    /// A positional argument (required unless `optional`).
    void addPositional(const std::string& name, const std::string& help, bool optional = false);

    /// A list shown after the options under `title` ("gguf types"): one line per (term, what it means), for an
    /// option whose values need more words than its own line holds.
    void addList(const std::string& title, const std::vector<std::pair<std::string, std::string>>& entries);

    /// Parses `args` (without the program and command names). On failure returns false and sets error().
    /// `--help`/`-h` sets helpRequested().
    bool parse(const std::vector<std::string>& args);

    bool helpRequested() const { return m_help; }
    const std::string& error() const { return m_error; }
    /// The --help text of `program` (the executable the user ran: "tessera-cli" or "tessera") and this command.
    std::string helpText(std::string_view program) const;
    const std::string& command() const { return m_command; }
    const std::vector<Option>& options() const { return m_specs; }
    const std::vector<Positional>& positionals() const { return m_positionals; }

    bool isSet(const std::string& name) const; ///< switch given (and not given as false), or option given
    /// A switch given as false (`--strict False`, `--strict=0`): the user turned it off explicitly.
    bool isTurnedOff(const std::string& name) const;
    /// The option's value as given; nullopt when it was not given.
    std::optional<std::string> given(const std::string& name) const;
    std::string value(const std::string& name) const; ///< option value, or its default (as --help shows it)
    std::string positional(const std::string& name) const;

private:
    const Option* find(const std::string& flag) const;

    std::string m_command, m_synopsis, m_description;
    std::vector<Option> m_specs;
    std::vector<Positional> m_positionals;
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> m_lists;
    std::map<std::string, std::string> m_values;
    std::map<std::string, std::string> m_positionalValues;
    bool m_help = false;
    std::string m_error;
};

} // namespace tessera
