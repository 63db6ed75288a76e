// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/part_request.h"

namespace tessera {

Result<std::optional<PartSpec>> partSettings(const PartRequest& request, const EnvLookup& env)
{
    if (request.discard && !request.status)
        return makeError("--discard goes with --status TARGET");
    if (!request.isPartRun())
        return std::optional<PartSpec>();
    if (!request.part)
        return makeError("--parts goes with --part auto");
    auto spec = resolvePart(*request.part, request.parts.value_or(""), env);
    TESSERA_TRY(spec);
    return std::optional<PartSpec>(*spec);
}

} // namespace tessera
