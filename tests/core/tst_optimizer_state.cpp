// SPDX-License-Identifier: GPL-3.0-or-later
// Optimizer state beside (or instead of) the model, from real PyTorch checkpoints in tests/fixtures
// (make_optimizer_fixtures.py): a torchtitan DCP's training state stays out of the merged model and is listed by
// inspect; a Megatron torch_dist's optimizer keys and sharding type are listed; `merge --weights_from optimizer`
// writes the fp32 master weights bit for bit, also when the model slot is empty (verl #4370), and is refused by
// name for the sharding types that cannot be read back into weights.

#include "testutil.h"

#include "compare/tensor_diff.h"
#include "formats/megatron_optimizer.h"
#include "formats/scan.h"
#include "ops/merge_request.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <filesystem>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

std::string made(const std::string& relative) { return std::string(TESSERA_TEST_DATA_DIR) + "/" + relative; }

const std::string kDcp = "dcp_llama_optim_w2";
std::string dcpCheckpoint() { return made(kDcp + "/checkpoint/step-3"); }
std::string dcpConfig() { return made(kDcp + "/hf_config"); }

/// `tessera merge ARGS --target_dir OUT --quiet`: its exit code, stderr in `err`.
int merge(QStringList args, const std::string& out, QString* err)
{
    args << QStringLiteral("--target_dir") << QString::fromStdString(out) << QStringLiteral("--quiet");
    QString stdoutText;
    return test::runTessera(QStringList { QStringLiteral("merge") } + args, &stdoutText, err);
}

bool sameFile(const std::string& a, const std::string& b)
{
    return fs::exists(a) && fs::exists(b) && test::readFile(a) == test::readFile(b);
}

/// A checkpoint description holding only `optimizer`, for the refusal's words.
CheckpointInfo withOptimizer(const std::string& sharding, const std::vector<std::string>& keys)
{
    CheckpointInfo info;
    info.root = "/ckpt";
    info.optimizer.layout = OptimizerState::Layout::MegatronCanonical;
    info.optimizer.shardingType = sharding;
    info.optimizer.shardingSource = "common.pt: optimizer.param_state_sharding_type";
    for (const auto& k : keys) {
        TensorInfo t;
        t.name = k;
        info.optimizer.tensors.push_back(t);
    }
    return info;
}

} // namespace

