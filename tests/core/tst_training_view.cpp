// SPDX-License-Identifier: GPL-3.0-or-later
// What `tessera inspect` shows of a verl FSDP checkpoint's training state: the facts, the problems of an
// incomplete or mismatched state, and each parameter's optimizer norms, checked against the moments PyTorch saved
// beside the real run (resume_llama_w2_k2/expected_at_checkpoint.safetensors), summed independently here.

#include "testutil.h"

#include "compare/training_norms.h"
#include "compare/training_report.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "formats/training_state.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

const std::string kRun = "resume_llama_w2_k2/run";
const std::string kActor = "resume_llama_w2_k2/run/global_step_2/actor";

TrainingState readState(const std::string& actorDir)
{
    auto info = scanCheckpoint(actorDir);
    if (!info)
        qFatal("%s", info.error().message.c_str());
    auto state = readTrainingState(*info, 0, silentProgress());
    if (!state)
        qFatal("%s", state.error().message.c_str());
    return std::move(*state);
}

/// Each float32 tensor of a safetensors file as doubles, read straight from its bytes.
std::map<std::string, std::vector<double>> readFloats(const std::string& path)
{
    auto file = scanSafetensorsFolder(path);
    if (!file)
        qFatal("%s", file.error().message.c_str());
    const std::string bytes = test::readFile(path);
    std::map<std::string, std::vector<double>> out;
    for (const auto& t : file->tensors) {
        const Piece& p = t.pieces.front();
        std::vector<double>& values = out[t.name];
        for (std::uint64_t i = 0; i < t.numel(); ++i) {
            float f;
            std::memcpy(&f, bytes.data() + p.dataOffset + 4 * i, 4);
            values.push_back(f);
        }
    }
    return out;
}

/// ‖x‖₂ summed in long double, pairwise with nothing of the code under test.
double l2(const std::vector<double>& values, bool alreadySquared)
{
    long double sum = 0;
    for (double v : values)
        sum += alreadySquared ? static_cast<long double>(v) : static_cast<long double>(v) * v;
    return static_cast<double>(std::sqrt(sum));
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)); }

/// A copy of the fixture's step folder (actor/ and data.pt) to damage.
std::string copyStep()
{
    return test::copyFixtureFolder("resume_llama_w2_k2/run/global_step_2");
}

nlohmann::json inspectJson(const QStringList& extra)
{
    QString out;
    test::runTessera(QStringList { QStringLiteral("inspect") } + extra + QStringList { QStringLiteral("--json") }, &out);
    return nlohmann::json::parse(out.toStdString(), nullptr, false);
}

} // namespace

