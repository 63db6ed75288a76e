// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// prepareTest(): a test request turned into the merge it compares, planned as `tessera test` and the Merge page's
// Test against reference both run it.

#include "compare/model_compare.h"
#include "ops/prepare_model.h"
#include "ops/test_request.h"

#include <optional>

namespace tessera {

/// A test ready to run: the merge it compares, planned, and how it compares.
struct PreparedTest {
    TestRequest request;
    PreparedModel model;
    CompareOptions compare;
    std::optional<Refusal> refusal;
};

/// Checks `request` and prepares the merge it tests, as `tessera test` does.
PreparedTest prepareTest(const TestRequest& request, const PrepareContext& context = {});

/// Merges the prepared model in memory and compares it with the reference, tensor by tensor; writes nothing.
Result<CompareReport> runPreparedTest(const PreparedTest& prepared, Progress& progress = silentProgress());

} // namespace tessera