class TestOptimizerState : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // torchtitan saves the model's keys beside `optimizer.*`, `lr_scheduler.*`, `dataloader.*`, `train_state.*`.
    // Before, the 63 optimizer tensors and train_state.step were merged into model.safetensors as weights.
    void dcpTrainingStateIsNotTheModel()
    {
        auto info = scanCheckpoint(dcpCheckpoint(), ScanOptions { dcpConfig(), 0 });
        QVERIFY_RESULT(info);
        QVERIFY(info->problems.empty());
        QCOMPARE(info->tensors.size(), std::size_t(21));
        for (const auto& t : info->tensors)
            QVERIFY2(t.name.rfind("optimizer.", 0) != 0 && t.name.rfind("train_state.", 0) != 0, t.name.c_str());
        const OptimizerState& o = info->optimizer;
        QCOMPARE(int(o.layout), int(OptimizerState::Layout::TorchFlattened));
        QCOMPARE(o.tensors.size(), std::size_t(63));
        QCOMPARE(o.kinds.at("exp_avg"), std::size_t(21));
        QCOMPARE(o.kinds.at("exp_avg_sq"), std::size_t(21));
        QCOMPARE(o.kinds.at("step"), std::size_t(21));
        QCOMPARE(o.parameters, std::size_t(21));
        QCOMPARE(o.otherEntries, std::size_t(21 * 11)); // each parameter's param_groups hyper-parameters
        QVERIFY(!o.masterWeights);
        QCOMPARE(QString::fromStdString(info->notes.at("training_state")),
                 QStringLiteral("dataloader (3), lr_scheduler (7), train_state (4), not part of the model"));

        const std::string out = test::makeTempDir() + "/merged";
        QString err;
        const int code = merge(test::A({ "--local_dir", QString::fromStdString(dcpCheckpoint()), "--hf_model_path",
                                 QString::fromStdString(dcpConfig()) }),
                               out, &err);
        QVERIFY2(code == 0, qPrintable(err));
        QVERIFY(sameFile(out + "/model.safetensors", made(kDcp + "/reference/model.safetensors")));
    }

    // The optimizer's tensors are read as they are: its Adam moments equal the ones the run gathered.
    void dcpMomentsAreTheRunsMoments()
    {
        auto info = scanCheckpoint(dcpCheckpoint(), ScanOptions { dcpConfig(), 0 });
        QVERIFY_RESULT(info);
        CheckpointInfo moments = *info;
        moments.tensors.clear();
        for (const auto& t : info->optimizer.tensors)
            if (t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".step") != 0) {
                TensorInfo renamed = t;
                renamed.name = t.name.substr(std::string("optimizer.state.").size()); // <fqn>.exp_avg as saved
                moments.tensors.push_back(renamed);
            }
        auto reference = scanCheckpoint(made(kDcp + "/reference/optimizer_moments.safetensors"));
        QVERIFY_RESULT(reference);
        auto report = diffCheckpoints(moments, *reference, DiffOptions {});
        QVERIFY_RESULT(report);
        QCOMPARE(report->tensors.size(), std::size_t(42));
        QVERIFY2(report->count(DiffStatus::Identical) == 42, report->summary().c_str());
    }

    void inspectListsTheOptimizer_data()
    {
        QTest::addColumn<QString>("checkpoint");
        QTest::addColumn<QString>("layout");
        QTest::addColumn<QString>("sharding");
        QTest::addColumn<int>("tensors");
        QTest::addColumn<bool>("masterWeights");
        QTest::addColumn<QString>("textLine");
        QTest::newRow("torchtitan dcp")
            << QString::fromStdString(kDcp + "/checkpoint/step-3") << "torch-flattened" << "" << 63 << false
            << "Optimizer   torch-flattened: 63 tensors (exp_avg 21, exp_avg_sq 21, step 21) for 21 parameters, 231 "
               "other entries";
        QTest::newRow("fully reshardable") << "megatron_dist_llama_optim_tp2" << "megatron-canonical"
                                           << "fully_reshardable" << 27 << true
                                           << "Optimizer   megatron-canonical: 27 tensors (exp_avg 9, exp_avg_sq 9, "
                                              "fp32_param 9) for 9 parameters";
        QTest::newRow("#4370 chained, no model") << "megatron_dist_llama_optim_only_tp2" << "megatron-canonical"
                                                 << "fully_reshardable" << 27 << true
                                                 << "sharding type fully_reshardable (common.pt: "
                                                    "optimizer[0].param_state_sharding_type)";
        QTest::newRow("dp reshardable") << "megatron_dist_llama_dp_reshardable_tp2" << "megatron-flat-buffers"
                                        << "dp_reshardable" << 6 << false
                                        << "Optimizer   megatron-flat-buffers: 6 tensors (exp_avg 2, exp_avg_sq 2, "
                                           "param 2)";
    }

    void inspectListsTheOptimizer()
    {
        QFETCH(QString, checkpoint);
        QFETCH(QString, layout);
        QFETCH(QString, sharding);
        QFETCH(int, tensors);
        QFETCH(bool, masterWeights);
        QFETCH(QString, textLine);
        const QString path = QString::fromStdString(made(checkpoint.toStdString()));
        QStringList config;
        if (checkpoint.startsWith(QString::fromStdString(kDcp)))
            config << QStringLiteral("--hf_model_path") << QString::fromStdString(dcpConfig());
        QString out, err;
        QVERIFY(test::runTessera(test::A({ "inspect", path }) + config, &out, &err) <= 1);
        QVERIFY2(out.contains(textLine), qPrintable(out));
        const QString verdict = masterWeights
            ? QStringLiteral("master weights: yes, merge them with --weights_from optimizer")
            : QStringLiteral("master weights: none (");
        QVERIFY2(out.contains(verdict),
                 qPrintable(out));
        QVERIFY(test::runTessera(test::A({ "inspect", "--json", path }) + config, &out, &err) <= 1);
        const auto j = nlohmann::json::parse(out.toStdString());
        const auto& o = j.at("optimizer");
        QCOMPARE(QString::fromStdString(o.at("layout").get<std::string>()), layout);
        QCOMPARE(o.at("tensors").get<int>(), tensors);
        QCOMPARE(int(o.at("keys").size()), tensors);
        QCOMPARE(o.at("master_weights").get<bool>(), masterWeights);
        QCOMPARE(QString::fromStdString(o.value("sharding_type", std::string())), sharding);
        for (const auto& t : j.at("tensors")) // the model's tensors only
            QVERIFY(t.at("name").get<std::string>().find("optimizer.") == std::string::npos);
    }

    // The fp32 master weights through the same Megatron mapping as the model keys (QKV, GLU, TP, vocabulary
    // padding), from the run root, with and without model keys beside them.
    void weightsFromOptimizerAreTheMasterWeights_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("source");
        QTest::newRow("beside the model") << "megatron_dist_llama_optim_tp2" << "";
        QTest::newRow("beside the model, step folder") << "megatron_dist_llama_optim_tp2"
                                                     << "/global_step_10";
        QTest::newRow("#4370: no model keys") << "megatron_dist_llama_optim_only_tp2" << "";
        QTest::newRow("#4370: actor") << "megatron_dist_llama_optim_only_tp2" << "/global_step_10/actor";
    }

    void weightsFromOptimizerAreTheMasterWeights()
    {
        QFETCH(QString, fixture);
        QFETCH(QString, source);
        const std::string base = made(fixture.toStdString());
        const std::string out = test::makeTempDir() + "/merged";
        QString err;
        const QString local = QString::fromStdString(base) + source;
        const int code = merge(test::A({ "--local_dir", local, "--weights_from", "optimizer" }), out, &err);
        QVERIFY2(code == 0, qPrintable(err));
        QVERIFY(sameFile(out + "/model.safetensors", base + "/reference/model.safetensors"));
    }

    // The master weights rounded to bf16 as a merge's --dtype rounds (to nearest even) are Megatron's bf16 model copy.
    void masterWeightsRoundedAreTheModelCopy()
    {
        const std::string base = made("megatron_dist_llama_optim_tp2");
        const std::string out = test::makeTempDir() + "/merged";
        QString err;
        const QStringList args = test::A({ "--local_dir", base, "--weights_from", "optimizer", "--dtype", "bf16" });
        QVERIFY2(merge(args, out, &err) == 0, qPrintable(err));
        QVERIFY(sameFile(out + "/model.safetensors", base + "/reference_bf16/model.safetensors"));
    }

    // The default still merges the model keys: the bf16 weights, not the master weights.
    void defaultMergeIsTheModelKeys()
    {
        const std::string base = made("megatron_dist_llama_optim_tp2");
        const std::string out = test::makeTempDir() + "/merged";
        QString err;
        QVERIFY2(merge(test::A({ "--local_dir", QString::fromStdString(base) }), out, &err) == 0, qPrintable(err));
        QVERIFY(sameFile(out + "/model.safetensors", base + "/reference_bf16/model.safetensors"));
        QVERIFY(!sameFile(out + "/model.safetensors", base + "/reference/model.safetensors"));
    }

    // verl #4370's folder: the model merge is refused, and the message points to the master weights.
    void emptyModelSlotPointsToTheMasterWeights()
    {
        const std::string out = test::makeTempDir() + "/merged";
        QString err;
        QCOMPARE(merge(test::A({ "--local_dir", made("megatron_dist_llama_optim_only_tp2") }), out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("holds no model weights")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("--weights_from optimizer")), qPrintable(err));
        QVERIFY(!fs::exists(out));
    }

    // dp_reshardable's flat buffers cannot be cut back into parameters: refused by the name common.pt records, with
    // the Megatron option that writes a readable state, and nothing written.
    void dpReshardableIsRefusedByName()
    {
        const std::string out = test::makeTempDir() + "/merged";
        QString err;
        QCOMPARE(merge(test::A({ "--local_dir", QString::fromStdString(made("megatron_dist_llama_dp_reshardable_tp2")),
                         "--weights_from", "optimizer" }),
                       out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("'dp_reshardable' (common.pt: optimizer.param_state_sharding_type)")),
                 qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("--dist-ckpt-optim-fully-reshardable")), qPrintable(err));
        QVERIFY(!fs::exists(out));
    }

    void otherShardingTypesAreRefusedByName_data()
    {
        QTest::addColumn<QString>("sharding");
        QTest::newRow("deprecated model space") << "fully_sharded_model_space";
        QTest::newRow("deprecated gather/scatter") << "dp_zero_gather_scatter";
        QTest::newRow("chained, one flat") << "dp_reshardable, fully_reshardable";
    }

    void otherShardingTypesAreRefusedByName()
    {
        QFETCH(QString, sharding);
        const auto info = withOptimizer(sharding.toStdString(), { "optimizer.state.fp32_param.a" });
        const std::string why = megatronMasterWeightsRefusal(info, { "a" });
        const std::string first = sharding.toStdString().substr(0, sharding.toStdString().find(','));
        QVERIFY2(why.find("'" + first + "'") != std::string::npos, why.c_str());
        QVERIFY2(why.find("--dist-ckpt-optim-fully-reshardable") != std::string::npos, why.c_str());
        QVERIFY(megatronMasterWeightsRefusal(withOptimizer("fully_reshardable", { "optimizer.state.fp32_param.a" }),
                                             { "a" })
                    .empty());
    }

    // Flat buffers whose sharding type no common.pt records (Megatron-core v0.19 keeps it inside the archive).
    void unrecordedFlatBuffersAreRefused()
    {
        CheckpointInfo info = withOptimizer("", {});
        info.optimizer.layout = OptimizerState::Layout::MegatronFlatBuffers;
        const std::string why = megatronMasterWeightsRefusal(info, { "a" });
        QVERIFY2(why.find("flat per-bucket buffers") != std::string::npos, why.c_str());
        QVERIFY2(why.find("--dist-ckpt-optim-fully-reshardable") != std::string::npos, why.c_str());
    }

    // Canonical state without fp32_param for some parameters (the model's keys, or those with other state): named.
    void missingMasterWeightsAreNamed()
    {
        const auto info = withOptimizer("", { "chained_0.optimizer.state.fp32_param.a",
                                              "chained_0.optimizer.state.exp_avg.a",
                                              "chained_1.optimizer.state.exp_avg.b" });
        const std::string why = megatronMasterWeightsRefusal(info, { "a", "c" });
        QVERIFY2(why.find("for 2 of its parameters: b, c") != std::string::npos, why.c_str());
        const auto none = withOptimizer("", { "optimizer.state.exp_avg.a" });
        const std::string noMaster = megatronMasterWeightsRefusal(none, { "a" });
        QVERIFY2(noMaster.find("the model keys are the weights") != std::string::npos, noMaster.c_str());
    }

    // Layouts whose optimizer keeps no master weights, or that have none: refused, saying why.
    void otherLayoutsAreRefused()
    {
        const std::string out = test::makeTempDir() + "/merged";
        QString err;
        QCOMPARE(merge(test::A({ "--local_dir", QString::fromStdString(dcpCheckpoint()), "--hf_model_path",
                         QString::fromStdString(dcpConfig()), "--weights_from", "optimizer" }),
                       out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("torch.optim's state, which keeps no copy of the weights")),
                 qPrintable(err));
        QCOMPARE(merge(test::A({ "--local_dir", made("megatron_dist_qwen2_tp2_pp1"), "--weights_from", "optimizer" }),
                       out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("holds no optimizer state")), qPrintable(err));
        QVERIFY(!fs::exists(out));
    }

    void flagIsARequestWord()
    {
        auto r = MergeRequest::fromArgs({ "--local_dir", "x", "--weights_from", "optimizer" });
        QVERIFY_RESULT(r);
        QCOMPARE(r->weightsFrom.value_or(""), std::string("optimizer"));
        QVERIFY(MergeRequest::fromArgs(r->toArgs()).value() == *r);
        auto wrong = MergeRequest::fromArgs({ "--local_dir", "x", "--weights_from", "adam" });
        QVERIFY_RESULT(wrong);
        const Status status = wrong->validate();
        QVERIFY(!status);
        QCOMPARE(QString::fromStdString(status.error().message),
                 QStringLiteral("--weights_from must be model or optimizer (got 'adam')"));
    }
};

QTEST_GUILESS_MAIN(TestOptimizerState)
#include "tst_optimizer_state.moc"
