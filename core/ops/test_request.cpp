// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/test_request.h"

#include "ops/option_values.h"

namespace tessera {

namespace {

using R = TestRequest;

const std::vector<Flag<R>>& testFlags()
{
    static const std::vector<Flag<R>> flags = [] {
        auto all = modelFlags<R>();
        const std::vector<Flag<R>> own {
            option<R>("test_hf_dir", "DIR", "the reference model folder (model.safetensors or an index)", &R::testHfDir),
            option<R>("atol", "A", "absolute tolerance", &R::atol, "0"),
            option<R>("rtol", "R", "relative tolerance: |a-b| <= atol + rtol*|b|", &R::rtol, "0"),
            toggle<R>("failures_only", "list only the tensors that differ", &R::failuresOnly),
        };
        all.insert(all.end(), own.begin(), own.end());
        return all;
    }();
    return flags;
}

} // namespace

Result<CompareOptions> testCompareSettings(const TestRequest& r)
{
    if (r.testHfDir.value_or("").empty())
        return makeError("--test_hf_dir is required");
    CompareOptions compare;
    auto atol = toleranceValue("atol", r.atol);
    TESSERA_TRY(atol);
    auto rtol = toleranceValue("rtol", r.rtol);
    TESSERA_TRY(rtol);
    compare.atol = *atol;
    compare.rtol = *rtol;
    if (r.isValueModel || r.tieWordEmbedding)
        compare.ignore.insert("lm_head.weight"); // as verl's test does
    return compare;
}

ArgParser TestRequest::parser()
{
    ArgParser parser("test", "--local_dir DIR --test_hf_dir DIR [--atol A --rtol R]",
                     "Merge a checkpoint in memory, tensor by tensor, and compare it with a Hugging Face reference\n"
                     "model: names, shapes, dtypes and values (bit-exact unless a tolerance is given). Writes nothing.\n"
                     "Prints one line per tensor and exits with 1 on any difference.");
    declareFlags(parser, testFlags());
    return parser;
}

TestRequest TestRequest::fromParser(const ArgParser& parsed)
{
    TestRequest r;
    readFlags(parsed, testFlags(), r);
    r.strict = readStrict(parsed);
    return r;
}

Result<TestRequest> TestRequest::fromArgs(const std::vector<std::string>& args)
{
    return requestFromArgs<TestRequest>(args, "a test");
}

std::vector<std::string> TestRequest::toArgs() const
{
    std::vector<std::string> args;
    writeFlags(*this, testFlags(), args);
    writeStrict(strict, args);
    return args;
}

Status TestRequest::validate() const
{
    TESSERA_TRY(testCompareSettings(*this));
    TESSERA_TRY(modelSettings(*this));
    return Status::success();
}

bool TestRequest::operator==(const TestRequest& o) const
{
    return fields() == o.fields() && std::tie(testHfDir, atol, rtol, failuresOnly)
        == std::tie(o.testHfDir, o.atol, o.rtol, o.failuresOnly);
}

} // namespace tessera
