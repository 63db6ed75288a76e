// SPDX-License-Identifier: GPL-3.0-or-later
// The diff page end to end, offscreen: a fixture against a copy of its reference with one changed value.

#include "models/difffilterproxy.h"
#include "models/difftablemodel.h"
#include "jobs/comparejob.h"
#include "pages/diffpage.h"
#include "pages/mergepage.h"
#include "testutil.h"
#include "mainwindow.h"
#include "page_registry.h"
#include "widgets/copynames.h"
#include "widgets/diffdetailview.h"
#include "widgets/tensornameelide.h"

#include "model/convert.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"

#include "plots/plotexport.h"
#include "plots/qcp.h"

#include <QAction>
#include <QComboBox>
#include <QBrush>
#include <QDir>
#include <QLineEdit>
#include <QFile>
#include <QFileInfo>
#include <QPushButton>
#include <QHeaderView>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

using namespace tessera::ui;
namespace fs = std::filesystem;

namespace {

const char* kTensor = "model.layers.0.mlp.down_proj.weight";

CheckpointPtr scanFixture(const std::string& path)
{
    auto scanned = tessera::scanCheckpoint(path);
    if (!scanned)
        qFatal("%s", scanned.error().message.c_str());
    return std::make_shared<const tessera::CheckpointInfo>(std::move(scanned).value());
}

/// hsdp_qwen2_2x2/reference with element [1, 3] of kTensor changed.
QString changedReference()
{
    const std::string dir = tessera::test::makeTempDir() + "/b";
    fs::create_directories(dir);
    const std::string file = dir + "/model.safetensors";
    fs::copy_file(tessera::test::fixture("hsdp_qwen2_2x2/reference/model.safetensors"), file);
    fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
    auto header = tessera::readSafetensorsFile(file);
    if (!header)
        qFatal("%s", header.error().message.c_str());
    std::string bytes = tessera::test::readFile(file);
    for (const auto& t : header->tensors)
        if (t.name == kTensor) {
            const std::uint64_t flat = 1 * static_cast<std::uint64_t>(t.shape[1]) + 3;
            char* p = bytes.data() + t.begin + flat * tessera::dtypeSize(t.dtype);
            double v = 0;
            (void)tessera::convertElements(p, t.dtype, &v, tessera::DType::Float64, 1);
            v -= 0.5;
            (void)tessera::convertElements(&v, tessera::DType::Float64, p, t.dtype, 1);
        }
    tessera::test::writeFile(file, bytes);
    return QString::fromStdString(dir);
}

} // namespace

