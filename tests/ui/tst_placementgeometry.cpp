// SPDX-License-Identifier: GPL-3.0-or-later
#include "synthetic.h"
#include "widgets/placementgeometry.h"

#include <QTest>

using namespace tessera::ui;
using tessera::PieceRole;
using tessera::TensorInfo;
using tessera::test::makePiece;

namespace {
TensorInfo tensor(tessera::Shape shape, std::vector<tessera::Piece> pieces)
{
    TensorInfo t;
    t.name = "t";
    t.dtype = tessera::DType::BFloat16;
    t.shape = std::move(shape);
    t.pieces = std::move(pieces);
    return t;
}
} // namespace

class TestPlacementGeometry : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void rowShardsTile()
    {
        const auto g = PlacementGeometry::compute(tensor({ 8, 4 }, { makePiece(0, { 0, 0 }, { 4, 4 }), makePiece(1, { 4, 0 }, { 4, 4 }) }));
        QCOMPARE(g.rows, 8);
        QCOMPARE(g.cols, 4);
        QCOMPARE(g.rowAxis, QStringLiteral("dim 0"));
        QCOMPARE(g.colAxis, QStringLiteral("dim 1"));
        QCOMPARE(g.pieces.size(), std::size_t(2));
        QVERIFY((g.pieces[1].rects.front() == FoldedRect { 4, 0, 8, 4 }));
        QVERIFY(g.coverageChecked);
        QVERIFY(g.gaps.empty());
        QVERIFY(g.overlaps.empty());
        QCOMPARE(g.pieceAt(5, 2), 1);
        QCOMPARE(g.pieceAt(0, 0), 0);
    }

    void gapsAndOverlaps()
    {
        // Rows 3 is missing; rows 5–6 are held twice.
        const auto g = PlacementGeometry::compute(tensor({ 8, 4 }, { makePiece(0, { 0, 0 }, { 3, 4 }), makePiece(1, { 4, 0 }, { 3, 4 }),
                                                                     makePiece(2, { 5, 0 }, { 3, 4 }) }));
        QCOMPARE(g.gaps.size(), std::size_t(1));
        QVERIFY((g.gaps.front() == FoldedRect { 3, 0, 4, 4 }));
        QCOMPARE(g.overlaps.size(), std::size_t(1));
        QVERIFY((g.overlaps.front() == FoldedRect { 5, 0, 7, 4 }));
    }

    void replicasAttachToPrimary()
    {
        const auto g = PlacementGeometry::compute(tensor({ 4 }, { makePiece(0, { 0 }, { 4 }), makePiece(1, { 0 }, { 4 }, PieceRole::Replica) }));
        QCOMPARE(g.rows, 1);
        QCOMPARE(g.cols, 4);
        QCOMPARE(g.pieces.size(), std::size_t(1));
        QCOMPARE(g.pieces.front().replicas, std::vector<int> { 1 });
        QVERIFY(g.gaps.empty());
        QVERIFY(g.overlaps.empty()); // replicas are not overlaps
    }

    void partialTermsShareTheirBox()
    {
        const auto g = PlacementGeometry::compute(tensor({ 2, 2 }, { makePiece(0, { 0, 0 }, { 2, 2 }, PieceRole::PartialTerm),
                                                                     makePiece(1, { 0, 0 }, { 2, 2 }, PieceRole::PartialTerm) }));
        QCOMPARE(g.pieces.size(), std::size_t(2));
        QVERIFY(g.overlaps.empty());
        QVERIFY(g.gaps.empty());
    }

    void foldsLeadingDims()
    {
        // [2, 4, 3] sharded on dim 1: each piece is one run of rows per index of dim 0.
        const auto g = PlacementGeometry::compute(tensor({ 2, 4, 3 }, { makePiece(0, { 0, 0, 0 }, { 2, 2, 3 }), makePiece(1, { 0, 2, 0 }, { 2, 2, 3 }) }));
        QCOMPARE(g.rows, 8);
        QCOMPARE(g.cols, 3);
        QCOMPARE(g.rowAxis, QStringLiteral("dims 0–1 folded"));
        QCOMPARE(g.pieces[0].rects.size(), std::size_t(2));
        QVERIFY((g.pieces[0].rects[0] == FoldedRect { 0, 0, 2, 3 }));
        QVERIFY((g.pieces[0].rects[1] == FoldedRect { 4, 0, 6, 3 }));
        QVERIFY(g.gaps.empty());
        // Sharded on dim 0: one contiguous run each.
        const auto h = PlacementGeometry::compute(tensor({ 2, 4, 3 }, { makePiece(0, { 0, 0, 0 }, { 1, 4, 3 }), makePiece(1, { 1, 0, 0 }, { 1, 4, 3 }) }));
        QCOMPARE(h.pieces[1].rects.size(), std::size_t(1));
        QVERIFY((h.pieces[1].rects[0] == FoldedRect { 4, 0, 8, 3 }));
    }

    void zeroDimAndEmpty()
    {
        const auto g = PlacementGeometry::compute(tensor({}, { makePiece(0, {}, {}) }));
        QCOMPARE(g.dims, 0);
        QCOMPARE(g.rows, 1);
        QCOMPARE(g.cols, 1);
        QVERIFY(g.gaps.empty());
        const auto none = PlacementGeometry::compute(tensor({ 4, 4 }, {}));
        QCOMPARE(none.gaps.size(), std::size_t(1));
        // Zero-size DCP shards are ignored, not drawn.
        const auto empty = PlacementGeometry::compute(tensor({ 4 }, { makePiece(0, { 0 }, { 4 }), makePiece(1, { 4 }, { 0 }) }));
        QVERIFY(empty.pieces[1].rects.empty());
        QVERIFY(empty.gaps.empty());
    }
};

QTEST_MAIN(TestPlacementGeometry)
#include "tst_placementgeometry.moc"
