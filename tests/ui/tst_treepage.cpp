// SPDX-License-Identifier: GPL-3.0-or-later
// The tree page's filters keep what the user looks at: the current row, and on clearing, their own expansion.

#include "formats/scan.h"
#include "mappingfixtures.h"
#include "pages/treepage.h"
#include "testutil.h"
#include "widgets/filterbar.h"

#include <QCheckBox>
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
        filter(page, QStringLiteral("layers.(0"));
        bool said = false;
        for (auto* label : page.findChildren<QLabel*>())
            said |= label->text().contains(QStringLiteral("the regex is invalid"));
        QVERIFY(said);
    }
};

QTEST_MAIN(TestTreePage)
#include "tst_treepage.moc"
