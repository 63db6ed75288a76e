// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/coverage.h"
#include "meshcoordinates.h"
#include "model/placement.h"
#include "testutil.h"

#include <QElapsedTimer>
#include <QTest>

using namespace tessera;

namespace {

Piece piece(int rank, Shape offsets, Shape shape, PieceRole role = PieceRole::Primary)
{
    Piece p;
    p.file = "/ckpt/model_world_size_4_rank_" + std::to_string(rank) + ".pt";
    p.rank = rank;
    p.role = role;
    p.offsets = std::move(offsets);
    p.shape = std::move(shape);
    return p;
}

TensorInfo tensor(Shape shape, std::vector<Piece> pieces)
{
    TensorInfo t;
    t.name = "w";
    t.dtype = DType::BFloat16;
    t.shape = std::move(shape);
    t.pieces = std::move(pieces);
    return t;
}

QString joined(const std::vector<std::string>& messages)
{
    QString out;
    for (const auto& m : messages)
        out += QString::fromStdString(m) + QStringLiteral("\n");
    return out;
}

/// Builds the pieces every rank of a mesh would hold, through computeLocalLayout.
TensorInfo fromPlacements(const Shape& global, const Shape& mesh, const std::vector<Placement>& placements)
{
    TensorInfo t = tensor(global, {});
    int rank = 0;
    for (const Shape& c : test::allCoordinates(mesh)) {
        auto layout = computeLocalLayout(global, mesh, c, placements);
        if (!layout)
            qFatal("%s", layout.error().message.c_str());
        for (const auto& box : layout->boxes) {
            const PieceRole role = layout->isReplica ? PieceRole::Replica
                                   : layout->isPartial ? PieceRole::PartialTerm
                                                       : PieceRole::Primary;
            t.pieces.push_back(piece(rank, box.globalOffsets, box.shape, role));
        }
        if (layout->boxes.empty()) // DCP-style empty chunk at an out-of-bounds offset
            t.pieces.push_back(piece(rank, layout->globalOffset, layout->localShape));
        ++rank;
    }
    return t;
}

} // namespace

