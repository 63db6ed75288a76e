// SPDX-License-Identifier: GPL-3.0-or-later
// DTensor placement math against torch's _compute_local_shape_and_global_offset / _StridedShard._split_tensor.
// Expected numbers are worked out by hand from torch's algorithm (see the comments next to each table).
#include "meshcoordinates.h"
#include "model/placement.h"
#include "testutil.h"

#include <QTest>

#include <map>

using namespace tessera;

namespace {

using P = Placement;
using test::allCoordinates;

QString str(const Shape& s)
{
    QString out = QStringLiteral("[");
    for (size_t i = 0; i < s.size(); ++i)
        out += (i ? QStringLiteral(",") : QString()) + QString::number(s[i]);
    return out + QStringLiteral("]");
}

std::int64_t product(const Shape& s)
{
    std::int64_t n = 1;
    for (auto v : s)
        n *= v;
    return n;
}

/// Checks that the first holders' boxes tile the global tensor exactly once, that each rank's boxes tile its
/// local shape exactly once, and (for Partial) that every coordinate of the Partial dims covers it once more.
void checkTiling(const Shape& global, const Shape& mesh, const std::vector<Placement>& placements)
{
    const size_t ndim = global.size();
    std::vector<int> hits(static_cast<size_t>(product(global)), 0);
    for (const Shape& coord : allCoordinates(mesh)) {
        auto layout = computeLocalLayout(global, mesh, coord, placements);
        QVERIFY_RESULT(layout);
        std::vector<int> localHits(static_cast<size_t>(product(layout->localShape)), 0);
        for (const LocalBox& box : layout->boxes) {
            QCOMPARE(box.shape.size(), ndim);
            // Enumerate the box's elements (tests use tiny tensors).
            Shape idx(ndim, 0);
            const std::int64_t n = product(box.shape);
            for (std::int64_t k = 0; k < n; ++k) {
                std::int64_t rem = k;
                for (size_t d = ndim; d-- > 0;) {
                    idx[d] = rem % box.shape[d];
                    rem /= box.shape[d];
                }
                std::int64_t g = 0;
                std::int64_t l = 0;
                for (size_t d = 0; d < ndim; ++d) {
                    const std::int64_t gi = box.globalOffsets[d] + idx[d];
                    const std::int64_t li = box.localOffsets[d] + idx[d];
                    QVERIFY(gi >= 0 && gi < global[d]);
                    QVERIFY(li >= 0 && li < layout->localShape[d]);
                    g = g * global[d] + gi;
                    l = l * layout->localShape[d] + li;
                }
                ++localHits[static_cast<size_t>(l)];
                if (!layout->isReplica && !layout->isPartial)
                    ++hits[static_cast<size_t>(g)];
            }
        }
        for (int h : localHits)
            QCOMPARE(h, 1);
    }
    bool partial = false;
    for (const auto& p : placements)
        partial = partial || p.kind == Placement::Kind::Partial;
    if (partial)
        return;
    for (size_t i = 0; i < hits.size(); ++i)
        QVERIFY2(hits[i] == 1, qPrintable(QStringLiteral("element %1 covered %2 times").arg(i).arg(hits[i])));
}

struct RowCase {
    Shape coord;
    std::int64_t offset; ///< global row offset of the first box (torch's global_offset[0])
    std::int64_t size;   ///< local rows
};

/// For placements that shard only dim 0 into one contiguous box per rank.
void checkRows(const Shape& global, const Shape& mesh, const std::vector<Placement>& placements,
               const std::vector<RowCase>& cases)
{
    for (const auto& c : cases) {
        auto layout = computeLocalLayout(global, mesh, c.coord, placements);
        QVERIFY_RESULT(layout);
        const QString what = QStringLiteral("coordinate ") + str(c.coord);
        QVERIFY2(layout->localShape[0] == c.size, qPrintable(what + QStringLiteral(" size ") + str(layout->localShape)));
        QVERIFY2(layout->globalOffset[0] == c.offset,
                 qPrintable(what + QStringLiteral(" offset ") + str(layout->globalOffset)));
        for (size_t d = 1; d < global.size(); ++d) {
            QCOMPARE(layout->localShape[d], global[d]);
            QCOMPARE(layout->globalOffset[d], std::int64_t(0));
        }
        if (c.size == 0) {
            QVERIFY(layout->boxes.empty());
        } else {
            QCOMPARE(layout->boxes.size(), size_t(1));
            QCOMPARE(layout->boxes[0].globalOffsets[0], c.offset);
            QCOMPARE(layout->boxes[0].shape, layout->localShape);
            QCOMPARE(layout->boxes[0].localOffsets, Shape(global.size(), 0));
        }
    }
    checkTiling(global, mesh, placements);
}

} // namespace

