// SPDX-License-Identifier: GPL-3.0-or-later
// The Run view offscreen: a real verl run of four saved steps (layer 1's down_proj scaled at step 30, NaN in layer
// 0's q_proj and Inf in lm_head at step 40) read on a worker, its table and heatmap models checked by
// QAbstractItemModelTester, NaN and Inf flagged, a heatmap cell opening the Diff of its tensor between the two steps,
// and the table and plots exported.

#include "jobs/driftjob.h"
#include "mainwindow.h"
#include "mappingfixtures.h"
#include "models/driftgridmodel.h"
#include "models/drifttablemodel.h"
#include "models/layerposition.h"
#include "pages/diffpage.h"
#include "pages/runpage.h"
#include "plots/plotexport.h"
#include "testutil.h"
#include "widgets/driftheatmap.h"
#include "widgets/drifttrendplot.h"

#include <QAbstractItemModelTester>
#include <QDir>
#include <QFile>
#include <QItemSelectionModel>
#include <QPushButton>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSlider>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

using namespace tessera::ui;
namespace fs = std::filesystem;

namespace {
const char* const kRun = "run_llama_w2_fp32_4steps";
const char* const kQ0 = "model.layers.0.self_attn.q_proj.weight";
const char* const kDown1 = "model.layers.1.mlp.down_proj.weight";
const char* const kHead = "lm_head.weight";

QString runRoot() { return QDir::cleanPath(QString::fromStdString(tessera::test::fixture(kRun))); }

tessera::DriftRecord record(const std::string& name, long long step, std::optional<double> change,
                            std::uint64_t nan = 0, std::uint64_t inf = 0)
{
    tessera::DriftRecord r;
    r.name = name;
    r.step = step;
    r.dtype = tessera::DType::Float32;
    r.shape = { 4, 4 };
    r.elements = 16;
    r.relativeChange = change;
    r.maxAbsChange = change;
    r.norm = nan + inf ? std::nullopt : std::optional<double>(2.0);
    r.nan = nan;
    r.inf = inf;
    if (step > 10)
        r.previousStep = step - 10;
    if (!change)
        r.why = step == 10 ? "first step" : "NaN/Inf in this step";
    return r;
}

/// Three steps of a small MoE model: two experts of one module, a tensor new at step 20, NaN and Inf at step 30.
DriftPtr handBuiltDrift()
{
    tessera::DriftReport report;
    report.root = "/runs/moe";
    report.role = "actor";
    for (long long s : { 10, 20, 30 })
        report.steps.push_back({ s, "/runs/moe/global_step_" + std::to_string(s),
                                 "/runs/moe/global_step_" + std::to_string(s) + "/actor" });
    report.tensors = { "model.embed_tokens.weight",
                       "model.layers.0.self_attn.q_proj.weight",
                       "model.layers.0.mlp.experts.0.down_proj.weight",
                       "model.layers.0.mlp.experts.1.down_proj.weight",
                       "model.layers.0.input_layernorm.weight",
                       "model.layers.1.self_attn.q_proj.weight",
                       "model.norm.weight",
                       "lm_head.weight" };
    for (long long s : { 10, 20, 30 })
        for (const auto& name : report.tensors) {
            if (name == "model.layers.1.self_attn.q_proj.weight" && s == 10)
                continue; // new at step 20
            std::optional<double> change;
            std::uint64_t nan = 0, inf = 0;
            if (s > 10)
                change = name.find("experts.1") != std::string::npos ? 0.5 : 0.01;
            if (s == 20 && name == "model.layers.1.self_attn.q_proj.weight")
                change.reset();
            if (s == 30 && name == "model.layers.0.self_attn.q_proj.weight") {
                change.reset();
                nan = 3;
            }
            if (s == 30 && name == "lm_head.weight") {
                change.reset();
                inf = 1;
            }
            report.records.push_back(record(name, s, change, nan, inf));
        }
    return std::make_shared<const IndexedDrift>(std::move(report));
}

CheckpointPtr lastStep() { return tessera::test::scanFixture(std::string(kRun) + "/global_step_40/actor"); }
} // namespace

