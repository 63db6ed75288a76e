// SPDX-License-Identifier: GPL-3.0-or-later
// The tree page's filters keep what the user looks at: the current row, and on clearing, their own expansion.

#include "formats/scan.h"
#include "mappingfixtures.h"
#include "models/mappingfilterproxy.h"
#include "models/mappingmodel.h"
#include "models/shardtreeproxy.h"
#include "pages/mappingpage.h"
#include "pages/treepage.h"
#include "testutil.h"
#include "widgets/filterbar.h"

#include "coreconvert.h"

#include <QCheckBox>
#include <QHeaderView>
#include <QScrollBar>
#include <QStyle>
#include <QLabel>
#include <QLineEdit>
#include <QTest>
#include <QTreeView>

using namespace tessera::ui;

namespace {

/// The filter applied now, without waiting for the debounce.
void filter(TreePage& page, const QString& text)
{
    page.filterBar()->setText(text);
    page.filterBar()->flush();
}
/// The bar itself says the regex is invalid, beside the box (on every page that has one).
bool saysInvalid(const FilterBar* bar)
{
    for (const auto* label : bar->findChildren<QLabel*>())
        if (label->isVisibleTo(bar) && label->text().contains(QStringLiteral("invalid regex")))
            return true;
    return false;
}
} // namespace

class TestTreePage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void filteringKeepsSelectionAndClearingRestoresExpansion()
    {
        TreePage page;
        page.setCheckpoint(tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        QTreeView* view = page.view();
        const int tensor = 5;
        page.selectTensor(tensor);
        const QString selected = view->currentIndex().data().toString();
        QVERIFY(!selected.isEmpty());
        // The user opens the selected tensor's row (its pieces).
        view->expand(view->currentIndex());
        const QModelIndex rank1 = view->model()->index(1, 0, view->currentIndex().parent().parent());
        QVERIFY(!view->isExpanded(rank1));

        filter(page, selected);
        QCOMPARE(view->currentIndex().data().toString(), selected); // still the current row
        filter(page, QString());
        QCOMPARE(view->currentIndex().data().toString(), selected);
        QVERIFY(view->isExpanded(view->currentIndex())); // the user's expansion is back
        QVERIFY(!view->isExpanded(rank1));               // and nothing else was opened for them
    }

    void invalidRegexSaysWhy()
    {
        TreePage page;
        page.setCheckpoint(tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        for (auto* box : page.findChildren<QCheckBox*>())
            if (box->text() == QStringLiteral("Regex"))
                box->setChecked(true);
        filter(page, QStringLiteral("layers\\.1\\."));
        QVERIFY(page.proxy()->rowCount() > 0);
        filter(page, QStringLiteral("layers.(0"));
        bool said = false;
        for (auto* label : page.findChildren<QLabel*>())
            said |= label->text().contains(QStringLiteral("the regex is invalid"));
        QVERIFY(said);
        // No rows: not the previous filter's, which would answer another question.
        QCOMPARE(page.proxy()->rowCount(), 0);
        QVERIFY(saysInvalid(page.filterBar()));
        filter(page, QStringLiteral("layers.(0)"));
        QVERIFY(page.proxy()->rowCount() > 0);
        QVERIFY(!saysInvalid(page.filterBar()));
    }

    void sizeColumnFitsEverySize()
    {
        // Sizes print with up to four digits and a unit ("88.8 MB"); each fits its column whole.
        TreePage page;
        page.setCheckpoint(tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        const QStyle* style = page.view()->style();
        const int margins = 2 * (style->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, page.view()) + 1);
        const int room = page.view()->header()->sectionSize(ShardTreeModel::SizeColumn) - margins;
        const QFontMetrics metrics(page.view()->font());
        for (const std::uint64_t bytes : { 999ULL, 8'880ULL, 88'800ULL, 888'000ULL, 8'880'000ULL, 88'800'000ULL,
                                           888'000'000ULL, 8'880'000'000ULL, 88'800'000'000ULL, 888'000'000'000ULL,
                                           8'880'000'000'000ULL }) {
            const QString text = bytesText(bytes);
            QVERIFY2(metrics.horizontalAdvance(text) <= room,
                     qPrintable(QStringLiteral("%1 needs %2 px, the column has %3").arg(text).arg(metrics.horizontalAdvance(text)).arg(room)));
        }
    }

    void sizeColumnStaysInViewInANarrowPane()
    {
        // A pane narrower than the names (1280×720 gives the tree about 480 pixels): the names shorten, the Size
        // column beside them stays whole; the other columns are a scroll away.
        for (const int paneWidth : { 480, 640, 900 }) {
            TreePage page;
            page.resize(paneWidth, 500);
            page.show();
            page.setCheckpoint(tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor"));
            QVERIFY(QTest::qWaitForWindowExposed(&page));
            QHeaderView* header = page.view()->header();
            const int right = header->sectionViewportPosition(ShardTreeModel::SizeColumn)
                + header->sectionSize(ShardTreeModel::SizeColumn);
            QVERIFY2(right <= page.view()->viewport()->width(),
                     qPrintable(QStringLiteral("pane %1: Size ends at %2, the view shows %3")
                                    .arg(paneWidth).arg(right).arg(page.view()->viewport()->width())));
            QVERIFY(header->sectionSize(ShardTreeModel::NameColumn) > 150);
        }
    }

    void anotherCheckpointStartsAtTheTop()
    {
        TreePage page;
        page.resize(500, 300);
        page.show();
        page.setCheckpoint(tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        QScrollBar* bar = page.view()->verticalScrollBar();
        QTRY_VERIFY(bar->maximum() > 0);
        bar->setValue(bar->maximum());
        page.setCheckpoint(tessera::test::scanFixture(tessera::test::kLegacy));
        QTRY_VERIFY(bar->maximum() > 0);
        QCOMPARE(bar->value(), 0);
    }

    void invalidRegexEmptiesTheMappingTable()
    {
        // The same filter bar on the Mapping page.
        MappingPage page;
        page.setCheckpoint(tessera::test::scanFixture(tessera::test::kLegacy));
        QTRY_VERIFY_WITH_TIMEOUT(page.model()->rowCount() > 0, 30000);
        page.filterBar()->setRegex(true);
        page.filterBar()->setText(QStringLiteral("linear_qkv"));
        page.filterBar()->flush();
        QVERIFY(page.proxy()->rowCount() > 0);
        page.filterBar()->setText(QStringLiteral("linear_(qkv"));
        page.filterBar()->flush();
        QCOMPARE(page.proxy()->rowCount(), 0);
        QVERIFY(saysInvalid(page.filterBar()));
    }
};

QTEST_MAIN(TestTreePage)
#include "tst_treepage.moc"
