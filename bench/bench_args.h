// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Command-line flags of the benchmark programs. Header-only: bench/CMakeLists.txt makes every bench/*.cpp an
// executable of its own.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <variant>

namespace tessera::bench {

/// One flag and the variable it sets: `--name value` for strings and numbers, bare `--name` for a bool.
struct Flag {
    const char* name;
    std::variant<std::string*, double*, int*, std::int64_t*, bool*> target;
};

/// Sets the targets of `flags` from argv. A missing value reads as ""; a value that is not a number throws
/// (std::stod and friends), which ends the program. Returns false on a flag that is not in `flags`.
inline bool parseFlags(int argc, char** argv, std::initializer_list<Flag> flags)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const Flag* flag = nullptr;
        for (const Flag& f : flags)
            if (a == f.name)
                flag = &f;
        if (!flag)
            return false;
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (auto* s = std::get_if<std::string*>(&flag->target))
            **s = next();
        else if (auto* d = std::get_if<double*>(&flag->target))
            **d = std::stod(next());
        else if (auto* n = std::get_if<int*>(&flag->target))
            **n = std::stoi(next());
        else if (auto* l = std::get_if<std::int64_t*>(&flag->target))
            **l = std::stoll(next());
        else
            *std::get<bool*>(flag->target) = true;
    }
    return true;
}

} // namespace tessera::bench
