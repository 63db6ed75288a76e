// SPDX-License-Identifier: GPL-3.0-or-later
// A user's pattern and a tensor name: the input's first line is the pattern, the rest the name. The pattern is
// compiled as --ignore_missing_params is (length bound, constructs RE2 lacks refused) and used as the mapping
// uses patterns, searched for in the name and matched whole with its groups; the name also goes through the
// core's own patterns over Megatron names (layer, MTP and expert numbers, numbers out of range, the TP split).

#include "fuzz_targets.h"

#include "formats/megatron_names.h"
#include "io/regex.h"

namespace tessera::fuzz {

int fuzzRegex(const std::uint8_t* data, std::size_t size)
{
    const std::string input(reinterpret_cast<const char*>(data), size);
    const auto newline = input.find('\n');
    const std::string pattern = input.substr(0, newline);
    const std::string name = newline == std::string::npos ? std::string() : input.substr(newline + 1);

    if (auto re = Regex::compile(pattern, "--ignore_missing_params")) {
        (void)re->search(name);
        std::vector<std::string> groups;
        (void)re->fullMatch(name, groups);
    }

    (void)megatronIndexProblem(name);
    if (auto layer = parseMegatronLayerName(name))
        (void)parseMegatronExpertName(layer->rest);
    if (auto mtp = parseMegatronMtpName(name))
        (void)parseMegatronExpertName(mtp->rest);
    (void)parseMegatronAdapterName(name);
    (void)megatronTpSplit(name, true);
    return 0;
}

} // namespace tessera::fuzz
