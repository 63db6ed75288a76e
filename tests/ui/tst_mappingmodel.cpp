// SPDX-License-Identifier: GPL-3.0-or-later
#include "models/mappingmodel.h"
#include "models/roles.h"
#include "synthetic.h"

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QTest>

using namespace tessera::ui;

class TestMappingModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void rows()
    {
        MappingModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setCheckpoint(tessera::test::smallCheckpoint());
        QCOMPARE(model.rowCount(), 4);
        QCOMPARE(model.columnCount(), int(MappingModel::ColumnCount));
        QCOMPARE(model.index(0, MappingModel::SourceColumn).data().toString(), QStringLiteral("model.w"));
        QCOMPARE(model.index(0, MappingModel::TargetColumn).data().toString(), QStringLiteral("model.w"));
        QCOMPARE(model.index(0, MappingModel::ShapeColumn).data().toString(), QStringLiteral("[8, 4]"));
        QCOMPARE(model.index(0, MappingModel::ShapeColumn).data(SortRole).toULongLong(), 32ULL);
        QCOMPARE(model.index(2, MappingModel::StatusColumn).data().toString(), QStringLiteral("unchanged"));
        QCOMPARE(model.index(3, 0).data(TensorIndexRole).toInt(), 3);
        model.setCheckpoint(nullptr);
        QCOMPARE(model.rowCount(), 0);
    }

    void proxy()
    {
        MappingModel model;
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        proxy.setFilterKeyColumn(-1);
        QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoint(tessera::test::smallCheckpoint());
        proxy.setFilterRegularExpression(QStringLiteral("gap"));
        QCOMPARE(proxy.rowCount(), 1);
    }
};

QTEST_MAIN(TestMappingModel)
#include "tst_mappingmodel.moc"