class TestCoverage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void goodTilings()
    {
        using P = Placement;
        const struct {
            Shape global, mesh;
            std::vector<Placement> placements;
        } cases[] = {
            { { 10, 3 }, { 4 }, { P::shard(0) } },
            { { 2, 3 }, { 4 }, { P::shard(0) } }, // empty shards at offset 2
            { { 9, 2 }, { 2, 2 }, { P::replicate(), P::shard(0) } },
            { { 5, 6 }, { 2, 2 }, { P::shard(0), P::shard(1) } },
            { { 10, 3 }, { 3, 2 }, { P::stridedShard(0, 2), P::shard(0) } },
            { { 7, 5 }, { 2 }, { P::stridedShard(0, 2) } },
            { { 4, 2 }, { 2, 2 }, { P::partial(), P::shard(0) } },
            { { 4, 2 }, { 2, 2 }, { P::partial(), P::replicate() } },
        };
        for (const auto& c : cases) {
            const TensorInfo t = fromPlacements(c.global, c.mesh, c.placements);
            const auto messages = checkCoverage(t);
            QVERIFY2(messages.empty(), qPrintable(QString::fromStdString(describePlacements(c.placements, c.mesh, {}))
                                                  + QStringLiteral(": ") + joined(messages)));
        }
    }

    void gap()
    {
        // Rank 2 of 4 missing: rows 6-9 of a [10, 3] tensor.
        TensorInfo t = tensor({ 10, 3 }, { piece(0, { 0, 0 }, { 3, 3 }), piece(1, { 3, 0 }, { 3, 3 }),
                                          piece(3, { 9, 0 }, { 1, 3 }) });
        const auto messages = checkCoverage(t);
        QCOMPARE(messages.size(), size_t(1));
        QCOMPARE(messages[0], std::string("no piece provides box [6:9, 0:3]; 9 of 30 elements are missing in all"));

        // Gap in the second dim of a 2-D grid.
        TensorInfo grid = tensor({ 4, 6 }, { piece(0, { 0, 0 }, { 2, 3 }), piece(1, { 0, 3 }, { 2, 3 }),
                                             piece(2, { 2, 0 }, { 2, 3 }) });
        const auto gridMessages = checkCoverage(grid);
        QCOMPARE(gridMessages.size(), size_t(1));
        QVERIFY2(gridMessages[0].find("[2:4, 3:6]") != std::string::npos, gridMessages[0].c_str());

        QCOMPARE(checkCoverage(tensor({ 3 }, {})).front(),
                 std::string("no piece provides any element of the tensor of shape [0:3]"));
    }

    void missingElementsAreMaskedExactly()
    {
        std::uint64_t missing = 99;
        // The pieces tile the tensor: no mask, whatever the placement.
        for (const auto& placements : { std::vector<Placement> { Placement::shard(0), Placement::shard(1) },
                                        std::vector<Placement> { Placement::partial(), Placement::shard(0) } }) {
            const TensorInfo whole = fromPlacements({ 4, 6 }, { 2, 2 }, placements);
            QVERIFY(missingElementMask(whole, missing).empty());
            QCOMPARE(missing, std::uint64_t(0));
        }
        // Rank 2 of 4 missing: rows 6-8 of a [10, 3] tensor, exactly those elements.
        TensorInfo t = tensor({ 10, 3 }, { piece(0, { 0, 0 }, { 3, 3 }), piece(1, { 3, 0 }, { 3, 3 }),
                                          piece(3, { 9, 0 }, { 1, 3 }) });
        auto mask = missingElementMask(t, missing);
        QCOMPARE(missing, std::uint64_t(9));
        QCOMPARE(mask.size(), std::size_t(30));
        for (std::size_t i = 0; i < mask.size(); ++i)
            QCOMPARE(int(mask[i]), i >= 18 && i < 27 ? 1 : 0);
        // A grid hole in the second dim.
        TensorInfo grid = tensor({ 4, 6 }, { piece(0, { 0, 0 }, { 2, 3 }), piece(1, { 0, 3 }, { 2, 3 }),
                                             piece(2, { 2, 0 }, { 2, 3 }) });
        mask = missingElementMask(grid, missing);
        QCOMPARE(missing, std::uint64_t(6));
        for (std::size_t i = 0; i < mask.size(); ++i)
            QCOMPARE(int(mask[i]), i / 6 >= 2 && i % 6 >= 3 ? 1 : 0);
        // Equal volumes that overlap still leave an element out.
        mask = missingElementMask(tensor({ 4 }, { piece(0, { 0 }, { 2 }), piece(1, { 1 }, { 2 }) }), missing);
        QCOMPARE(missing, std::uint64_t(1));
        QCOMPARE(int(mask[3]), 1);
        // Replicas provide nothing of their own; a 0-dim tensor with no piece is one missing element.
        mask = missingElementMask(tensor({ 2 }, { piece(0, { 0 }, { 2 }, PieceRole::Replica) }), missing);
        QCOMPARE(missing, std::uint64_t(2));
        mask = missingElementMask(tensor({}, {}), missing);
        QCOMPARE(missing, std::uint64_t(1));
        QCOMPARE(checkGaps(t), std::string("no piece provides box [6:9, 0:3]; 9 of 30 elements are missing in all"));
        QCOMPARE(checkGaps(tensor({ 8 }, { piece(0, { 0 }, { 8 }) })), std::string());
    }

    void overlap()
    {
        TensorInfo t = tensor({ 8 }, { piece(0, { 0 }, { 5 }), piece(1, { 4 }, { 4 }) });
        const auto messages = checkCoverage(t);
        QCOMPARE(messages.size(), size_t(1));
        QVERIFY2(messages[0].find("rank 0 (model_world_size_4_rank_0.pt) [0:5] and rank 1") != std::string::npos,
                 messages[0].c_str());
        QVERIFY2(messages[0].find("overlap on [4:5]") != std::string::npos, messages[0].c_str());

        // The same box twice as Primary (an unmarked replica) is an overlap too.
        TensorInfo dup = tensor({ 4, 4 }, { piece(0, { 0, 0 }, { 4, 4 }), piece(1, { 0, 0 }, { 4, 4 }) });
        QCOMPARE(checkCoverage(dup).size(), size_t(1));

        // Overlap plus gap: both reported.
        TensorInfo both = tensor({ 10 }, { piece(0, { 0 }, { 4 }), piece(1, { 2 }, { 4 }) });
        const auto bothMessages = checkCoverage(both);
        QCOMPARE(bothMessages.size(), size_t(2));
        QVERIFY2(bothMessages[1].find("no piece provides box [6:10]") != std::string::npos, bothMessages[1].c_str());
    }

    void outOfBoundsAndRank()
    {
        TensorInfo t = tensor({ 4, 4 }, { piece(0, { 0, 0 }, { 4, 3 }), piece(1, { 0, 3 }, { 4, 2 }) });
        const auto messages = checkCoverage(t);
        QCOMPARE(messages.size(), size_t(1));
        QVERIFY2(messages[0].find("rank 1 (model_world_size_4_rank_1.pt) box [0:4, 3:5] reaches outside the tensor")
                     != std::string::npos,
                 messages[0].c_str());

        TensorInfo rank = tensor({ 4, 4 }, { piece(0, { 0, 0 }, { 4, 4 }), piece(1, { 0 }, { 4 }) });
        const auto rankMessages = checkCoverage(rank);
        QCOMPARE(rankMessages.size(), size_t(1));
        QVERIFY2(rankMessages[0].find("but the tensor has 2 dims") != std::string::npos, rankMessages[0].c_str());

        TensorInfo negative = tensor({ 4 }, { piece(0, { -1 }, { 5 }) });
        QVERIFY(!checkCoverage(negative).empty());
    }

    void zeroDimAndEmpty()
    {
        QVERIFY(checkCoverage(tensor({}, { piece(0, {}, {}) })).empty());
        QCOMPARE(checkCoverage(tensor({}, { piece(0, {}, {}), piece(1, {}, {}) })).size(), size_t(1));
        QVERIFY(checkCoverage(tensor({}, { piece(0, {}, {}), piece(1, {}, {}, PieceRole::Replica) })).empty());
        QCOMPARE(checkCoverage(tensor({}, {})).size(), size_t(1));
        // A tensor with a zero-size dim needs no pieces; zero-size pieces anywhere are ignored.
        QVERIFY(checkCoverage(tensor({ 0, 4 }, {})).empty());
        QVERIFY(checkCoverage(tensor({ 0, 4 }, { piece(0, { 0, 0 }, { 0, 4 }), piece(1, { 0, 4 }, { 0, 0 }) })).empty());
        QVERIFY(checkCoverage(tensor({ 2 }, { piece(0, { 0 }, { 2 }), piece(1, { 2 }, { 0 }), piece(2, { 7 }, { 0 }) }))
                    .empty());
    }

    void replicasAndPartials()
    {
        TensorInfo t = tensor({ 4 }, { piece(0, { 0 }, { 2 }), piece(1, { 2 }, { 2 }),
                                       piece(2, { 0 }, { 2 }, PieceRole::Replica),
                                       piece(3, { 1 }, { 2 }, PieceRole::Replica) });
        const auto messages = checkCoverage(t);
        QCOMPARE(messages.size(), size_t(1));
        QVERIFY2(messages[0].find("rank 3") != std::string::npos && messages[0].find("replica of box [1:3]") != std::string::npos,
                 messages[0].c_str());

        // Partial terms: box [0:2] has two terms, box [2:4] only one.
        TensorInfo partial = tensor({ 4 }, { piece(0, { 0 }, { 2 }, PieceRole::PartialTerm),
                                             piece(1, { 0 }, { 2 }, PieceRole::PartialTerm),
                                             piece(2, { 2 }, { 2 }, PieceRole::PartialTerm) });
        const auto partialMessages = checkCoverage(partial);
        QCOMPARE(partialMessages.size(), size_t(1));
        QVERIFY2(partialMessages[0].find("box [2:4] has 1 Partial term(s)") != std::string::npos,
                 partialMessages[0].c_str());

        // A Partial group overlapping a Primary piece is ambiguous.
        TensorInfo mixed = tensor({ 4 }, { piece(0, { 0 }, { 4 }), piece(1, { 0 }, { 2 }, PieceRole::PartialTerm) });
        QCOMPARE(checkCoverage(mixed).size(), size_t(1));
    }

    void manyPiecesAreFast()
    {
        // 4096 column shards of a [64, 4096·3] tensor (a Shard(1) tiling every box spans dim 0 of), then 4096×4
        // grid pieces with one missing: both must stay far from quadratic element enumeration.
        const int n = 4096;
        TensorInfo columns = tensor({ 64, 3 * n }, {});
        for (int i = 0; i < n; ++i)
            columns.pieces.push_back(piece(i, { 0, 3 * i }, { 64, 3 }));
        QElapsedTimer timer;
        timer.start();
        QVERIFY(checkCoverage(columns).empty());
        TensorInfo grid = tensor({ 2 * n, 16 }, {});
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < 4; ++j)
                if (!(i == 1234 && j == 2))
                    grid.pieces.push_back(piece(i, { 2 * i, 4 * j }, { 2, 4 }));
        const auto messages = checkCoverage(grid);
        QCOMPARE(messages.size(), size_t(1));
        QVERIFY2(messages[0].find("[2468:2470, 8:12]") != std::string::npos, messages[0].c_str());
        QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::number(timer.elapsed())));
    }
};

QTEST_GUILESS_MAIN(TestCoverage)
#include "tst_coverage.moc"
