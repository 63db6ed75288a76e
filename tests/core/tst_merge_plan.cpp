// SPDX-License-Identifier: GPL-3.0-or-later
// The merge plan from a checkpoint description alone: copy modes, files, ties, refusals.

#include "testutil.h"

#include "merge/merge_plan.h"
#include "formats/scan.h"

#include <nlohmann/json.hpp>

using namespace tessera;

namespace {

TensorInfo tensor(const std::string& name, DType dtype, const Shape& shape, std::vector<Piece> pieces)
{
    TensorInfo t;
    t.name = name;
    t.dtype = dtype;
    t.shape = shape;
    t.pieces = std::move(pieces);
    return t;
}

Piece piece(const Shape& offsets, const Shape& shape, const Shape& strides, DType dtype, PieceRole role = PieceRole::Primary)
{
    Piece p;
    p.file = "/nonexistent";
    p.offsets = offsets;
    p.shape = shape;
    p.strides = strides;
    p.storedDtype = dtype;
    p.role = role;
    return p;
}

CheckpointInfo sample()
{
    CheckpointInfo info;
    info.layout = "verl-fsdp";
    info.root = "/ckpt";
    info.tensors.push_back(tensor("rows", DType::BFloat16, { 4, 2 },
                                  { piece({ 0, 0 }, { 2, 2 }, { 2, 1 }, DType::BFloat16),
                                    piece({ 2, 0 }, { 2, 2 }, { 2, 1 }, DType::BFloat16) }));
    info.tensors.push_back(tensor("cols", DType::Float32, { 2, 4 },
                                  { piece({ 0, 0 }, { 2, 2 }, { 2, 1 }, DType::Float32),
                                    piece({ 0, 2 }, { 2, 2 }, { 2, 1 }, DType::Float32) }));
    info.tensors.push_back(tensor("sum", DType::Float32, { 3 },
                                  { piece({ 0 }, { 3 }, { 1 }, DType::Float32, PieceRole::PartialTerm),
                                    piece({ 0 }, { 3 }, { 1 }, DType::Float32, PieceRole::PartialTerm) }));
    info.tensors.push_back(tensor("scalar", DType::Int64, {},
                                  { piece({}, {}, {}, DType::Int64), piece({}, {}, {}, DType::Int64, PieceRole::Replica) }));
    return info;
}

} // namespace

class TestMergePlan : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void choosesCopyModes()
    {
        auto plan = planMerge(sample(), {});
        QVERIFY_RESULT(plan);
        QCOMPARE(plan->tensors.size(), std::size_t(4));
        QCOMPARE(int(plan->tensors[0].mode), int(CopyMode::Direct));
        QCOMPARE(int(plan->tensors[1].mode), int(CopyMode::Gather));
        QCOMPARE(int(plan->tensors[2].mode), int(CopyMode::Sum));
        QCOMPARE(int(plan->tensors[3].mode), int(CopyMode::Direct));
        QCOMPARE(plan->tensors[3].replicas.size(), std::size_t(1));
        QCOMPARE(plan->totalBytes, std::uint64_t(16 + 32 + 12 + 8));
        QCOMPARE(plan->files.size(), std::size_t(1));
        QCOMPARE(plan->files[0].name, std::string("model.safetensors"));
        QVERIFY(plan->indexJson.empty());
        // safetensors order: larger dtypes first, then names.
        std::vector<std::string> order;
        for (auto i : plan->files[0].tensors)
            order.push_back(plan->tensors[i].name);
        QCOMPARE(order, (std::vector<std::string> { "scalar", "cols", "sum", "rows" }));
        const auto json = mergePlanToJson(*plan, sample());
        QCOMPARE(json["tensors"][1]["mode"].get<std::string>(), std::string("gather"));
    }

    void convertsOnlyFloats()
    {
        MergeOptions options;
        options.dtype = DType::BFloat16;
        auto plan = planMerge(sample(), options);
        QVERIFY_RESULT(plan);
        QCOMPARE(plan->tensors[1].dtype, DType::BFloat16);
        QCOMPARE(plan->tensors[3].dtype, DType::Int64);
        QCOMPARE(plan->configDtype.value(), DType::BFloat16);
    }

    void shardsByMaxSize()
    {
        MergeOptions options;
        options.maxShardSize = 40;
        auto plan = planMerge(sample(), options);
        QVERIFY_RESULT(plan);
        QVERIFY(plan->files.size() > 1);
        QCOMPARE(plan->files[0].name, "model-00001-of-0000" + std::to_string(plan->files.size()) + ".safetensors");
        const auto index = nlohmann::json::parse(plan->indexJson);
        QCOMPARE(index["metadata"]["total_size"].get<std::uint64_t>(), plan->totalBytes);
        QCOMPARE(index["weight_map"].size(), std::size_t(4));
    }

    void refusesProblemsAndPeft()
    {
        auto info = sample();
        info.problems.push_back({ "/ckpt/rank1.pt", "rows", "missing on rank(s) 1" });
        auto plan = planMerge(info, {});
        QVERIFY(!plan.ok());
        QVERIFY(plan.error().message.find("missing on rank(s) 1") != std::string::npos);
        auto lora = sample();
        lora.tensors[0].name = "base_model.model.q_proj.lora_A.default.weight";
        plan = planMerge(lora, {});
        QVERIFY(!plan.ok());
        QVERIFY(plan.error().message.find("LoRA") != std::string::npos);
        QVERIFY(isPeftTensorName("x.q_proj.base_layer.weight"));
        QVERIFY(!isPeftTensorName("model.layers.0.self_attn.q_proj.weight"));
    }

    void dropsTiedLmHead()
    {
        auto info = sample();
        info.tensors.push_back(tensor("model.embed_tokens.weight", DType::BFloat16, { 2 }, { piece({ 0 }, { 2 }, { 1 }, DType::BFloat16) }));
        info.tensors.push_back(tensor("lm_head.weight", DType::BFloat16, { 2 }, { piece({ 0 }, { 2 }, { 1 }, DType::BFloat16) }));
        MergeOptions options;
        auto plan = planMerge(info, options);
        QVERIFY_RESULT(plan);
        QCOMPARE(plan->tensors.size(), std::size_t(6));
        options.forceTieWordEmbeddings = true;
        plan = planMerge(info, options);
        QVERIFY_RESULT(plan);
        QCOMPARE(plan->tensors.size(), std::size_t(5));
        QCOMPARE(plan->tieChecks.size(), std::size_t(1));
    }

    void plansFixture()
    {
        auto info = scanCheckpoint(test::fixture("hsdp_qwen2_2x2/global_step_10/actor"));
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        QCOMPARE(plan->tensors.size(), std::size_t(51));
        for (const auto& t : plan->tensors)
            QCOMPARE(int(t.mode), int(CopyMode::Direct)); // HSDP: Shard(0) rows of one replica group
        QVERIFY(plan->config.files.size() >= 3);
        QVERIFY(mergePlanSummary(*plan, *info, false).find("model.safetensors") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestMergePlan)
#include "tst_merge_plan.moc"
