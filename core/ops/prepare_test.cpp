// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/prepare_test.h"

namespace tessera {

PreparedTest prepareTest(const TestRequest& request, const PrepareContext& context)
{
    PreparedTest p;
    p.request = request;
    auto compare = testCompareSettings(request);
    auto settings = compare ? modelSettings(request) : Result<ModelSettings>(compare.error());
    if (!settings) {
        p.refusal = Refusal { settings.error(), true };
        return p;
    }
    p.compare = std::move(*compare);
    p.compare.threads = settings->threads;
    ModelPurpose purpose;
    purpose.mergedFolderIsFine = true;
    p.model = readModel(request, *settings, purpose, context);
    MergeOptions options;
    options.dtype = settings->dtype;
    planModel(p.model, options, settings->loraOutput);
    p.refusal = p.model.refusal;
    return p;
}

Result<CompareReport> runPreparedTest(const PreparedTest& p, Progress& progress)
{
    if (p.refusal)
        return p.refusal->error;
    return compareWithReference(p.model.primaryInfo(), p.model.primary(), *p.request.testHfDir, p.compare, progress);
}

} // namespace tessera
