// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera test` as data: merge in memory and compare with a reference model. Read from argv or from the
// workbench's Merge page (Test against reference).

#include "compare/model_compare.h"
#include "ops/arg_parser.h"
#include "ops/model_request.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct TestRequest : ModelRequest {
    std::optional<std::string> testHfDir; ///< --test_hf_dir: the reference model
    std::optional<std::string> atol;      ///< --atol (0)
    std::optional<std::string> rtol;      ///< --rtol (0)
    bool failuresOnly = false;

    static ArgParser parser();
    static TestRequest fromParser(const ArgParser& parsed);
    /// The words after `tessera test`, read as the command line reads them; the error is the usage error.
    static Result<TestRequest> fromArgs(const std::vector<std::string>& args);
    /// The words after `tessera test` that make this request.
    std::vector<std::string> toArgs() const;
    /// Every check of the flags that needs nothing read; an error is a usage error.
    Status validate() const;

    bool operator==(const TestRequest& other) const;
    bool operator!=(const TestRequest& other) const { return !(*this == other); }
};

/// The test's own flags checked (--test_hf_dir, --atol, --rtol, in the command line's order): the comparison they
/// ask for (lm_head.weight not required of a value model or tied embeddings, as verl's test does).
Result<CompareOptions> testCompareSettings(const TestRequest& request);

} // namespace tessera