class TestPlacement : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void chunkRangeMatchesTorchChunk_data()
    {
        QTest::addColumn<qint64>("size");
        QTest::addColumn<qint64>("n");
        QTest::addColumn<QList<qint64>>("offsets");
        QTest::addColumn<QList<qint64>>("sizes");
        // torch.chunk(arange(10), 4) → sizes 3,3,3,1
        QTest::newRow("10/4") << qint64(10) << qint64(4) << QList<qint64> { 0, 3, 6, 9 } << QList<qint64> { 3, 3, 3, 1 };
        // torch.chunk(arange(2), 4) → 2 chunks; DTensor pads with empties, offsets clamped to the size
        QTest::newRow("2/4") << qint64(2) << qint64(4) << QList<qint64> { 0, 1, 2, 2 } << QList<qint64> { 1, 1, 0, 0 };
        // ceil(6/4)=2 → 2,2,2,0: torch.chunk gives only 3 chunks
        QTest::newRow("6/4") << qint64(6) << qint64(4) << QList<qint64> { 0, 2, 4, 6 } << QList<qint64> { 2, 2, 2, 0 };
        QTest::newRow("8/4") << qint64(8) << qint64(4) << QList<qint64> { 0, 2, 4, 6 } << QList<qint64> { 2, 2, 2, 2 };
        QTest::newRow("0/3") << qint64(0) << qint64(3) << QList<qint64> { 0, 0, 0 } << QList<qint64> { 0, 0, 0 };
        QTest::newRow("5/1") << qint64(5) << qint64(1) << QList<qint64> { 0 } << QList<qint64> { 5 };
    }
    void chunkRangeMatchesTorchChunk()
    {
        QFETCH(qint64, size);
        QFETCH(qint64, n);
        QFETCH(QList<qint64>, offsets);
        QFETCH(QList<qint64>, sizes);
        for (qint64 c = 0; c < n; ++c) {
            const ChunkRange r = chunkRange(size, n, c);
            QCOMPARE(qint64(r.offset), offsets[c]);
            QCOMPARE(qint64(r.size), sizes[c]);
        }
    }

    void shardUneven1D()
    {
        // 10 rows over 4 ranks: torch.chunk sizes 3,3,3,1.
        checkRows({ 10, 5 }, { 4 }, { P::shard(0) },
                  { { { 0 }, 0, 3 }, { { 1 }, 3, 3 }, { { 2 }, 6, 3 }, { { 3 }, 9, 1 } });
        // 2 rows over 4 ranks: 1,1,0,0; empty shards report offset = dim size (torch ≥ 2.5, DCP chunk offsets).
        checkRows({ 2, 3 }, { 4 }, { P::shard(0) },
                  { { { 0 }, 0, 1 }, { { 1 }, 1, 1 }, { { 2 }, 2, 0 }, { { 3 }, 2, 0 } });
    }

    void shardDim1()
    {
        auto layout = computeLocalLayout({ 4, 7 }, { 3 }, { 2 }, { P::shard(1) });
        QVERIFY_RESULT(layout);
        // ceil(7/3)=3 → columns 0-3, 3-6, 6-7
        QCOMPARE(layout->localShape, (Shape { 4, 1 }));
        QCOMPARE(layout->globalOffset, (Shape { 0, 6 }));
        QCOMPARE(layout->boxes.size(), size_t(1));
        checkTiling({ 4, 7 }, { 3 }, { P::shard(1) });
    }

    void hsdpReplicateShard()
    {
        // verl HSDP: (Replicate(), Shard(0)) on ddp=2 × fsdp=2, 9 rows → fsdp chunks 5,4.
        const Shape mesh { 2, 2 };
        const std::vector<Placement> pl { P::replicate(), P::shard(0) };
        const struct {
            Shape coord;
            std::int64_t offset, size;
            bool replica;
        } cases[] = { { { 0, 0 }, 0, 5, false }, { { 0, 1 }, 5, 4, false }, { { 1, 0 }, 0, 5, true }, { { 1, 1 }, 5, 4, true } };
        for (const auto& c : cases) {
            auto layout = computeLocalLayout({ 9, 2 }, mesh, c.coord, pl);
            QVERIFY_RESULT(layout);
            QCOMPARE(layout->globalOffset, (Shape { c.offset, 0 }));
            QCOMPARE(layout->localShape, (Shape { c.size, 2 }));
            QCOMPARE(layout->isReplica, c.replica);
            QVERIFY(!layout->isPartial);
        }
        checkTiling({ 9, 2 }, mesh, pl);
    }

    void shardTwoDims()
    {
        // (Shard(0), Shard(1)) on 2×2 of a [5, 6] tensor: rows 0-3/3-5, columns 0-3/3-6.
        const std::vector<Placement> pl { P::shard(0), P::shard(1) };
        const struct {
            Shape coord, offset, shape;
        } cases[] = { { { 0, 0 }, { 0, 0 }, { 3, 3 } }, { { 0, 1 }, { 0, 3 }, { 3, 3 } },
                      { { 1, 0 }, { 3, 0 }, { 2, 3 } }, { { 1, 1 }, { 3, 3 }, { 2, 3 } } };
        for (const auto& c : cases) {
            auto layout = computeLocalLayout({ 5, 6 }, { 2, 2 }, c.coord, pl);
            QVERIFY_RESULT(layout);
            QCOMPARE(layout->globalOffset, c.offset);
            QCOMPARE(layout->localShape, c.shape);
            QCOMPARE(layout->boxes.size(), size_t(1));
            QCOMPARE(layout->boxes[0].globalOffsets, c.offset);
        }
        checkTiling({ 5, 6 }, { 2, 2 }, pl);
    }

    void shardSameDimTwice()
    {
        // (Shard(0), Shard(0)) on 2×2, 7 rows: mesh dim 0 gives 4/3, then each again: 2,2 | 2,1.
        checkRows({ 7 }, { 2, 2 }, { P::shard(0), P::shard(0) },
                  { { { 0, 0 }, 0, 2 }, { { 0, 1 }, 2, 2 }, { { 1, 0 }, 4, 2 }, { { 1, 1 }, 6, 1 } });
        // torch's docstring example: (Shard(1), Shard(1)) on 2×2 of a [2, 5] tensor → columns 0-2, 2, 3, 4.
        const std::vector<Placement> pl { P::shard(1), P::shard(1) };
        const std::int64_t offsets[] = { 0, 2, 3, 4 };
        const std::int64_t sizes[] = { 2, 1, 1, 1 };
        int i = 0;
        for (const Shape& coord : allCoordinates({ 2, 2 })) {
            auto layout = computeLocalLayout({ 2, 5 }, { 2, 2 }, coord, pl);
            QVERIFY_RESULT(layout);
            QCOMPARE(layout->localShape, (Shape { 2, sizes[i] }));
            QCOMPARE(layout->globalOffset, (Shape { 0, offsets[i] }));
            ++i;
        }
    }

    void fsdp2PlusTp()
    {
        // (_StridedShard(0, sf=2), Shard(0)) on dp=2 × tp=2, 8 rows: TP chunks first (rows 0-4 | 4-8), then FSDP
        // chunks of each: the table in torch's _StridedShard docstring (rank 1 = (0,1) holds rows 4-5).
        checkRows({ 8, 4 }, { 2, 2 }, { P::stridedShard(0, 2), P::shard(0) },
                  { { { 0, 0 }, 0, 2 }, { { 0, 1 }, 4, 2 }, { { 1, 0 }, 2, 2 }, { { 1, 1 }, 6, 2 } });
        // Uneven: 10 rows on dp=3 × tp=2: tp chunks 0-5 | 5-10, each split 2,2,1 over dp.
        checkRows({ 10, 3 }, { 3, 2 }, { P::stridedShard(0, 2), P::shard(0) },
                  { { { 0, 0 }, 0, 2 },
                    { { 1, 0 }, 2, 2 },
                    { { 2, 0 }, 4, 1 },
                    { { 0, 1 }, 5, 2 },
                    { { 1, 1 }, 7, 2 },
                    { { 2, 1 }, 9, 1 } });
        // 3 rows on dp=2 × tp=2: tp chunks 0-2 | 2-3; the second splits 1,0 over dp.
        checkRows({ 3 }, { 2, 2 }, { P::stridedShard(0, 2), P::shard(0) },
                  { { { 0, 0 }, 0, 1 }, { { 1, 0 }, 1, 1 }, { { 0, 1 }, 2, 1 }, { { 1, 1 }, 3, 0 } });
        // TP on dim 1 (row-parallel) with FSDP on dim 0: no strided sharding needed.
        checkTiling({ 6, 4 }, { 3, 2 }, { P::shard(0), P::shard(1) });
        // FSDP2 + TP on a 3-D mesh with HSDP replication: (Replicate(), _StridedShard(0, sf=2), Shard(0)).
        checkRows({ 8 }, { 2, 2, 2 }, { P::replicate(), P::stridedShard(0, 2), P::shard(0) },
                  { { { 0, 0, 0 }, 0, 2 }, { { 0, 1, 1 }, 6, 2 }, { { 1, 1, 0 }, 2, 2 } });
    }

    void stridedThreeMeshDims()
    {
        // torch's _explicit_order_placements example: [Shard(0), _StridedShard(0, sf=2), Shard(0)] is applied in
        // mesh-dim order 0, 2, 1. 16 rows: a → [8a, 8a+8), c → +4c, b → +2b.
        const std::vector<Placement> pl { P::shard(0), P::stridedShard(0, 2), P::shard(0) };
        for (const Shape& coord : allCoordinates({ 2, 2, 2 })) {
            auto layout = computeLocalLayout({ 16 }, { 2, 2, 2 }, coord, pl);
            QVERIFY_RESULT(layout);
            QCOMPARE(layout->localShape, (Shape { 2 }));
            QCOMPARE(layout->globalOffset, (Shape { 8 * coord[0] + 4 * coord[2] + 2 * coord[1] }));
        }
        checkTiling({ 16 }, { 2, 2, 2 }, pl);
        // Two strided shards before one Shard: split factors 4 (= 2·2) and 2, innermost first.
        const std::vector<Placement> two { P::stridedShard(0, 4), P::stridedShard(0, 2), P::shard(0) };
        for (const Shape& coord : allCoordinates({ 2, 2, 2 })) {
            auto layout = computeLocalLayout({ 16 }, { 2, 2, 2 }, coord, two);
            QVERIFY_RESULT(layout);
            // order: mesh dim 2 (8 rows), then 1 (4), then 0 (2)
            QCOMPARE(layout->globalOffset, (Shape { 8 * coord[2] + 4 * coord[1] + 2 * coord[0] }));
        }
        checkTiling({ 16 }, { 2, 2, 2 }, two);
    }

    void loneStridedShardInterleaves()
    {
        // _StridedShard(0, sf=2) alone on a mesh of 2: chunk 8 rows into 2 (0-4, 4-8), each into 2; rank c keeps
        // piece c of both: rank 0 rows 0-2 and 4-6.
        const std::vector<Placement> pl { P::stridedShard(0, 2) };
        auto r0 = computeLocalLayout({ 8, 3 }, { 2 }, { 0 }, pl);
        QVERIFY_RESULT(r0);
        QCOMPARE(r0->localShape, (Shape { 4, 3 }));
        QCOMPARE(r0->boxes.size(), size_t(2));
        QCOMPARE(r0->boxes[0].globalOffsets, (Shape { 0, 0 }));
        QCOMPARE(r0->boxes[0].shape, (Shape { 2, 3 }));
        QCOMPARE(r0->boxes[0].localOffsets, (Shape { 0, 0 }));
        QCOMPARE(r0->boxes[1].globalOffsets, (Shape { 4, 0 }));
        QCOMPARE(r0->boxes[1].shape, (Shape { 2, 3 }));
        QCOMPARE(r0->boxes[1].localOffsets, (Shape { 2, 0 }));
        auto r1 = computeLocalLayout({ 8, 3 }, { 2 }, { 1 }, pl);
        QVERIFY_RESULT(r1);
        QCOMPARE(r1->boxes.size(), size_t(2));
        QCOMPARE(r1->boxes[0].globalOffsets, (Shape { 2, 0 }));
        QCOMPARE(r1->boxes[1].globalOffsets, (Shape { 6, 0 }));
        QCOMPARE(r1->boxes[1].localOffsets, (Shape { 2, 0 }));
        checkTiling({ 8, 3 }, { 2 }, pl);

        // Uneven (torch ≥ 2.6 split): 7 rows → pieces 0-4 | 4-7 → rank 0 rows 0-2, 4-6; rank 1 rows 2-4, 6-7.
        auto u1 = computeLocalLayout({ 7 }, { 2 }, { 1 }, pl);
        QVERIFY_RESULT(u1);
        QCOMPARE(u1->localShape, (Shape { 3 }));
        QCOMPARE(u1->boxes.size(), size_t(2));
        QCOMPARE(u1->boxes[0].globalOffsets, (Shape { 2 }));
        QCOMPARE(u1->boxes[0].shape, (Shape { 2 }));
        QCOMPARE(u1->boxes[1].globalOffsets, (Shape { 6 }));
        QCOMPARE(u1->boxes[1].shape, (Shape { 1 }));
        QCOMPARE(u1->boxes[1].localOffsets, (Shape { 2 }));
        checkTiling({ 7 }, { 2 }, pl);

        // Strided on dim 1 with Shard(0) on another mesh dim: boxes are the product, local offsets row-major.
        const std::vector<Placement> mixed { P::shard(0), P::stridedShard(1, 2) };
        auto m = computeLocalLayout({ 4, 8 }, { 2, 2 }, { 1, 1 }, mixed);
        QVERIFY_RESULT(m);
        QCOMPARE(m->localShape, (Shape { 2, 4 }));
        QCOMPARE(m->boxes.size(), size_t(2));
        QCOMPARE(m->boxes[0].globalOffsets, (Shape { 2, 2 }));
        QCOMPARE(m->boxes[1].globalOffsets, (Shape { 2, 6 }));
        QCOMPARE(m->boxes[1].localOffsets, (Shape { 0, 2 }));
        checkTiling({ 4, 8 }, { 2, 2 }, mixed);
        // split_factor 1 on a single rank mesh dim: no split at all, one box.
        auto one = computeLocalLayout({ 5 }, { 3 }, { 1 }, { P::stridedShard(0, 1) });
        QVERIFY_RESULT(one);
        QCOMPARE(one->boxes.size(), size_t(1));
        QCOMPARE(one->boxes[0].globalOffsets, (Shape { 2 }));
    }

    void partial()
    {
        const std::vector<Placement> pl { P::partial(), P::shard(0) };
        for (const Shape& coord : allCoordinates({ 2, 2 })) {
            auto layout = computeLocalLayout({ 4, 2 }, { 2, 2 }, coord, pl);
            QVERIFY_RESULT(layout);
            QVERIFY(layout->isPartial);
            QVERIFY(!layout->isReplica);
            QCOMPARE(layout->globalOffset, (Shape { 2 * coord[1], 0 }));
        }
        checkTiling({ 4, 2 }, { 2, 2 }, pl);
    }

    void scalarsAndEmptyTensors()
    {
        auto scalar = computeLocalLayout({}, { 4 }, { 3 }, { P::replicate() });
        QVERIFY_RESULT(scalar);
        QVERIFY(scalar->isReplica);
        QCOMPARE(scalar->localShape, Shape {});
        QCOMPARE(scalar->boxes.size(), size_t(1));
        QCOMPARE(scalar->boxes[0].shape, Shape {});
        auto empty = computeLocalLayout({ 0, 4 }, { 2 }, { 0 }, { P::shard(1) });
        QVERIFY_RESULT(empty);
        QCOMPARE(empty->localShape, (Shape { 0, 2 }));
        QVERIFY(empty->boxes.empty());
        auto noMesh = computeLocalLayout({ 3 }, {}, {}, {});
        QVERIFY_RESULT(noMesh);
        QCOMPARE(noMesh->boxes.size(), size_t(1));
        QCOMPARE(noMesh->boxes[0].shape, (Shape { 3 }));
    }

    void errors_data()
    {
        QTest::addColumn<int>("which");
        QTest::addColumn<QString>("needle");
        QTest::newRow("placement count") << 0 << QStringLiteral("one placement per mesh dim");
        QTest::newRow("coordinate rank") << 1 << QStringLiteral("has 1 entries");
        QTest::newRow("coordinate range") << 2 << QStringLiteral("outside the mesh");
        QTest::newRow("shard dim") << 3 << QStringLiteral("does not have");
        QTest::newRow("split factor") << 4 << QStringLiteral("needs split_factor 2");
        QTest::newRow("shard after strided") << 5 << QStringLiteral("after its _StridedShard part has ended");
        QTest::newRow("negative shard dim") << 6 << QStringLiteral("does not have");
        QTest::newRow("empty mesh dim") << 7 << QStringLiteral("at least one rank");
        QTest::newRow("zero split factor") << 8 << QStringLiteral("split factor below 1");
    }
    void errors()
    {
        QFETCH(int, which);
        QFETCH(QString, needle);
        Result<LocalLayout> r = Error {};
        switch (which) {
        case 0: r = computeLocalLayout({ 4 }, { 2, 2 }, { 0, 0 }, { P::shard(0) }); break;
        case 1: r = computeLocalLayout({ 4 }, { 2, 2 }, { 0 }, { P::shard(0), P::replicate() }); break;
        case 2: r = computeLocalLayout({ 4 }, { 2, 2 }, { 0, 2 }, { P::shard(0), P::replicate() }); break;
        case 3: r = computeLocalLayout({ 4 }, { 2 }, { 0 }, { P::shard(1) }); break;
        case 4: r = computeLocalLayout({ 8 }, { 2, 2 }, { 0, 0 }, { P::stridedShard(0, 3), P::shard(0) }); break;
        case 5:
            r = computeLocalLayout({ 8 }, { 2, 2, 2 }, { 0, 0, 0 }, { P::stridedShard(0, 2), P::shard(0), P::shard(0) });
            break;
        case 6: r = computeLocalLayout({ 4 }, { 2 }, { 0 }, { P::shard(-1) }); break;
        case 7: r = computeLocalLayout({ 4 }, { 0 }, { 0 }, { P::shard(0) }); break;
        case 8: r = computeLocalLayout({ 4 }, { 2 }, { 0 }, { P::stridedShard(0, 0) }); break;
        }
        QVERIFY(!r.ok());
        const QString message = QString::fromStdString(r.error().message);
        QVERIFY2(message.contains(needle), qPrintable(message));
    }

    void texts()
    {
        QCOMPARE(P::shard(0).text(), std::string("Shard(0)"));
        QCOMPARE(P::stridedShard(0, 2).text(), std::string("_StridedShard(dim=0, sf=2)"));
        QCOMPARE(P::replicate().text(), std::string("Replicate()"));
        QCOMPARE(P::partial().text(), std::string("Partial(sum)"));
        QCOMPARE(describePlacements({ P::replicate(), P::shard(0) }, { 2, 2 }, { "ddp", "fsdp" }),
                 std::string("(Replicate(), Shard(0)) on ddp=2 \u00d7 fsdp=2"));
        QCOMPARE(describePlacements({ P::shard(0) }, { 4 }, { "fsdp" }), std::string("Shard(0) on fsdp=4"));
        QCOMPARE(describePlacements({ P::stridedShard(0, 2), P::shard(0) }, { 4, 2 }, {}),
                 std::string("(_StridedShard(dim=0, sf=2), Shard(0)) on mesh 4 \u00d7 2"));
        QCOMPARE(boxText({ 0, 4 }, { 2, 4 }), std::string("[0:2, 4:8]"));
        QVERIFY(P::shard(1) == P::shard(1));
        QVERIFY(P::shard(1) != P::stridedShard(1, 2));
        QVERIFY(P::partial("sum") != P::partial("max"));
    }
};

QTEST_GUILESS_MAIN(TestPlacement)
#include "tst_placement.moc"
