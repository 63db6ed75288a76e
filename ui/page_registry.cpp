// SPDX-License-Identifier: GPL-3.0-or-later
#include "page_registry.h"

#include "pages/diffpage.h"
#include "pages/mappingpage.h"
#include "pages/mergepage.h"
#include "pages/placementpage.h"
#include "pages/runpage.h"
#include "pages/splitpage.h"
#include "pages/summarypage.h"
#include "pages/trainingpage.h"

#include <QCoreApplication>

namespace tessera::ui {

namespace {

template <typename Page>
QWidget* make(QWidget* parent)
{
    return new Page(parent);
}

} // namespace

const std::vector<PageSpec>& workbenchPages()
{
    // The Tree view shows the Summary in the tabs, beside the shard tree that is always there.
    static const std::vector<PageSpec> pages {
        { View::Tree, "tree", QT_TRANSLATE_NOOP("Workbench", "&Tree and Summary"),
          QT_TRANSLATE_NOOP("Workbench", "Summary"), 1, false, 0.62,
          QT_TRANSLATE_NOOP("Workbench", "<b>Tree and Summary</b>: every file, tensor and piece, and every problem "
                                         "in red. The Summary says what a merge would refuse."),
          &make<SummaryPage> },
        { View::Placement, "placement", QT_TRANSLATE_NOOP("Workbench", "&Placement"),
          QT_TRANSLATE_NOOP("Workbench", "Placement"), 2, false, 0.45,
          QT_TRANSLATE_NOOP("Workbench", "<b>Placement</b>: where each rank's pieces sit in the tensor selected in "
                                         "the tree. <b>Statistics…</b> (there, or right-click in the tree) shows one "
                                         "tensor's range, NaN, Inf and histogram with nothing to compare."),
          &make<PlacementPage> },
        { View::Mapping, "mapping", QT_TRANSLATE_NOOP("Workbench", "&Mapping"),
          QT_TRANSLATE_NOOP("Workbench", "Mapping"), 3, false, 0.2,
          QT_TRANSLATE_NOOP("Workbench", "<b>Mapping</b>: each name and the Hugging Face name it becomes, with the "
                                         "rules editor for Megatron checkpoints and the factors of a LoRA adapter."),
          &make<MappingPage> },
        { View::Merge, "merge", QT_TRANSLATE_NOOP("Workbench", "M&erge"), QT_TRANSLATE_NOOP("Workbench", "Merge"), 4,
          true, 0.26,
          QT_TRANSLATE_NOOP("Workbench", "<b>Merge</b>: choose an output folder, read the plan, press Merge. Test "
                                         "against reference compares without writing; Open in Diff shows the "
                                         "differences tensor by tensor."),
          &make<MergePage> },
        { View::Split, "split", QT_TRANSLATE_NOOP("Workbench", "&Split"), QT_TRANSLATE_NOOP("Workbench", "Split"), 5,
          true, 0.26,
          QT_TRANSLATE_NOOP("Workbench", "<b>Split</b>: a Hugging Face model back into the rank files or folders "
                                         "of a training run, at the world size and parallelism you choose."),
          &make<SplitPage> },
        { View::Diff, "diff", QT_TRANSLATE_NOOP("Workbench", "&Diff"), QT_TRANSLATE_NOOP("Workbench", "Diff"), 6,
          false, 0.2,
          QT_TRANSLATE_NOOP("Workbench", "<b>Diff</b>: compare any two checkpoints or models (A is the loaded one "
                                         "unless you choose another); select a row for histograms and heatmaps; "
                                         "Export… saves the table, a right-click saves a plot as PNG, SVG or PDF."),
          &make<DiffPage> },
        { View::Training, "training", QT_TRANSLATE_NOOP("Workbench", "T&raining State"),
          QT_TRANSLATE_NOOP("Workbench", "Training"), 7, false, 0.3,
          QT_TRANSLATE_NOOP("Workbench", "<b>Training</b>: a verl checkpoint's optimizer, hyper-parameters, Adam step, "
                                         "scheduler, RNG and dataloader state, whether every rank has it, and each "
                                         "parameter's norms of exp_avg and √exp_avg_sq: which layers are still moving."),
          &make<TrainingPage> },
        { View::Run, "run", QT_TRANSLATE_NOOP("Workbench", "R&un"), QT_TRANSLATE_NOOP("Workbench", "Run"), 8, false,
          0.16,
          QT_TRANSLATE_NOOP("Workbench", "<b>Run</b>: open a run root (the folder of a run's global_step_N, iter_N or "
                                         "step-N folders) to see how every tensor moved from each saved step to the "
                                         "next: a heatmap of layers × modules, NaN and Inf in red, one tensor's norm "
                                         "and change over the steps. Click a cell for the Diff of that tensor between "
                                         "the two steps; Export saves the table (CSV, JSON) and the plots."),
          &make<RunPage> },
    };
    return pages;
}

const PageSpec& pageSpec(View view)
{
    for (const auto& page : workbenchPages())
        if (page.view == view)
            return page;
    return workbenchPages().front(); // every View has a row (tst_mainwindow checks it)
}

std::optional<View> viewFromName(const QString& name)
{
    for (const auto& page : workbenchPages())
        if (name == QLatin1String(page.name))
            return page.view;
    return std::nullopt;
}

QString viewName(View view) { return QLatin1String(pageSpec(view).name); }

QStringList viewNames()
{
    QStringList names;
    for (const auto& page : workbenchPages())
        names << QLatin1String(page.name);
    return names;
}

QString workbenchText(const char* text) { return QCoreApplication::translate("Workbench", text); }

} // namespace tessera::ui