class TestRunPage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void layerPositionsReadTheNames()
    {
        const auto q = layerPosition(QStringLiteral("model.layers.12.self_attn.q_proj.weight"));
        QCOMPARE(q.layer, 12);
        QCOMPARE(q.module, QStringLiteral("self_attn.q_proj.weight"));
        const auto expert = layerPosition(QStringLiteral("model.layers.3.mlp.experts.17.down_proj.weight"));
        QCOMPARE(expert.expert, 17);
        QCOMPARE(expert.module, QStringLiteral("mlp.experts.*.down_proj.weight"));
        const auto grouped = layerPosition(QStringLiteral("decoder.layers.3.mlp.experts.linear_fc1.weight5"));
        QCOMPARE(grouped.expert, 5);
        QCOMPARE(grouped.module, QStringLiteral("mlp.experts.linear_fc1.weight*"));
        QVERIFY(layerPosition(QStringLiteral("visual.blocks.2.attn.qkv.weight")).vision);
        QCOMPARE(layerPosition(QStringLiteral("lm_head.weight")).layer, -1);
        QCOMPARE(DriftGridModel::moduleLabel(QStringLiteral("self_attn.q_proj")), QStringLiteral("q"));
        QCOMPARE(DriftGridModel::moduleLabel(QStringLiteral("mlp.experts.*.down_proj")), QStringLiteral("experts down"));
        QCOMPARE(DriftGridModel::moduleLabel(QStringLiteral("mlp.gate")), QStringLiteral("router"));
        QCOMPARE(DriftGridModel::moduleLabel(QStringLiteral("post_attention_layernorm")), QStringLiteral("post norm"));
        QCOMPARE(DriftGridModel::moduleLabel(QStringLiteral("self_attn.q_proj.bias")), QStringLiteral("q bias"));
        // Changes short enough for a narrow column or cell.
        QCOMPARE(DriftTableModel::changeNumber(0.0009873, 3), QStringLiteral("9.87e-4"));
        QCOMPARE(DriftTableModel::changeNumber(0.001006, 2), QStringLiteral("1e-3"));
        QCOMPARE(DriftTableModel::changeNumber(0.5000157, 3), QStringLiteral("0.5"));
        QCOMPARE(DriftTableModel::changeNumber(0.0123, 3), QStringLiteral("0.0123"));
        QCOMPARE(DriftTableModel::changeNumber(2.5e7, 2), QStringLiteral("2.5e7"));
        QCOMPARE(DriftTableModel::changeNumber(0, 3), QStringLiteral("0"));
    }

    void tableModelPassesTheTester()
    {
        DriftTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        proxy.setSortRole(SortRole);
        QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setDrift(handBuiltDrift());
        QCOMPARE(model.rowCount(), 8);
        QCOMPARE(model.columnCount(), 4);
        QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QStringLiteral("step 10"));
        const int q0 = model.rowOf(QStringLiteral("model.layers.0.self_attn.q_proj.weight"));
        const QModelIndex nan = model.index(q0, DriftTableModel::columnOfStep(2));
        QVERIFY(nan.data(NonFiniteRole).toBool());
        QCOMPARE(nan.data(NanCountRole).toULongLong(), 3ull);
        QCOMPARE(nan.data().toString(), QStringLiteral("3 NaN"));
        QVERIFY(nan.data(Qt::ForegroundRole).isValid());
        QVERIFY(!nan.data(RelativeChangeRole).isValid());
        QCOMPARE(nan.data(StepRole).toLongLong(), 30);
        QCOMPARE(model.index(q0, DriftTableModel::columnOfStep(0)).data().toString(), QStringLiteral("—"));
        QCOMPARE(model.index(q0, DriftTableModel::columnOfStep(0)).data(WhyRole).toString(), QStringLiteral("first step"));
        QCOMPARE(model.index(q0, DriftTableModel::columnOfStep(1)).data(RelativeChangeRole).toDouble(), 0.01);
        // A tensor a step lacks: an empty cell that says so.
        const int q1 = model.rowOf(QStringLiteral("model.layers.1.self_attn.q_proj.weight"));
        QCOMPARE(model.index(q1, DriftTableModel::columnOfStep(0)).data().toString(), QString());
        QVERIFY(model.index(q1, DriftTableModel::columnOfStep(0)).data(Qt::ToolTipRole).toString().contains(QStringLiteral("not saved")));
        // Sorted by step 30's change: NaN/Inf first, then the largest change.
        proxy.sort(DriftTableModel::columnOfStep(2), Qt::DescendingOrder);
        QVERIFY(proxy.index(0, DriftTableModel::columnOfStep(2)).data(NonFiniteRole).toBool());
        QVERIFY(proxy.index(1, DriftTableModel::columnOfStep(2)).data(NonFiniteRole).toBool());
        QCOMPARE(proxy.index(2, 0).data().toString(), QStringLiteral("model.layers.0.mlp.experts.1.down_proj.weight"));
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void gridModelPassesTheTester()
    {
        DriftGridModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setDrift(handBuiltDrift());
        // Layers 0 and 1 down; q, the experts' down_proj (one column for both experts) and the input norm across;
        // the three tensors outside the layers in one "other" row.
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.columnCount(), 3);
        QCOMPARE(model.headerData(0, Qt::Horizontal).toString(), QStringLiteral("q"));
        QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QStringLiteral("experts down"));
        QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QStringLiteral("in norm"));
        QCOMPARE(model.headerData(0, Qt::Vertical).toString(), QStringLiteral("0"));
        QCOMPARE(model.headerData(2, Qt::Vertical).toString(), QStringLiteral("other"));
        QCOMPARE(model.firstOtherRow(), 2);
        QCOMPARE(model.step(), 2); // the last step first
        // The experts' cell: the largest change of both, its tensor the one that moved most.
        const QModelIndex experts = model.index(0, 1);
        QCOMPARE(experts.data(DriftGridModel::CellTensorsRole).toStringList().size(), 2);
        QCOMPARE(experts.data(RelativeChangeRole).toDouble(), 0.5);
        QCOMPARE(experts.data(TensorNameRole).toString(), QStringLiteral("model.layers.0.mlp.experts.1.down_proj.weight"));
        // NaN in layer 0's q, Inf in lm_head, both flagged; layer 1 has no experts or norm.
        QVERIFY(model.index(0, 0).data(NonFiniteRole).toBool());
        QCOMPARE(model.index(0, 0).data(NanCountRole).toULongLong(), 3ull);
        QCOMPARE(model.indexOfTensor(QStringLiteral("lm_head.weight")), model.index(2, 2));
        QVERIFY(model.index(2, 2).data(NonFiniteRole).toBool());
        QCOMPARE(model.index(2, 2).data(DriftGridModel::CellLabelRole).toString(), QStringLiteral("lm_head"));
        QCOMPARE(model.index(2, 0).data(DriftGridModel::CellLabelRole).toString(), QStringLiteral("embed_tokens"));
        QVERIFY(!model.index(1, 1).data().isValid());
        QVERIFY(model.index(1, 1).data(DriftGridModel::CellTensorsRole).toStringList().isEmpty());
        // Another step: its values, and no NaN anywhere.
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        model.setStep(1);
        QCOMPARE(changed.count(), 1);
        QVERIFY(!model.index(0, 0).data(NonFiniteRole).toBool());
        QCOMPARE(model.index(0, 0).data(RelativeChangeRole).toDouble(), 0.01);
        QVERIFY(!model.index(1, 0).data(RelativeChangeRole).isValid()); // new at step 20
        QCOMPARE(model.changeRange(), std::make_optional(std::make_pair(0.01, 0.5)));
        model.setStep(7); // out of range: ignored
        QCOMPARE(model.step(), 1);
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    /// The real run, read on the page's worker: the models pass the tester, NaN and Inf are flagged in the table,
    /// the heatmap and the plot, and a heatmap cell asks for the Diff of its tensor between its two steps.
    void readsTheRunAndOpensTheDiff()
    {
        RunPage page;
        QAbstractItemModelTester tableTester(page.tableModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester gridTester(page.gridModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        page.resize(1100, 700);
        page.show();
        QSignalSpy shown(&page, &RunPage::driftShown);
        page.setRun(runRoot(), lastStep()); // 4 × 686 KB: read at once
        QVERIFY(page.isRun());
        QCOMPARE(page.steps().size(), std::size_t(4));
        QVERIFY(page.isBusy());
        QCOMPARE(page.commandLine(), QStringLiteral("tessera drift ") + runRoot());
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 60000);
        QVERIFY(!page.isBusy());
        auto* table = page.tableModel();
        QCOMPARE(table->rowCount(), 30);
        QCOMPARE(table->columnCount(), 5);
        const QModelIndex nan = table->index(table->rowOf(QString::fromLatin1(kQ0)), DriftTableModel::columnOfStep(3));
        QVERIFY(nan.data(NonFiniteRole).toBool());
        QCOMPARE(nan.data(NanCountRole).toULongLong(), 3ull);
        const QModelIndex inf = table->index(table->rowOf(QString::fromLatin1(kHead)), DriftTableModel::columnOfStep(3));
        QVERIFY(inf.data(NonFiniteRole).toBool());
        QCOMPARE(inf.data(InfCountRole).toULongLong(), 1ull);
        const QModelIndex scaled = table->index(table->rowOf(QString::fromLatin1(kDown1)), DriftTableModel::columnOfStep(2));
        QVERIFY(std::abs(scaled.data(RelativeChangeRole).toDouble() - 0.5000157608363573) < 1e-12);
        int nonFinite = 0;
        for (int r = 0; r < table->rowCount(); ++r)
            for (int c = DriftTableModel::FirstStepColumn; c < table->columnCount(); ++c)
                nonFinite += table->index(r, c).data(NonFiniteRole).toBool();
        QCOMPARE(nonFinite, 2);
        QVERIFY(page.statusText().contains(QStringLiteral("NaN/Inf")));

        // The heatmap opens on step 40, where NaN and Inf appeared: both cells marked.
        auto* grid = page.gridModel();
        QCOMPARE(grid->rowCount(), 4);    // layers 0 to 2, other
        QCOMPARE(grid->columnCount(), 9); // q k v o gate up down, the two norms
        QCOMPARE(grid->step(), 3);
        QCOMPARE(page.stepSlider()->value(), 3);
        QVERIFY(grid->indexOfTensor(QString::fromLatin1(kQ0)).data(NonFiniteRole).toBool());
        QVERIFY(grid->indexOfTensor(QString::fromLatin1(kHead)).data(NonFiniteRole).toBool());
        QCoreApplication::processEvents();
        QCOMPARE(page.heatmap()->nonFiniteMarks(), 2);
        QVERIFY(page.heatmap()->title().contains(QStringLiteral("step 40 (vs 30)")));
        // The plot shows the selected tensor (the first with NaN), its NaN step marked.
        QCOMPARE(page.trendPlot()->tensor(), QString::fromLatin1(kQ0));
        QCOMPARE(page.trendPlot()->nonFiniteMarks(), 1);

        // Step 30 on the slider; clicking layer 1's down_proj asks for the Diff of step 20 against step 30.
        page.stepSlider()->setValue(2);
        QCOMPARE(grid->step(), 2);
        QCOMPARE(page.heatmap()->nonFiniteMarks(), 0);
        QSignalSpy diff(&page, &RunPage::diffRequested);
        const QModelIndex cell = grid->indexOfTensor(QString::fromLatin1(kDown1));
        QCOMPARE(cell, grid->index(1, 6));
        page.heatmap()->replot();
        QTest::mouseClick(page.heatmap(), Qt::LeftButton, {}, page.heatmap()->cellCenter(cell));
        QCOMPARE(diff.count(), 1);
        const auto request = diff.first().at(0).value<tessera::DiffRequest>();
        QCOMPARE(QString::fromStdString(request.a.value_or("")), runRoot() + QStringLiteral("/global_step_20/actor"));
        QCOMPARE(QString::fromStdString(request.b.value_or("")), runRoot() + QStringLiteral("/global_step_30/actor"));
        QCOMPARE(diff.first().at(1).toString(), QString::fromLatin1(kDown1));
        QCOMPARE(page.trendPlot()->tensor(), QString::fromLatin1(kDown1));
        // The first step has nothing before it.
        page.showStep(0);
        QVERIFY(!page.diffRequest(QString::fromLatin1(kDown1), 0));
        QTest::mouseClick(page.heatmap(), Qt::LeftButton, {}, page.heatmap()->cellCenter(cell));
        QCOMPARE(diff.count(), 1);
        // A double-click in the table: the same pair.
        auto* view = page.tableView();
        const QModelIndex viewCell = view->model()->index(
            static_cast<QSortFilterProxyModel*>(view->model())->mapFromSource(table->index(table->rowOf(QString::fromLatin1(kHead)), 0)).row(),
            DriftTableModel::columnOfStep(3));
        view->scrollTo(viewCell);
        const QPoint at = view->visualRect(viewCell).center();
        QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, at); // the view opens a double-click it saw pressed
        QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, at);
        QTRY_COMPARE(diff.count(), 2);
        QCOMPARE(QString::fromStdString(diff.last().at(0).value<tessera::DiffRequest>().a.value_or("")),
                 runRoot() + QStringLiteral("/global_step_30/actor"));
        QCOMPARE(diff.last().at(1).toString(), QString::fromLatin1(kHead));
        QVERIFY(!page.grab().isNull());
    }

    void exportsTheTableAndThePlots()
    {
        RunPage page;
        page.resize(1100, 700);
        page.show();
        QSignalSpy shown(&page, &RunPage::driftShown);
        page.setRun(runRoot(), lastStep());
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 60000);
        const QString dir = QString::fromStdString(tessera::test::makeTempDir());
        QString error;
        QVERIFY2(page.exportTable(dir + QStringLiteral("/drift.json"), &error), qPrintable(error));
        QVERIFY2(page.exportTable(dir + QStringLiteral("/drift.csv"), &error), qPrintable(error));
        const auto json = nlohmann::json::parse(tessera::test::readFile(QString(dir + QStringLiteral("/drift.json")).toStdString()));
        QCOMPARE(json["records"].size(), std::size_t(120));
        QCOMPARE(json["clean"].get<bool>(), false);
        const QString csv = QString::fromStdString(tessera::test::readFile(QString(dir + QStringLiteral("/drift.csv")).toStdString()));
        QCOMPARE(csv.count(QStringLiteral("\r\n")), 121);
        QVERIFY(csv.startsWith(QStringLiteral("name,step,")));
        QVERIFY(!page.exportTable(dir + QStringLiteral("/missing/drift.csv"), &error));
        QVERIFY(error.contains(QStringLiteral("Cannot write")));
        // Both plots through their Save Plot… action (the Export menu's), in every format.
        QStringList suggested;
        QString answer;
        setSavePlotDialog([&](QWidget*, const QString& suggestedPath, QString* selectedFilter) -> QString {
            suggested << suggestedPath;
            *selectedFilter = QString();
            return answer;
        });
        const std::pair<const char*, QByteArray> formats[] = { { "png", QByteArray("\x89PNG") },
                                                               { "svg", QByteArray("<?xml") },
                                                               { "pdf", QByteArray("%PDF") } };
        for (QCustomPlot* plot : { static_cast<QCustomPlot*>(page.heatmap()), static_cast<QCustomPlot*>(page.trendPlot()) })
            for (const auto& [suffix, magic] : formats) {
                answer = dir + QStringLiteral("/plot-%1.%2").arg(suggested.size()).arg(QLatin1String(suffix));
                QCOMPARE(plot->actions().size(), 1);
                plot->actions().first()->trigger();
                QFile file(answer);
                QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(answer));
                QVERIFY2(file.read(magic.size()) == magic, qPrintable(answer));
            }
        setSavePlotDialog({});
        QCOMPARE(suggested.first(), QStringLiteral("drift-step-40.png"));
        QCOMPARE(suggested.last(), QString::fromLatin1(kQ0) + QStringLiteral(".png"));
    }

    void aSingleCheckpointNeedsARunRoot()
    {
        RunPage page;
        QSignalSpy open(&page, &RunPage::openPathRequested);
        page.setRun(runRoot() + QStringLiteral("/global_step_20/actor"), lastStep());
        QVERIFY(!page.isRun());
        QVERIFY(!page.isBusy());
        QVERIFY(!page.computeDrift());
        QVERIFY2(page.messageText().contains(QStringLiteral("needs a run root")), qPrintable(page.messageText()));
        // The run above it is offered.
        QPushButton* offer = nullptr;
        for (auto* button : page.findChildren<QPushButton*>())
            if (button->text().startsWith(QStringLiteral("Open the Run")))
                offer = button;
        QVERIFY(offer && !offer->isHidden());
        offer->click();
        QCOMPARE(open.count(), 1);
        QCOMPARE(open.first().first().toString(), runRoot());
        page.setRun(QStringLiteral("/nonexistent/run"), nullptr);
        QVERIFY(!page.isRun());
        QVERIFY(!page.messageText().isEmpty());
    }

    void cancelStopsTheRead()
    {
        RunPage page;
        QSignalSpy shown(&page, &RunPage::driftShown);
        page.setRun(runRoot(), nullptr); // size unknown: waits for Compute Drift
        QVERIFY(page.isRun());
        QVERIFY(!page.isBusy());
        QVERIFY(page.computeButton()->isEnabled());
        QVERIFY(page.computeDrift());
        QVERIFY(page.isBusy());
        QSignalSpy canceled(page.job(), &DriftJob::canceled);
        page.cancel();
        QCOMPARE(canceled.count(), 1);
        QVERIFY(!page.isBusy());
        QTest::qWait(300);
        QCOMPARE(shown.count(), 0);
        QCOMPARE(page.tableModel()->rowCount(), 0);
        QVERIFY(page.computeButton()->isEnabled());
    }

    /// The job's progress (bytes) arrives on the GUI thread, its last report the end; a bad root is an error.
    void jobReportsProgressAndErrors()
    {
        DriftJob job;
        QSignalSpy progress(&job, &DriftJob::progress);
        QSignalSpy finished(&job, &DriftJob::finished);
        QSignalSpy failed(&job, &DriftJob::failed);
        tessera::DriftOptions options;
        options.root = runRoot().toStdString();
        job.start(options);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(!progress.isEmpty(), 5000);
        QCOMPARE(progress.last().at(0).toULongLong(), progress.last().at(1).toULongLong());
        const auto drift = finished.first().first().value<DriftPtr>();
        QCOMPARE(drift->stepCount(), std::size_t(4));
        QCOMPARE(drift->tensorCount(), std::size_t(30));
        QVERIFY(drift->record(0, 3));
        QCOMPARE(drift->tensorIndex("lm_head.weight"), 29);
        options.root = "/nonexistent/run";
        job.start(options);
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60000);
        QVERIFY(!failed.first().first().toString().isEmpty());
    }

    /// While it reads, the job sends what it has read so far: every step and tensor from the first report on, the
    /// records growing, laid out step by step as the final report lays them out, each one the final record.
    void jobSendsThePartialReportsOnTheWay()
    {
        DriftJob job;
        job.setPartialInterval(0);
        QSignalSpy partial(&job, &DriftJob::partial);
        QSignalSpy finished(&job, &DriftJob::finished);
        tessera::DriftOptions options;
        options.root = runRoot().toStdString();
        job.start(options);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QVERIFY(partial.count() > 10);
        const auto whole = finished.first().first().value<DriftPtr>();
        std::size_t before = 0;
        for (const auto& arguments : partial) {
            const auto soFar = arguments.first().value<DriftPtr>();
            QCOMPARE(soFar->stepCount(), whole->stepCount());
            QCOMPARE(soFar->report().tensors, whole->report().tensors);
            const auto& records = soFar->report().records;
            QVERIFY(records.size() > before);
            before = records.size();
            for (std::size_t i = 1; i < records.size(); ++i)
                QVERIFY(records[i - 1].step <= records[i].step);
            for (const auto& r : records) {
                const auto* final = whole->report().find(r.name, r.step);
                QVERIFY(final);
                QCOMPARE(r.relativeChange, final->relativeChange);
                QCOMPARE(r.nan, final->nan);
            }
        }
        QVERIFY(before < whole->report().records.size() + 1);
    }

    /// The heatmap fills while the run is read, the step slider usable meanwhile; the table waits for the whole run.
    void theHeatmapFillsAsTheReadGoes()
    {
        RunPage page;
        QAbstractItemModelTester gridTester(page.gridModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        page.job()->setPartialInterval(0);
        QSignalSpy shown(&page, &RunPage::driftShown);
        // Each partial report as the page has just taken it (the page's own connection comes first).
        int seen = 0, drawn = 0;
        connect(page.job(), &DriftJob::partial, &page, [&](const DriftPtr& soFar) {
            ++seen;
            drawn += page.drift() == soFar && page.gridModel()->rowCount() == 4 && page.stepSlider()->isEnabled()
                && page.stepSlider()->maximum() == 3 && page.tableModel()->rowCount() == 0 && shown.isEmpty();
        });
        page.setRun(runRoot(), nullptr);
        QVERIFY(page.computeDrift());
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 60000);
        QVERIFY(seen > 10);
        QCOMPARE(drawn, seen);
        QCOMPARE(page.tableModel()->rowCount(), 30);
        QCOMPARE(page.drift()->report().records.size(), std::size_t(4 * 30));
    }

    /// A step the user picks while the run is read stays shown when the whole run arrives: the page does not jump
    /// to the step with NaN (step 40 here) from under them.
    void aStepPickedWhileReadingStays()
    {
        RunPage page;
        page.job()->setPartialInterval(0);
        QSignalSpy shown(&page, &RunPage::driftShown);
        bool picked = false;
        connect(page.job(), &DriftJob::partial, &page, [&](const DriftPtr& soFar) {
            if (!picked && soFar->stepCount() >= 2) {
                page.stepSlider()->setValue(1); // as a drag or an arrow key does
                picked = true;
            }
        });
        page.setRun(runRoot(), nullptr);
        QVERIFY(page.computeDrift());
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 60000);
        QVERIFY(picked);
        QCOMPARE(page.stepSlider()->value(), 1);
        QCOMPARE(page.gridModel()->step(), 1);
        // Read again without touching the slider: the page opens on the step with NaN and Inf.
        QVERIFY(page.computeDrift());
        picked = true;
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 2, 60000);
        QCOMPARE(page.stepSlider()->value(), 3);
    }

    /// The Steps field is --steps: in the command line, read as `tessera drift` reads it, and refused the same way.
    void theStepsFieldChoosesTheSteps()
    {
        RunPage page;
        QSignalSpy shown(&page, &RunPage::driftShown);
        page.setRun(runRoot(), nullptr);
        auto* field = page.findChild<QLineEdit*>();
        QVERIFY(field);
        field->setText(QStringLiteral("20, 40"));
        QCOMPARE(page.commandLine(), QStringLiteral("tessera drift ") + runRoot() + QStringLiteral(" --steps '20,40'"));
        QVERIFY(page.computeDrift());
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 60000);
        QCOMPARE(page.drift()->stepCount(), std::size_t(2));
        QCOMPARE(page.drift()->report().steps[1].step, 40LL);
        // A step the run did not save: the same refusal as the command line's, naming the saved ones.
        field->setText(QStringLiteral("25"));
        QVERIFY(page.computeDrift());
        QTRY_VERIFY_WITH_TIMEOUT(!page.isBusy(), 60000);
        QVERIFY2(page.statusText().contains(QStringLiteral("10, 20, 30, 40")), qPrintable(page.statusText()));
        QVERIFY(!page.drift()); // nothing of the earlier read stays to be exported
        // A new run opened starts with every step again.
        page.setRun(runRoot(), nullptr);
        QVERIFY(field->text().isEmpty());
    }

    /// The workbench end to end: opening the run root offers the Run view; a heatmap cell opens the Diff view on
    /// that tensor between the two steps.
    void theWorkbenchOpensTheDiffOfACell()
    {
        MainWindow window;
        window.resize(1280, 720);
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        QSignalSpy shown(window.runPage(), &RunPage::driftShown);
        window.openPath(runRoot());
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        QVERIFY(window.runPage()->isRun());
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 60000);
        window.showView(MainWindow::View::Run);
        QCOMPARE(window.currentView(), MainWindow::View::Run);
        auto* page = window.runPage();
        page->showStep(2);
        QCoreApplication::processEvents();
        page->heatmap()->replot();
        auto* diff = window.diffPage();
        QSignalSpy compared(diff, &DiffPage::comparisonFinished);
        const QModelIndex cell = page->gridModel()->indexOfTensor(QString::fromLatin1(kDown1));
        QTest::mouseClick(page->heatmap(), Qt::LeftButton, {}, page->heatmap()->cellCenter(cell));
        QCOMPARE(window.currentView(), MainWindow::View::Diff);
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 60000);
        QCOMPARE(diff->pathA(), QDir::toNativeSeparators(runRoot() + QStringLiteral("/global_step_20/actor")));
        QCOMPARE(diff->referenceDir(), QDir::toNativeSeparators(runRoot() + QStringLiteral("/global_step_30/actor")));
        const QModelIndex current = diff->tableView()->selectionModel()->currentIndex();
        QCOMPARE(current.siblingAtColumn(0).data().toString(), QString::fromLatin1(kDown1));
    }
};

QTEST_MAIN(TestRunPage)
#include "tst_runpage.moc"
