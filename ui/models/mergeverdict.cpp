// SPDX-License-Identifier: GPL-3.0-or-later
#include "mergeverdict.h"

#include "coreconvert.h"
#include "models/mappingmodel.h"
#include "ops/prepare_merge.h"

#include <QCoreApplication>

namespace tessera::ui {

QString MergeVerdict::shortText() const
{
    if (!refused())
        return {};
    if (mappingProblems == 0)
        return QCoreApplication::translate("MergeVerdict", "a merge would refuse it");
    return QCoreApplication::translate("MergeVerdict", "a merge would refuse it (%1)")
        .arg(countText(mappingProblems, QCoreApplication::translate("MergeVerdict", "mapping problem"),
                       QCoreApplication::translate("MergeVerdict", "mapping problems")));
}

MergeVerdict mergeVerdict(const tessera::PreparedMerge* prepared, const CheckpointPtr& checkpoint)
{
    MergeVerdict verdict;
    if (!prepared || !checkpoint || prepared->request.localDir != checkpoint->root)
        return verdict;
    verdict.known = true;
    if (prepared->model.refusal)
        verdict.refusal = qs(prepared->model.refusal->error.message);
    if (const auto& mapping = prepared->model.mapping)
        for (const auto status : MappingModel::statuses())
            if (MappingModel::isProblem(status))
                verdict.mappingProblems += int(mapping->count(status));
    return verdict;
}

} // namespace tessera::ui
