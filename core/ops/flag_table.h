// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// One table per request binds each flag to the field that holds it: the parser (and so --help) is built from it,
// fromArgs() reads the fields through it and toArgs() writes them back, so a flag cannot be parsed and forgotten,
// or shown and not parsed.

#include "ops/arg_parser.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// One flag of a command and where its request keeps it: an option's value as given (nullopt: not given, its
/// default applies), a switch as on or off. A flag with neither is read and written by the request's own code.
template <typename Request>
struct Flag {
    std::string name;
    std::string metavar; ///< empty for a switch
    std::string help;
    std::string defaultText; ///< the default as --help states it
    std::optional<std::string> Request::*value = nullptr;
    bool Request::*on = nullptr;
};

/// An option: --name VALUE.
template <typename Request, typename Owner>
Flag<Request> option(std::string name, std::string metavar, std::string help, std::optional<std::string> Owner::*field,
                     std::string defaultText = {})
{
    return { std::move(name), std::move(metavar), std::move(help), std::move(defaultText), field, nullptr };
}

/// A switch: --name (also --name true/false).
template <typename Request, typename Owner>
Flag<Request> toggle(std::string name, std::string help, bool Owner::*field)
{
    return { std::move(name), {}, std::move(help), {}, nullptr, field };
}

/// A switch the request reads and writes itself (--strict and --no_strict make one field).
template <typename Request>
Flag<Request> customSwitch(std::string name, std::string help)
{
    return { std::move(name), {}, std::move(help), {}, nullptr, nullptr };
}

/// Declares `flags` to `parser`, in order.
template <typename Request>
void declareFlags(ArgParser& parser, const std::vector<Flag<Request>>& flags)
{
    for (const auto& f : flags) {
        if (f.metavar.empty())
            parser.addSwitch(f.name, f.help);
        else
            parser.addOption(f.name, f.metavar, f.help, f.defaultText);
    }
}

/// Reads every bound flag of `flags` from a successful parse into `request`.
template <typename Request>
void readFlags(const ArgParser& parser, const std::vector<Flag<Request>>& flags, Request& request)
{
    for (const auto& f : flags) {
        if (f.value)
            request.*f.value = parser.given(f.name);
        else if (f.on)
            request.*f.on = parser.isSet(f.name);
    }
}

/// Appends every bound flag that `request` sets to `args`, as `--name value` and `--name`.
template <typename Request>
void writeFlags(const Request& request, const std::vector<Flag<Request>>& flags, std::vector<std::string>& args)
{
    for (const auto& f : flags) {
        if (f.value && request.*f.value) {
            args.push_back("--" + f.name);
            args.push_back(*(request.*f.value));
        } else if (f.on && request.*f.on) {
            args.push_back("--" + f.name);
        }
    }
}

/// The request the words after `tessera COMMAND` make, read as the command line reads them (Request::parser(),
/// then Request::fromParser()); the error is the usage error. `what` names the command's work in the refusal of
/// --help ("a merge").
template <typename Request>
Result<Request> requestFromArgs(const std::vector<std::string>& args, const char* what)
{
    ArgParser p = Request::parser();
    if (!p.parse(args))
        return makeError(p.error());
    if (p.helpRequested())
        return makeError(std::string("--help asks for the help text, not ") + what);
    return Request::fromParser(p);
}

/// "tessera merge --local_dir 'my run' …": `command` and `args` as a POSIX shell reads them, each word quoted
/// only when it needs to be.
std::string commandLineText(const std::string& command, const std::vector<std::string>& args);
/// `word` quoted for a POSIX shell when it holds anything but letters, digits and _./:=@+-.
std::string shellQuoted(const std::string& word);

} // namespace tessera
