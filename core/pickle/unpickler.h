// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "io/mapped_file.h"
#include "pickle/pickle_value.h"
#include "result.h"

#include <string>

namespace tessera {

/// Bounds that keep a hostile pickle from exhausting memory or the stack.
struct UnpickleLimits {
    int maxDepth = 256;                       ///< nesting of containers and objects
    std::uint64_t maxStack = 10'000'000;      ///< values on the stack at once
    std::uint64_t maxMemo = 50'000'000;       ///< memo entries
    std::uint64_t maxMarks = 100'000;         ///< open MARKs
};

/// Runs a restricted pickle machine over `bytes` (protocols 0–5 as torch and DCP write them).
///
/// No code ever runs. Globals are resolved against an allow-list: torch's tensor rebuild functions, storages,
/// dtypes, torch.Size/device/layout, OrderedDict, set, bytes and friends become typed values; DTensor,
/// ShardedTensor, DCP metadata, argparse.Namespace and other classes instantiated with NEWOBJ become inert
/// Object records. A global from a dangerous module (os, sys, subprocess, builtins.eval, …) or a REDUCE of any
/// callable outside the allow-list is refused with an error naming the global. Persistent ids must be torch
/// storage ids and become Storage values. `displayName` prefixes every error.
Result<PyRef> unpickle(const ByteView& bytes, const std::string& displayName, const UnpickleLimits& limits = {});

} // namespace tessera
