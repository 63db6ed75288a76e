// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/arg_parser.h"

#include <algorithm>
#include <cctype>

namespace tessera {

namespace {
std::string normalize(std::string flag)
{
    std::replace(flag.begin(), flag.end(), '-', '_');
    return flag;
}

/// The booleans scripts pass to switches (Python's str(bool), argparse's type=bool users, shell 0/1).
std::optional<bool> booleanWord(const std::string& text)
{
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (lower == "true" || lower == "1" || lower == "yes" || lower == "on")
        return true;
    if (lower == "false" || lower == "0" || lower == "no" || lower == "off")
        return false;
    return std::nullopt;
}

/// How a switch's value is stored: given true, or given false.
constexpr const char* kSwitchOn = "1";
constexpr const char* kSwitchOff = "0";

/// `text` padded to the help's second column (or followed by a new line there when it is too long).
std::string column(const std::string& text)
{
    return "  " + text + (text.size() < 24 ? std::string(24 - text.size(), ' ') : "\n" + std::string(26, ' '));
}
} // namespace

ArgParser::ArgParser(std::string command, std::string synopsis, std::string description)
    : m_command(std::move(command)), m_synopsis(std::move(synopsis)), m_description(std::move(description))
{
}

void ArgParser::addOption(const std::string& name, const std::string& metavar, const std::string& help,
                          const std::string& defaultValue)
{
    m_specs.push_back({ name, metavar, help, defaultValue, true });
}

void ArgParser::addSwitch(const std::string& name, const std::string& help)
{
    m_specs.push_back({ name, {}, help, {}, false });
}

void ArgParser::addPositional(const std::string& name, const std::string& help, bool optional)
{
    m_positionals.push_back({ name, help, optional });
}

const ArgParser::Option* ArgParser::find(const std::string& flag) const
{
    const std::string key = normalize(flag);
    for (const auto& spec : m_specs)
        if (spec.name == key)
            return &spec;
    return nullptr;
}

bool ArgParser::parse(const std::vector<std::string>& args)
{
    std::size_t positionalIndex = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg == "-h" || arg == "--help") {
            m_help = true;
            return true;
        }
        if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
            std::string flag = arg.substr(2);
            std::optional<std::string> inlineValue;
            if (auto eq = flag.find('='); eq != std::string::npos) {
                inlineValue = flag.substr(eq + 1);
                flag = flag.substr(0, eq);
            }
            const Option* spec = find(flag);
            if (!spec) {
                m_error = "unknown option '--" + flag + "'";
                return false;
            }
            if (!spec->takesValue) {
                bool on = true;
                if (inlineValue) {
                    const auto b = booleanWord(*inlineValue);
                    if (!b) {
                        m_error = "option '--" + flag + "' is a switch: give no value, or true/false (got '"
                            + *inlineValue + "')";
                        return false;
                    }
                    on = *b;
                } else if (i + 1 < args.size()) {
                    if (const auto b = booleanWord(args[i + 1])) {
                        on = *b;
                        ++i;
                    }
                }
                m_values[spec->name] = on ? kSwitchOn : kSwitchOff;
                continue;
            }
            if (inlineValue) {
                m_values[spec->name] = *inlineValue;
            } else if (i + 1 < args.size()) {
                m_values[spec->name] = args[++i];
            } else {
                m_error = "option '--" + flag + "' needs a value (" + spec->metavar + ")";
                return false;
            }
            continue;
        }
        if (positionalIndex >= m_positionals.size()) {
            m_error = "unexpected argument '" + arg + "'";
            return false;
        }
        m_positionalValues[m_positionals[positionalIndex++].name] = arg;
    }
    for (std::size_t p = positionalIndex; p < m_positionals.size(); ++p)
        if (!m_positionals[p].optional) {
            m_error = "missing " + m_positionals[p].name;
            return false;
        }
    return true;
}

std::string ArgParser::helpText(std::string_view program) const
{
    std::string out = "usage: " + std::string(program) + " " + m_command + " " + m_synopsis + "\n\n" + m_description + "\n";
    if (!m_positionals.empty()) {
        out += "\narguments:\n";
        for (const auto& p : m_positionals)
            out += column(p.name) + p.help + "\n";
    }
    out += "\noptions:\n";
    for (const auto& spec : m_specs) {
        // Long flags get their help on the next line so that every description starts in the same column.
        out += column("--" + spec.name + (spec.takesValue ? " " + spec.metavar : "")) + spec.help;
        if (!spec.defaultValue.empty())
            out += " (default: " + spec.defaultValue + ")";
        out += "\n";
    }
    out += "  -h, --help              show this help and exit\n";
    for (const auto& [title, entries] : m_lists) {
        out += "\n" + title + ":\n";
        for (const auto& [term, text] : entries)
            out += column(term) + text + "\n";
    }
    out += "\nFlags may be written with dashes or underscores (--local-dir or --local_dir); switches also take\n"
           "true/false, as scripts pass them (--strict False, --strict=true).\n";
    return out;
}

void ArgParser::addList(const std::string& title,
                        const std::vector<std::pair<std::string, std::string>>& entries)
{
    m_lists.push_back({ title, entries });
}

bool ArgParser::isSet(const std::string& name) const
{
    auto it = m_values.find(name);
    if (it == m_values.end())
        return false;
    const Option* spec = find(name);
    return !(spec && !spec->takesValue && it->second == kSwitchOff);
}

bool ArgParser::isTurnedOff(const std::string& name) const
{
    auto it = m_values.find(name);
    const Option* spec = find(name);
    return it != m_values.end() && spec && !spec->takesValue && it->second == kSwitchOff;
}

std::optional<std::string> ArgParser::given(const std::string& name) const
{
    if (auto it = m_values.find(name); it != m_values.end())
        return it->second;
    return std::nullopt;
}

std::string ArgParser::value(const std::string& name) const
{
    if (auto it = m_values.find(name); it != m_values.end())
        return it->second;
    if (const Option* spec = find(name))
        return spec->defaultValue;
    return {};
}

std::string ArgParser::positional(const std::string& name) const
{
    auto it = m_positionalValues.find(name);
    return it == m_positionalValues.end() ? std::string() : it->second;
}

} // namespace tessera