class TestTrainingView : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void factsOfTheRealRun()
    {
        const TrainingState s = readState(test::fixture(kActor));
        QVERIFY(s.problems.empty());
        std::map<std::string, std::string> facts;
        for (const auto& f : trainingStateFacts(s))
            facts[f.label] = f.value;
        QCOMPARE(QString::fromStdString(facts["Optimizer"]), QStringLiteral("Adam/AdamW (exp_avg, exp_avg_sq, step)"));
        QVERIFY(facts["Settings"].find("lr 0.0095, betas (0.9, 0.999), eps 1e-08, weight_decay 0.01") == 0);
        QCOMPARE(QString::fromStdString(facts["Parameters"]), QStringLiteral("39 with state, of 39 in 1 param group"));
        QCOMPARE(QString::fromStdString(facts["Adam step"]), QStringLiteral("2"));
        QCOMPARE(QString::fromStdString(facts["Scheduler"]), QStringLiteral("last_epoch 2, lr 0.0095"));
        QVERIFY(facts["RNG state"].find("saved") == 0);
        QVERIFY(QString::fromStdString(facts["Dataloader"]).endsWith(QStringLiteral("global_step_2/data.pt")));
        QVERIFY(facts["Complete"].find("yes: ") == 0);
        QVERIFY(!facts.count("Other roles"));
    }

    /// The norms equal those of the moments PyTorch saved at the checkpoint, row for row in the model's order.
    void normsMatchTheMomentsPyTorchSaved()
    {
        const TrainingState s = readState(test::fixture(kActor));
        auto norms = computeTrainingNorms(s, 2);
        QVERIFY_RESULT(norms);
        const auto expected = readFloats(test::fixture("resume_llama_w2_k2/expected_at_checkpoint.safetensors"));
        auto model = scanCheckpoint(test::fixture(kActor));
        QVERIFY_RESULT(model);
        QCOMPARE(norms->parameters.size(), model->tensors.size());
        std::uint64_t bytes = 0;
        for (std::size_t i = 0; i < norms->parameters.size(); ++i) {
            const ParameterNorms& r = norms->parameters[i];
            QCOMPARE(r.index, std::int64_t(i));
            QCOMPARE(r.parameter, model->tensors[i].name);
            QCOMPARE(r.shape, model->tensors[i].shape);
            QCOMPARE(r.step, std::optional<double>(2.0));
            QVERIFY2(r.note.empty(), r.note.c_str());
            QVERIFY(r.expAvgNorm && r.expAvgSqRootNorm);
            const double m = l2(expected.at(r.parameter + ".exp_avg"), false);
            const double v = l2(expected.at(r.parameter + ".exp_avg_sq"), true);
            QVERIFY2(close(*r.expAvgNorm, m), qPrintable(QStringLiteral("%1: %2 vs %3").arg(QString::fromStdString(r.parameter)).arg(*r.expAvgNorm).arg(m)));
            QVERIFY2(close(*r.expAvgSqRootNorm, v), r.parameter.c_str());
            QVERIFY(m > 0 && v > 0);
            bytes += 2 * model->tensors[i].nbytes();
        }
        QCOMPARE(norms->bytesRead, bytes);
        // One thread sums the same.
        auto single = computeTrainingNorms(s, 1);
        QVERIFY_RESULT(single);
        for (std::size_t i = 0; i < single->parameters.size(); ++i)
            QCOMPARE(*single->parameters[i].expAvgNorm, *norms->parameters[i].expAvgNorm);
    }

    void normsStopWhenCanceled()
    {
        const TrainingState s = readState(test::fixture(kActor));
        test::CancelAfterFirstReport cancel;
        auto norms = computeTrainingNorms(s, 1, cancel);
        QVERIFY(!norms);
        QVERIFY(norms.error().isCanceled());
    }

    void normsNeedAnOptimizer()
    {
        const std::string step = copyStep();
        for (const char* f : { "optim_world_size_2_rank_0.pt", "optim_world_size_2_rank_1.pt" })
            fs::remove(step + "/actor/" + f);
        const TrainingState s = readState(step + "/actor");
        QVERIFY(!s.hasOptimizer());
        QVERIFY(s.hasExtraState());
        auto norms = computeTrainingNorms(s);
        QVERIFY(!norms);
        QVERIFY(norms.error().message.find("no optimizer state") != std::string::npos);
        QString err;
        QCOMPARE(test::runTessera(test::A({ "inspect", step, "--norms" }), nullptr, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("no optimizer state to read")), qPrintable(err));
        // Without --norms the facts say what is missing.
        QString out;
        QCOMPARE(test::runTessera(test::A({ "inspect", step }), &out), 0);
        QVERIFY2(out.contains(QStringLiteral("Optimizer   none (no optim_world_size_2_rank_R.pt)")), qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("Complete    no: no optimizer state")), qPrintable(out));
    }

    /// A rank's optimizer file missing: a problem named in the facts and in inspect (exit 1), and the norms of
    /// the tensors it held are left empty with why, never computed from half the elements.
    void aMissingRankIsAProblem()
    {
        const std::string step = copyStep();
        fs::remove(step + "/actor/optim_world_size_2_rank_1.pt");
        const TrainingState s = readState(step + "/actor");
        QVERIFY(!s.problems.empty());
        auto norms = computeTrainingNorms(s);
        QVERIFY_RESULT(norms);
        std::size_t incomplete = 0;
        for (const auto& r : norms->parameters)
            if (!r.expAvgNorm) {
                ++incomplete;
                // Both moments, in the state's order whichever thread read first.
                QVERIFY2(r.note.rfind("exp_avg: incomplete: no piece provides", 0) == 0, r.note.c_str());
                QVERIFY2(r.note.find("; exp_avg_sq: incomplete: no piece provides") != std::string::npos, r.note.c_str());
            }
        QVERIFY(incomplete > 0);
        QString out;
        QCOMPARE(test::runTessera(test::A({ "inspect", step, "--norms" }), &out), 1);
        QVERIFY2(out.contains(QStringLiteral("Complete    no: ")), qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("optim_world_size_2_rank_1.pt")), qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral(": incomplete: ")), qPrintable(out));
        const auto j = inspectJson(test::A({ step }));
        QVERIFY(!j["training_state"]["complete"].get<bool>());
        QVERIFY(!j["training_state"]["problems"].empty());
    }

    void aMissingExtraStateIsAProblem()
    {
        const std::string step = copyStep();
        fs::remove(step + "/actor/extra_state_world_size_2_rank_0.pt");
        QString out;
        QCOMPARE(test::runTessera(test::A({ "inspect", step + "/actor" }), &out), 1);
        QVERIFY2(out.contains(QStringLiteral("rank 0 of 2 has no extra state")), qPrintable(out));
    }

    /// The optimizer files of one model beside the model files of another: the state is not this model's.
    void stateOfAnotherModelIsAProblem()
    {
        const std::string step = copyStep();
        for (const char* f : { "model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt" })
            fs::copy_file(test::fixture(std::string("fsdp2_qwen2_w2_fp32/global_step_10/actor/") + f),
                          step + "/actor/" + f, fs::copy_options::overwrite_existing);
        const TrainingState s = readState(step + "/actor");
        bool named = false;
        for (const auto& p : s.problems)
            named = named || p.message.find("the optimizer state is not this model's") != std::string::npos;
        QVERIFY(named);
        const auto j = inspectJson(test::A({ step }));
        QVERIFY(!j["training_state"]["complete"].get<bool>());
        QString out;
        QCOMPARE(test::runTessera(test::A({ "inspect", step }), &out), 1);
        QVERIFY2(out.contains(QStringLiteral("the optimizer state is not this model's")), qPrintable(out));
    }

    void inspectText()
    {
        QString out;
        QCOMPARE(test::runTessera(test::A({ "inspect", test::fixture(kRun) }), &out), 0);
        for (const char* line : { "Training state (", "Optimizer   Adam/AdamW (exp_avg, exp_avg_sq, step)",
                                  "Settings    lr 0.0095, betas (0.9, 0.999), eps 1e-08, weight_decay 0.01",
                                  "Parameters  39 with state, of 39 in 1 param group", "Adam step   2\n",
                                  "Scheduler   last_epoch 2, lr 0.0095", "RNG state   saved",
                                  "global_step_2/data.pt", "Complete    yes: " })
            QVERIFY2(out.contains(QString::fromUtf8(line)), line);
        // The norms read every moment: only when asked.
        QVERIFY(!out.contains(QStringLiteral("Optimizer norms")));
        QCOMPARE(test::runTessera(test::A({ "inspect", test::fixture(kRun), "--norms" }), &out), 0);
        QVERIFY(out.contains(QStringLiteral("Optimizer norms (39 parameters, the 10 largest and smallest")));
        const auto rows = out.mid(out.indexOf(QStringLiteral("Optimizer norms"))).split(QLatin1Char('\n'));
        QVERIFY2(rows[2].endsWith(QStringLiteral("model.embed_tokens.weight")), qPrintable(rows[2])); // the largest
        QCOMPARE(rows[12].trimmed(), QStringLiteral("…"));
        QCOMPARE(test::runTessera(test::A({ "inspect", test::fixture(kRun), "--norms", "--tensors" }), &out), 0);
        QVERIFY(out.contains(QStringLiteral("Optimizer norms (39 parameters, in model order)")));
        const auto all = out.mid(out.indexOf(QStringLiteral("Optimizer norms"))).split(QLatin1Char('\n'));
        QVERIFY2(all[2].endsWith(QStringLiteral("model.embed_tokens.weight")), qPrintable(all[2]));
        QVERIFY2(all[40].endsWith(QStringLiteral("lm_head.weight")), qPrintable(all[40]));
    }

    void inspectJsonHasTheTrainingState()
    {
        const auto j = inspectJson(test::A({ test::fixture(kRun) }));
        QVERIFY(j.is_object());
        const auto& t = j["training_state"];
        QCOMPARE(t["world_size"].get<int>(), 2);
        QCOMPARE(t["optimizer"]["kind"].get<std::string>(), std::string("Adam/AdamW (exp_avg, exp_avg_sq, step)"));
        QCOMPARE(t["optimizer"]["hyper_parameters"]["lr"].get<std::string>(), std::string("0.0095"));
        QCOMPARE(t["optimizer"]["hyper_parameters"]["betas"].get<std::string>(), std::string("(0.9, 0.999)"));
        QCOMPARE(t["optimizer"]["step"].get<double>(), 2.0);
        QCOMPARE(t["optimizer"]["parameters_with_state"].get<int>(), 39);
        QCOMPARE(t["scheduler"]["position"].get<std::string>(), std::string("last_epoch 2, lr 0.0095"));
        QVERIFY(t["rng"].get<bool>());
        QVERIFY(t["data_file"].get<std::string>().find("global_step_2/data.pt") != std::string::npos);
        QVERIFY(t["complete"].get<bool>());
        QVERIFY(t["problems"].empty());
        QVERIFY(!t.contains("norms"));
        const auto withNorms = inspectJson(test::A({ test::fixture(kRun), "--norms" }));
        const auto& rows = withNorms["training_state"]["norms"];
        QCOMPARE(rows.size(), std::size_t(39));
        auto norms = computeTrainingNorms(readState(test::fixture(kActor)));
        QVERIFY_RESULT(norms);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            QCOMPARE(rows[i]["parameter"].get<std::string>(), norms->parameters[i].parameter);
            QCOMPARE(rows[i]["exp_avg_norm"].get<double>(), *norms->parameters[i].expAvgNorm);
            QCOMPARE(rows[i]["exp_avg_sq_sqrt_norm"].get<double>(), *norms->parameters[i].expAvgSqRootNorm);
            QCOMPARE(rows[i]["step"].get<double>(), 2.0);
        }
    }

    /// The critic's folder beside the actor's is named, and a model without any training state says nothing of it.
    void otherRolesAndModelOnly()
    {
        const std::string step = copyStep();
        fs::create_directory(step + "/critic");
        QString out;
        QCOMPARE(test::runTessera(test::A({ "inspect", step + "/actor" }), &out), 0);
        QVERIFY2(out.contains(QStringLiteral("Other roles critic/ beside it")), qPrintable(out));
        for (const auto& entry : fs::directory_iterator(step + "/actor"))
            if (entry.path().filename().string().rfind("optim_", 0) == 0
                || entry.path().filename().string().rfind("extra_state_", 0) == 0)
                fs::remove(entry.path());
        QCOMPARE(test::runTessera(test::A({ "inspect", step + "/actor" }), &out), 0);
        QVERIFY2(!out.contains(QStringLiteral("Training state")), qPrintable(out));
        QVERIFY(!inspectJson(test::A({ step + "/actor" })).contains("training_state"));
    }

    void extremesKeepTheLargestAndSmallest()
    {
        TrainingNorms norms;
        for (int i = 0; i < 30; ++i)
            norms.parameters.push_back({ i, "p" + std::to_string(i), { 2 }, 1.0, double(i), double(i), "" });
        norms.parameters.push_back({ 30, "unread", { 2 }, 1.0, std::nullopt, std::nullopt, "why" });
        const auto rows = extremeNorms(norms, 10);
        QCOMPARE(rows.size(), std::size_t(20));
        QCOMPARE(rows.front()->parameter, std::string("p29"));
        QCOMPARE(rows[9]->parameter, std::string("p20"));
        QCOMPARE(rows[10]->parameter, std::string("p9"));
        QCOMPARE(rows.back()->parameter, std::string("p0"));
        const std::string text = trainingNormsText(norms, false);
        QVERIFY(text.find("  - unread: why\n") != std::string::npos);
        QCOMPARE(extremeNorms(norms, 20).size(), std::size_t(30));
    }
};

QTEST_GUILESS_MAIN(TestTrainingView)
#include "tst_training_view.moc"