class TestDiffPage : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void comparesAndShowsTheDifferentTensor()
    {
        DiffPage page;
        page.resize(1100, 800);
        page.show();
        QVERIFY(!page.compare()); // nothing loaded yet
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        page.setReferenceDir(changedReference());
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QSignalSpy detail(&page, &DiffPage::detailShown);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        const auto report = page.report();
        QVERIFY(report);
        QCOMPARE(report->tensors.size(), std::size_t(51));
        QCOMPARE(report->count(tessera::DiffStatus::Different), std::size_t(1));
        QCOMPARE(page.model()->rowCount(), 51);
        QVERIFY(page.summaryText().contains(QStringLiteral("FAIL")));

        // The different tensor is selected and its detail computed on a worker.
        QTRY_VERIFY_WITH_TIMEOUT(detail.count() >= 1, 60000);
        QCOMPARE(detail.last().at(0).toString(), QString::fromLatin1(kTensor));
        QCOMPARE(page.detailView()->tensorName(), QString::fromLatin1(kTensor));
        QCOMPARE(page.detailView()->worstRowCount(), 1);
        QCOMPARE(page.detailView()->worstIndexText(0), QStringLiteral("[1, 3]"));

        // The status filter shows only it.
        page.proxy()->setStatusFilter(DiffFilterProxy::StatusFilter::Different);
        QCOMPARE(page.proxy()->rowCount(), 1);
        page.proxy()->setStatusFilter(DiffFilterProxy::StatusFilter::All);

        // Selecting an identical tensor shows its detail instead.
        QVERIFY(page.selectTensor(QStringLiteral("model.norm.weight")));
        QTRY_COMPARE_WITH_TIMEOUT(page.detailView()->tensorName(), QStringLiteral("model.norm.weight"), 30000);
        QCOMPARE(page.detailView()->worstRowCount(), 0);
        // A 1-D tensor is drawn as a strip: its one row as two half cells, since a single cell would draw nothing.
        QCOMPARE(page.detailView()->heatmapCells().height(), 2);
        QVERIFY(page.detailView()->heatmapCells().width() > 1);
        QVERIFY(!page.grab().isNull());

        // Numbers are never cut: every numeric cell fits its column.
        QTableView* table = nullptr;
        for (auto* view : page.findChildren<QTableView*>())
            if (view->model() == page.proxy())
                table = view;
        QVERIFY(table);
        const QFontMetrics fm(table->font());
        for (int r = 0; r < page.proxy()->rowCount(); ++r)
            for (int c = DiffTableModel::StatusColumn; c < DiffTableModel::ColumnCount; ++c) {
                const QString text = page.proxy()->index(r, c).data().toString();
                QVERIFY2(fm.horizontalAdvance(text) + 8 <= table->columnWidth(c), qPrintable(QStringLiteral("%1 in column %2 of width %3").arg(text).arg(c).arg(table->columnWidth(c))));
            }
        QVERIFY(fm.horizontalAdvance(DiffTableModel::numberText(-3.4028234663852886e38)) + 8
                <= table->columnWidth(DiffTableModel::MaxAbsColumn));
        // The heatmaps' axes carry a few ticks, never labels running into one another; the detail scrolls in a
        // short window rather than overlapping its plots.
        for (auto* plot : page.detailView()->findChildren<QCustomPlot*>())
            for (auto* rect : plot->axisRects())
                if (plot->axisRects().size() == 3)
                    QVERIFY(rect->axis(QCPAxis::atBottom)->tickVector().size() <= 4);
        QVERIFY(qobject_cast<QScrollArea*>(page.detailView()->parentWidget()->parentWidget()));

        // Each plot saves itself as PNG, SVG or PDF (its context menu's Save Plot…).
        const auto plots = page.detailView()->findChildren<QCustomPlot*>();
        QCOMPARE(plots.size(), 3);
        const QString dir = QString::fromStdString(tessera::test::makeTempDir());
        const std::pair<const char*, QByteArray> formats[] = { { "png", QByteArray("\x89PNG") },
                                                               { "svg", QByteArray("<?xml") },
                                                               { "pdf", QByteArray("%PDF") } };
        for (auto* plot : plots) {
            QVERIFY(!plot->actions().isEmpty()); // "Save Plot…" in its context menu
            for (const auto& [suffix, magic] : formats) {
                const QString path = dir + QStringLiteral("/plot.") + QLatin1String(suffix);
                QVERIFY2(savePlot(plot, path).isEmpty(), qPrintable(path));
                QFile file(path);
                QVERIFY(file.open(QIODevice::ReadOnly));
                QVERIFY2(file.read(magic.size()) == magic, suffix);
            }
        }
        QVERIFY(!savePlot(plots.front(), dir + QStringLiteral("/plot.bmp")).isEmpty());
    }

    void savePlotActionOfEveryPlot()
    {
        // The Save Plot action itself, its dialog answered: every plot of the Diff page offers a file named after
        // its tensor and what it shows, and writes PNG, SVG and PDF that carry that name and what the plot is.
        DiffPage page;
        page.resize(1100, 800);
        page.show();
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        page.setReferenceDir(changedReference());
        QSignalSpy detail(&page, &DiffPage::detailShown);
        QVERIFY(page.compare());
        QTRY_VERIFY_WITH_TIMEOUT(detail.count() >= 1, 60000);
        QCOMPARE(page.detailView()->tensorName(), QString::fromLatin1(kTensor));
        const QString dir = QString::fromStdString(tessera::test::makeTempDir());
        QStringList suggested;
        QString answer;
        setSavePlotDialog([&](QWidget*, const QString& suggestedPath, QString* selectedFilter) -> QString {
            suggested << suggestedPath;
            *selectedFilter = QStringLiteral("PNG image (*.png)");
            return answer;
        });
        const auto plots = page.detailView()->findChildren<QCustomPlot*>();
        QCOMPARE(plots.size(), 3);
        const std::pair<const char*, QByteArray> formats[] = { { "png", QByteArray("\x89PNG") },
                                                               { "svg", QByteArray("<?xml") },
                                                               { "pdf", QByteArray("%PDF") } };
        QStringList kinds;
        for (auto* plot : plots) {
            QCOMPARE(plot->actions().size(), 1);
            QAction* save = plot->actions().front();
            QCOMPARE(save->text(), QStringLiteral("Save Plot…"));
            for (const auto& [suffix, magic] : formats) {
                answer = dir + QLatin1Char('/') + QString::number(suggested.size()) + QLatin1Char('.') + QLatin1String(suffix);
                const int elements = plot->plotLayout()->elementCount();
                save->trigger();
                QVERIFY2(suggested.last().startsWith(QString::fromLatin1(kTensor) + QLatin1Char('-')), qPrintable(suggested.last()));
                QVERIFY(suggested.last().endsWith(QStringLiteral(".png")));
                QFile file(answer);
                QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(answer));
                const QByteArray bytes = file.readAll();
                QVERIFY2(bytes.startsWith(magic), suffix);
                if (QLatin1String(suffix) == QLatin1String("svg")) // the saved plot names its tensor
                    QVERIFY2(bytes.contains(kTensor), bytes.left(400).constData());
                QCOMPARE(plot->plotLayout()->elementCount(), elements); // the window's plot is as it was
            }
            kinds << suggested.last().mid(int(qstrlen(kTensor)) + 1);
        }
        setSavePlotDialog({});
        kinds.sort();
        QCOMPARE(kinds, (QStringList { QStringLiteral("differences.png"), QStringLiteral("heatmap.png"),
                                       QStringLiteral("values.png") }));
        // No tensor shown: the names still make sense.
        page.detailView()->showMessage(QStringLiteral("nothing"));
        QCOMPARE(page.detailView()->tensorName(), QString());
    }

    void truncatedRankIsMissingNotZeros()
    {
        // Rank 1's file cut short: its half of every tensor is missing, and says so in the table and the plots.
        const std::string copy = tessera::test::copyFixtureFolder("hsdp_qwen2_2x2");
        std::string cut;
        for (const auto& entry : fs::directory_iterator(copy + "/global_step_10/actor"))
            if (entry.path().filename().string().find("rank_1.pt") != std::string::npos)
                cut = entry.path().string();
        QVERIFY(!cut.empty());
        fs::resize_file(cut, fs::file_size(cut) / 3);
        DiffPage page;
        page.resize(1100, 800);
        page.show();
        page.setCheckpoint(scanFixture(copy + "/global_step_10/actor"));
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/reference")));
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        const auto report = page.report();
        QVERIFY(report && report->count(tessera::DiffStatus::Incomplete) > 0);
        QCOMPARE(report->count(tessera::DiffStatus::Identical) + report->count(tessera::DiffStatus::Incomplete),
                 report->tensors.size());
        QVERIFY2(page.summaryText().contains(QStringLiteral("incomplete")), qPrintable(page.summaryText()));
        page.proxy()->setStatusFilter(DiffFilterProxy::StatusFilter::Missing);
        QCOMPARE(page.proxy()->rowCount(), int(report->count(tessera::DiffStatus::Incomplete)));
        page.proxy()->setStatusFilter(DiffFilterProxy::StatusFilter::All);

        QVERIFY(page.selectTensor(QStringLiteral("model.embed_tokens.weight")));
        QTRY_COMPARE_WITH_TIMEOUT(page.detailView()->tensorName(), QStringLiteral("model.embed_tokens.weight"), 30000);
        QVERIFY(page.detailView()->missingCellCount() > 0);
        QVERIFY2(page.detailView()->statsText().contains(QStringLiteral("missing")), qPrintable(page.detailView()->statsText()));
        // Rank 1 held rows 256–511 of [512, 64]: A lacks exactly those (half its cells), B lacks nothing, and |A − B|
        // is missing where A is. The rows A holds are never painted as missing.
        const QSize cells = page.detailView()->heatmapCells();
        QCOMPARE(page.detailView()->missingCellCount(0), cells.width() * cells.height() / 2);
        QCOMPARE(page.detailView()->missingCellCount(1), 0);
        QCOMPARE(page.detailView()->missingCellCount(2), page.detailView()->missingCellCount(0));
        // "differing" counts of the elements both hold, not of the whole tensor.
        QVERIFY2(page.detailView()->statsText().contains(QStringLiteral("0 of 16384 (0%)")), qPrintable(page.detailView()->statsText()));
        // The row says why: the rank's file cannot be read, named — not that no rank has those elements.
        const auto* row = page.model()->row(page.model()->rowOf(QStringLiteral("model.embed_tokens.weight")));
        QVERIFY(row);
        QCOMPARE(row->comparedElements(), std::uint64_t(16384));
        QVERIFY2(QString::fromStdString(row->detail).contains(QStringLiteral("cannot be read")), row->detail.c_str());
        QVERIFY2(QString::fromStdString(row->detail).contains(QFileInfo(QString::fromStdString(cut)).fileName()), row->detail.c_str());
    }

    void anyCheckpointCanBeAAndDifferentModelsAreSaidFirst()
    {
        DiffPage page;
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        QCOMPARE(QDir(page.pathA()).canonicalPath(),
                 QDir(QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor"))).canonicalPath());
        // A is another checkpoint than the loaded one: a Llama model against the Qwen2 reference.
        page.setPathA(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/reference")));
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QVERIFY(page.report());
        QVERIFY(QString::fromStdString(page.report()->pathA).contains(QStringLiteral("fsdp2_llama_w4")));
        QVERIFY2(page.modelsText().startsWith(QStringLiteral("A and B are different models")), qPrintable(page.modelsText()));

        // Names copy whole, however the column shortens them.
        QTableView* table = nullptr;
        for (auto* view : page.findChildren<QTableView*>())
            if (view->model() == page.proxy())
                table = view;
        QVERIFY(table);
        table->selectRow(0);
        QCOMPARE(selectedNames(table, DiffTableModel::NameColumn),
                 page.proxy()->index(0, DiffTableModel::NameColumn).data().toString());
        QVERIFY(!table->actions().isEmpty());

        // The same A as the loaded checkpoint compares without a scan of its own.
        page.setPathA(QString());
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/reference")));
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        QVERIFY(page.report()->ok());
        QVERIFY(page.modelsText().isEmpty());
    }

    void toleranceMakesItPass()
    {
        DiffPage page;
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        page.setReferenceDir(changedReference());
        page.setTolerances(1, 0);
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QVERIFY(page.report()->ok());
        QCOMPARE(page.report()->count(tessera::DiffStatus::WithinTolerance), std::size_t(1));
        QVERIFY(page.summaryText().contains(QStringLiteral("PASS")));
    }

    void loraCheckpointComparesAsItsFusedModel()
    {
        DiffPage page;
        page.setCheckpoint(scanFixture(tessera::test::fixture("lora_llama_w2_fp32/global_step_10/actor")));
        // Against the fused reference: every tensor within 1e-6 (the fused ones differ by the matmul's rounding).
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("lora_llama_w2_fp32/reference")));
        page.setTolerances(1e-6, 0);
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QVERIFY2(page.report()->ok(), page.report()->summary().c_str());
        QCOMPARE(page.report()->tensors.size(), std::size_t(39)); // the factors are part of their weights

        // The LoRA update: the fused model against its own base weights; exactly the 8 adapted weights differ.
        page.setTolerances(0, 0);
        QVERIFY(page.compareLoraUpdate());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        QCOMPARE(page.report()->count(tessera::DiffStatus::Different), std::size_t(8));
        QCOMPARE(page.report()->count(tessera::DiffStatus::Identical), std::size_t(31));
        QVERIFY(page.selectTensor(QStringLiteral("model.layers.0.self_attn.q_proj.weight")));

        // Not offered for a checkpoint without an adapter.
        page.setCheckpoint(scanFixture(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QVERIFY(!page.compareLoraUpdate());
    }

    void openInDiffGivesTheTestsAnswer()
    {
        // The Merge page tests a LoRA run as its fused model with α = 32 (the checkpoint records 16) and atol 1e-6:
        // 31 of 39 tensors match. Open in Diff compares with the same flags and shows the same 8 tensors failing.
        MainWindow window;
        window.resize(1280, 720);
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        window.openPath(QString::fromStdString(tessera::test::fixture("lora_llama_w2_fp32/global_step_10/actor")));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        auto* merge = window.findChild<MergePage*>();
        QVERIFY(merge);
        merge->setReferenceDir(QString::fromStdString(tessera::test::fixture("lora_llama_w2_fp32/reference")));
        for (auto* edit : merge->findChildren<QLineEdit*>()) {
            if (edit->placeholderText() == QStringLiteral("from lora_train_meta.json"))
                edit->setText(QStringLiteral("32"));
            if (edit->toolTip().startsWith(QStringLiteral("Absolute tolerance")))
                edit->setText(QStringLiteral("1e-6"));
        }
        for (auto* box : merge->findChildren<QComboBox*>())
            if (const int fused = box->findData(QStringLiteral("fused")); fused >= 0)
                box->setCurrentIndex(fused);
        QTRY_VERIFY_WITH_TIMEOUT(merge->canTest() && !merge->isPlanning(), 60000);
        QSignalSpy compared(merge->compareJob(), &CompareJob::finished);
        merge->runTest();
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 120000);
        QVERIFY2(merge->statusText().contains(QStringLiteral("31 of 39")), qPrintable(merge->statusText()));
        QPushButton* openInDiff = nullptr;
        for (auto* button : merge->findChildren<QPushButton*>())
            if (button->text() == QStringLiteral("Open in Diff"))
                openInDiff = button;
        QVERIFY(openInDiff && openInDiff->isEnabled());
        DiffPage& page = *window.diffPage();
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        openInDiff->click();
        QCOMPARE(window.currentView(), View::Diff);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QVERIFY(!page.report()->ok());
        QCOMPARE(page.report()->tensors.size(), std::size_t(39));
        QCOMPARE(page.report()->count(tessera::DiffStatus::Identical), std::size_t(31));
        QCOMPARE(page.report()->count(tessera::DiffStatus::Different), std::size_t(8));
        const QString command = page.commandLine();
        for (const char* flag : { "--lora fused", "--lora_alpha 32", "--atol 1e-6", "--round_to_narrower" })
            QVERIFY2(command.contains(QLatin1String(flag)), qPrintable(command));

        // Another checkpoint: the test's flags belonged to the old one.
        window.openPath(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 2, 60000);
        QVERIFY(!page.commandLine().contains(QStringLiteral("--lora")));
        QVERIFY(!page.request().loraAlpha.has_value());
    }

    void loraUpdateIsNotAFailure()
    {
        // The LoRA update compares the fused model with its own base: the 8 adapted weights differ by design. They
        // read as "updated", not as a red FAIL, and B (a reference typed before) is not shown as what was compared.
        DiffPage page;
        page.resize(1100, 800);
        page.show();
        page.setCheckpoint(scanFixture(tessera::test::fixture("lora_llama_w2_fp32/global_step_10/actor")));
        const QString reference = QString::fromStdString(tessera::test::fixture("lora_llama_w2_fp32/reference"));
        page.setReferenceDir(reference);
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QSignalSpy detail(&page, &DiffPage::detailShown);
        QVERIFY(page.compareLoraUpdate());
        QVERIFY(page.referenceDir().isEmpty());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QVERIFY2(!page.summaryText().contains(QStringLiteral("FAIL")), qPrintable(page.summaryText()));
        QVERIFY2(page.summaryText().contains(QStringLiteral("8 weights updated by the adapter, 31 unchanged")),
                 qPrintable(page.summaryText()));
        const int row = page.model()->rowOf(QStringLiteral("model.layers.0.self_attn.q_proj.weight"));
        QVERIFY(row >= 0);
        const QModelIndex status = page.model()->index(row, DiffTableModel::StatusColumn);
        QCOMPARE(status.data().toString(), QStringLiteral("updated"));
        QVERIFY(status.data(Qt::ForegroundRole).value<QBrush>().color() != QColor(0xd0, 0x30, 0x30));
        QTRY_VERIFY_WITH_TIMEOUT(!page.detailView()->tensorName().isEmpty(), 60000);
        QVERIFY2(page.detailView()->titleText().contains(QStringLiteral("updated")), qPrintable(page.detailView()->titleText()));
        QVERIFY(!page.detailView()->titleText().contains(QStringLiteral("#d03030")));

        // Back to a comparison with a reference: a difference is a difference again.
        page.setReferenceDir(reference);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        QVERIFY2(page.summaryText().contains(QStringLiteral("FAIL")), qPrintable(page.summaryText()));
        QCOMPARE(page.model()->index(row, DiffTableModel::StatusColumn).data().toString(), QStringLiteral("different"));
    }

    void exportsCsvAndJson()
    {
        DiffPage page;
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        QString error;
        QVERIFY(!page.exportReport(QString::fromStdString(tessera::test::makeTempDir() + "/early.json"), &error));
        QVERIFY(error.contains(QStringLiteral("Compare first")));
        page.setReferenceDir(changedReference());
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        const std::string dir = tessera::test::makeTempDir();
        QVERIFY(page.exportReport(QString::fromStdString(dir + "/diff.json"), &error));
        const auto json = nlohmann::json::parse(tessera::test::readFile(dir + "/diff.json"));
        QCOMPARE(json["tensors"].size(), page.report()->tensors.size());
        QCOMPARE(json["counts"]["different"].get<std::size_t>(), page.report()->count(tessera::DiffStatus::Different));
        QVERIFY(page.exportReport(QString::fromStdString(dir + "/diff.csv"), &error));
        const std::string csv = tessera::test::readFile(dir + "/diff.csv");
        QCOMPARE(std::size_t(std::count(csv.begin(), csv.end(), '\n')), page.report()->tensors.size() + 1);
        QVERIFY(csv.rfind("name,status,ok,detail", 0) == 0);
    }

    void exportIsOfferedAfterEveryComparison()
    {
        DiffPage page;
        page.resize(1280, 720);
        page.show();
        QPushButton* exportButton = nullptr;
        for (auto* button : page.findChildren<QPushButton*>())
            if (button->text() == QStringLiteral("Export…"))
                exportButton = button;
        QVERIFY(exportButton);
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        QVERIFY(!exportButton->isEnabled()); // nothing to export yet
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        // A failing comparison, then a passing one: both can be exported.
        for (const QString& reference : { changedReference(),
                                          QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/reference")) }) {
            page.setReferenceDir(reference);
            QVERIFY(page.compare());
            QVERIFY(!exportButton->isEnabled());
            QTRY_VERIFY_WITH_TIMEOUT(!page.isRunning() && page.report(), 60000);
            QVERIFY2(exportButton->isEnabled(), qPrintable(page.summaryText()));
            QVERIFY(exportButton->isVisible());
        }
        QCOMPARE(finished.count(), 2);
    }

    void anotherCheckpointForgetsToleranceAndDetail()
    {
        DiffPage page;
        page.resize(1100, 800);
        page.show();
        const auto plotsShown = [&page] {
            int shown = 0;
            for (auto* plot : page.detailView()->findChildren<QCustomPlot*>())
                shown += plot->isVisible() ? 1 : 0;
            return shown;
        };
        QCOMPARE(plotsShown(), 0); // no empty axes before a comparison
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        QCOMPARE(plotsShown(), 0);
        page.setReferenceDir(changedReference());
        page.setTolerances(1e-3, 2e-3);
        QSignalSpy detail(&page, &DiffPage::detailShown);
        QVERIFY(page.compare());
        QTRY_VERIFY_WITH_TIMEOUT(detail.count() >= 1, 60000);
        QCOMPARE(page.detailView()->tensorName(), QString::fromLatin1(kTensor));
        QCOMPARE(plotsShown(), 3);
        QVERIFY(page.request().atol.has_value());

        // Another checkpoint: its comparison starts from nothing, at the default tolerances.
        page.setCheckpoint(scanFixture(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QVERIFY(!page.request().atol.has_value());
        QVERIFY(!page.request().rtol.has_value());
        QVERIFY(!page.commandLine().contains(QStringLiteral("--atol")));
        QCOMPARE(page.detailView()->tensorName(), QString());
        QCOMPARE(page.detailView()->worstRowCount(), 0);
        QCOMPARE(plotsShown(), 0);
        QVERIFY(!page.detailView()->statsText().contains(QStringLiteral("differing")));

        // A detail still being computed for the old checkpoint never shows up on the new one.
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        page.setReferenceDir(changedReference());
        QVERIFY(page.compare());
        QTRY_VERIFY_WITH_TIMEOUT(detail.count() >= 2, 60000);
        QVERIFY(page.selectTensor(QStringLiteral("model.norm.weight")));
        page.setCheckpoint(scanFixture(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QTest::qWait(300);
        QCOMPARE(page.detailView()->tensorName(), QString());
        QCOMPARE(plotsShown(), 0);
    }

    void fitsAt1280x720()
    {
        // The workbench at 1280 × 720 with the demo compared: the table shows many rows and every plot of the
        // detail fits the page's width (nothing cut at the right, no sideways scrolling).
        MainWindow window;
        window.resize(1280, 720);
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        QVERIFY(window.openDemo());
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        window.showView(View::Diff);
        DiffPage& page = *window.diffPage();
        QSignalSpy detail(&page, &DiffPage::detailShown);
        QVERIFY(page.compare());
        QTRY_VERIFY_WITH_TIMEOUT(detail.count() >= 1 && !page.detailView()->tensorName().isEmpty(), 60000);
        QTest::qWait(500);
        QTableView* table = page.tableView();
        // The name column is wide enough for every name's kept parts: none is cut to "…0.…".
        QStringList names;
        for (const auto& row : page.report()->tensors)
            names << QString::fromStdString(row.name);
        const int needed = compactNamesWidth(names, sharedNamePrefix(names), QFontMetrics(table->font()));
        QVERIFY2(table->columnWidth(DiffTableModel::NameColumn) >= needed,
                 qPrintable(QStringLiteral("%1 < %2").arg(table->columnWidth(DiffTableModel::NameColumn)).arg(needed)));
        auto* scroll = qobject_cast<QScrollArea*>(page.detailView()->parentWidget()->parentWidget());
        QVERIFY(scroll);
        const int rowsShown = table->viewport()->height() / table->verticalHeader()->defaultSectionSize();
        QVERIFY2(rowsShown >= 9, qPrintable(QString::number(rowsShown)));
        QVERIFY2(scroll->viewport()->height() >= 200, qPrintable(QString::number(scroll->viewport()->height())));
        QVERIFY(!scroll->horizontalScrollBar()->isVisible());
        for (auto* inner : page.detailView()->findChildren<QScrollArea*>()) // the statistics are never cut either
            QVERIFY(!inner->horizontalScrollBar()->isVisible());
        const auto plots = page.detailView()->findChildren<QCustomPlot*>();
        QCOMPARE(plots.size(), 3);
        for (auto* plot : plots) {
            QVERIFY(plot->isVisible());
            const int right = plot->mapTo(scroll->viewport(), QPoint(plot->width(), 0)).x();
            QVERIFY2(right <= scroll->viewport()->width(),
                     qPrintable(QStringLiteral("%1 > %2").arg(right).arg(scroll->viewport()->width())));
        }
    }

    void anotherCheckpointClearsB()
    {
        DiffPage page;
        page.setCheckpoint(scanFixture(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        page.setReferenceDir(QStringLiteral("/tmp/some-reference"));
        page.setCheckpoint(scanFixture(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QCOMPARE(page.referenceDir(), QStringLiteral("/tmp/some-reference")); // a re-scan keeps B
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        QVERIFY(page.referenceDir().isEmpty());
    }

    void badReferenceFails()
    {
        DiffPage page;
        page.setCheckpoint(scanFixture(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        page.setReferenceDir(QString::fromStdString(tessera::test::makeTempDir()));
        QSignalSpy failed(&page, &DiffPage::comparisonFailed);
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60000);
        QVERIFY(!page.isRunning());
    }

    void cancelAndRestart()
    {
        DiffPage page;
        page.setCheckpoint(scanFixture(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/reference")));
        QSignalSpy finished(&page, &DiffPage::comparisonFinished);
        QVERIFY(page.compare());
        page.cancel();
        QVERIFY(!page.isRunning());
        // A superseded run never delivers; the next one does.
        QVERIFY(page.compare());
        QVERIFY(page.compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QTest::qWait(200);
        QCOMPARE(finished.count(), 1);
        QVERIFY(page.report()->ok());
    }
};

QTEST_MAIN(TestDiffPage)
#include "tst_diffpage.moc"
