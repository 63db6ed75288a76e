// SPDX-License-Identifier: GPL-3.0-or-later
// The diff table model and its proxy: streamed rows, formatting, raw-value sorting and status/name filtering.

#include "models/difffilterproxy.h"
#include "models/difftablemodel.h"

#include <QAbstractItemModelTester>
#include <QTest>

#include <limits>

using namespace tessera::ui;
using tessera::DiffStatus;
using tessera::TensorDiff;

namespace {

TensorDiff pending(const std::string& name, int index)
{
    TensorDiff t;
    t.name = name;
    t.indexA = t.indexB = index;
    t.dtypeA = t.dtypeB = tessera::DType::BFloat16;
    t.shapeA = t.shapeB = { 4, 8 };
    t.elements = 32;
    return t;
}

TensorDiff compared(TensorDiff t, DiffStatus status, double maxAbs, std::uint64_t differing)
{
    t.status = status;
    t.compared = t.numeric = true;
    t.bitEqual = status == DiffStatus::Identical;
    t.maxAbsDiff = maxAbs;
    t.meanAbsDiff = maxAbs / 32;
    t.maxRelDiff = maxAbs * 10;
    t.cosine = maxAbs == 0 ? 1 : 1 - maxAbs / 100;
    t.differing = differing;
    t.outsideTolerance = status == DiffStatus::Different ? differing : 0;
    return t;
}

/// The proxy's rows as "name" in view order.
QStringList names(const QAbstractItemModel& model)
{
    QStringList out;
    for (int r = 0; r < model.rowCount(); ++r)
        out << model.index(r, DiffTableModel::NameColumn).data().toString();
    return out;
}

} // namespace

class TestDiffTableModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void streamsSortsAndFilters()
    {
        DiffTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        DiffFilterProxy proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);

        std::vector<TensorDiff> rows = { pending("w.small", 0), pending("w.large", 1), pending("w.same", 2),
                                         pending("w.tol", 3), pending("only_a", 4) };
        rows[4].indexB = -1;
        rows[4].status = DiffStatus::MissingInB;
        model.setRows(rows);
        QCOMPARE(model.rowCount(), 5);
        QCOMPARE(model.columnCount(), int(DiffTableModel::ColumnCount));
        QCOMPARE(model.index(0, DiffTableModel::StatusColumn).data().toString(), QStringLiteral("pending"));
        QCOMPARE(model.index(0, DiffTableModel::MaxAbsColumn).data().toString(), QStringLiteral("–"));

        // Rows stream in by report index.
        model.updateRows({ { 0, compared(rows[0], DiffStatus::Different, 0.002, 1) },
                           { 1, compared(rows[1], DiffStatus::Different, 10, 7) },
                           { 2, compared(rows[2], DiffStatus::Identical, 0, 0) },
                           { 3, compared(rows[3], DiffStatus::WithinTolerance, 1e-6, 3) } });
        QCOMPARE(model.index(1, DiffTableModel::MaxAbsColumn).data().toString(), QStringLiteral("10"));
        QCOMPARE(model.index(0, DiffTableModel::MaxAbsColumn).data().toString(), QStringLiteral("0.002"));
        QCOMPARE(model.index(2, DiffTableModel::CosineColumn).data().toString(), QStringLiteral("1"));
        QCOMPARE(model.index(2, DiffTableModel::BitEqualColumn).data().toString(), QStringLiteral("yes"));
        QCOMPARE(model.index(0, DiffTableModel::NanColumn).data().toString(), QStringLiteral("0 / 0"));
        QCOMPARE(model.index(4, DiffTableModel::StatusColumn).data().toString(), QStringLiteral("missing in B"));
        QCOMPARE(model.index(0, DiffTableModel::ShapeColumn).data().toString(), QStringLiteral("[4, 8]"));
        QCOMPARE(model.index(1, DiffTableModel::StatusColumn).data(DiffTableModel::StatusRole).toInt(),
                 int(DiffStatus::Different));

        // Sorting uses raw numbers ("10" after "0.002"), and the missing tensor counts as the largest difference.
        proxy.sort(DiffTableModel::MaxAbsColumn, Qt::DescendingOrder);
        QCOMPARE(names(proxy), (QStringList { QStringLiteral("only_a"), QStringLiteral("w.large"), QStringLiteral("w.small"),
                                              QStringLiteral("w.tol"), QStringLiteral("w.same") }));
        proxy.sort(DiffTableModel::DifferingColumn, Qt::AscendingOrder);
        QCOMPARE(names(proxy).first(), QStringLiteral("w.same"));
        proxy.sort(DiffTableModel::StatusColumn, Qt::AscendingOrder); // most severe first
        QCOMPARE(names(proxy).first(), QStringLiteral("only_a"));
        QCOMPARE(names(proxy).last(), QStringLiteral("w.same"));

        proxy.setStatusFilter(DiffFilterProxy::StatusFilter::Failing);
        QCOMPARE(proxy.rowCount(), 3);
        proxy.setStatusFilter(DiffFilterProxy::StatusFilter::Different);
        QCOMPARE(proxy.rowCount(), 2);
        proxy.setFilterRegularExpression(QRegularExpression(QStringLiteral("large")));
        QCOMPARE(names(proxy), QStringList { QStringLiteral("w.large") });
        proxy.setStatusFilter(DiffFilterProxy::StatusFilter::Missing);
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setFilterRegularExpression(QRegularExpression());
        QCOMPARE(proxy.rowCount(), 1);
        proxy.setStatusFilter(DiffFilterProxy::StatusFilter::All);
        QCOMPARE(proxy.rowCount(), 5);

        // A row whose status changes while filtered moves in or out of the view.
        proxy.setStatusFilter(DiffFilterProxy::StatusFilter::Identical);
        QCOMPARE(proxy.rowCount(), 1);
        model.updateRows({ { 3, compared(rows[3], DiffStatus::Identical, 0, 0) } });
        QCOMPARE(proxy.rowCount(), 2);

        QCOMPARE(model.rowOf(QStringLiteral("w.tol")), 3);
        QCOMPARE(model.rowOf(QStringLiteral("nothing")), -1);
        model.clear();
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(proxy.rowCount(), 0);
    }

    void ignoresRowsOfAnotherReport()
    {
        DiffTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setRows({ pending("a", 0) });
        model.updateRows({ { 0, compared(pending("b", 0), DiffStatus::Different, 1, 1) }, { 7, pending("a", 7) } });
        QCOMPARE(model.row(0)->status, DiffStatus::Pending);
    }

    void nanOppositeANumberShowsAsNan()
    {
        DiffTableModel model;
        auto withNan = compared(pending("w", 0), DiffStatus::Different, std::numeric_limits<double>::infinity(), 1);
        withNan.nanOpposite = 1;
        auto withInf = compared(pending("v", 1), DiffStatus::Different, std::numeric_limits<double>::infinity(), 1);
        model.setRows({ withNan, withInf });
        QCOMPARE(model.index(0, DiffTableModel::MaxAbsColumn).data().toString(), QStringLiteral("NaN"));
        QCOMPARE(model.index(1, DiffTableModel::MaxAbsColumn).data().toString(), QStringLiteral("∞"));
    }

    void numberFormats()
    {
        QCOMPARE(DiffTableModel::numberText(0), QStringLiteral("0"));
        QCOMPARE(DiffTableModel::numberText(std::numeric_limits<double>::infinity()), QStringLiteral("∞"));
        QCOMPARE(DiffTableModel::numberText(0.000123456), QStringLiteral("0.0001235"));
        QCOMPARE(DiffTableModel::cosineText(1), QStringLiteral("1"));
        QCOMPARE(DiffTableModel::cosineText(1 - 6e-8), QStringLiteral("1 − 6e-08"));
        QCOMPARE(DiffTableModel::cosineText(0.5), QStringLiteral("0.500000"));
    }
};

QTEST_MAIN(TestDiffTableModel)
#include "tst_difftablemodel.moc"
