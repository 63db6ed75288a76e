// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera drift`: the real FSDP2 run against torch's float64 figures, nulls where a change means nothing, damaged
// and mixed-layout steps, --steps, and the command line's exit codes and messages.

#include "testutil.h"

#include "compare/drift.h"
#include "compare/drift_export.h"
#include "formats/run_steps.h"
#include "formats/safetensors_writer.h"
#include "ops/drift_request.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

const char* const kRun = "run_llama_w2_fp32_4steps";

/// Writes `values` (float32) as the tensors of one step's model.safetensors in `dir`.
void writeStep(const std::string& dir, const std::vector<std::pair<std::string, std::vector<float>>>& tensors,
               DType dtype = DType::Float32)
{
    fs::create_directories(dir);
    std::vector<SafetensorsEntry> entries;
    for (const auto& [name, values] : tensors)
        entries.push_back({ name, dtype, { static_cast<std::int64_t>(values.size()) } });
    const Status written = writeSafetensorsFile(dir + "/model.safetensors", entries, { { "format", "pt" } },
                                                [&](std::size_t i, std::uint8_t* dst, std::uint64_t) {
                                                    const auto& values = tensors[i].second;
                                                    for (std::size_t k = 0; k < values.size(); ++k) {
                                                        if (dtype == DType::BFloat16) {
                                                            const std::uint16_t b = floatToBf16(values[k]);
                                                            std::memcpy(dst + 2 * k, &b, 2);
                                                        } else {
                                                            std::memcpy(dst + 4 * k, &values[k], 4);
                                                        }
                                                    }
                                                    return Status::success();
                                                });
    QVERIFY2(written, written ? "" : written.error().message.c_str());
}

DriftReport drift(const std::string& root, std::vector<long long> steps = {})
{
    DriftOptions options;
    options.root = root;
    options.steps = std::move(steps);
    auto report = driftRun(options);
    if (!report)
        qFatal("%s", report.error().message.c_str());
    return *report;
}

} // namespace

class TestDrift : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void matchesTorchOnTheRealRun();
    void jsonHasTheDocumentedShape();
    void nullsSayWhy();
    void thresholdOfTheKernelIsFloat64();
    void stepsChooseThePrevious();
    void mixedLayoutsGiveTheSameNumbers();
    void damagedStepIsReportedAndTheOthersRead();
    void stepFolders();
    void commandLine();
    void requestRoundTrip();
};

void TestDrift::matchesTorchOnTheRealRun()
{
    const auto report = drift(fixture(kRun));
    const auto expected = nlohmann::json::parse(readFile(fixture(kRun) + "/expected_drift.json"));
    QCOMPARE(report.steps.size(), expected["steps"].size());
    for (std::size_t i = 0; i < report.steps.size(); ++i)
        QCOMPARE(report.steps[i].step, expected["steps"][i].get<long long>());
    QCOMPARE(report.records.size(), expected["records"].size());
    for (const auto& e : expected["records"]) {
        const std::string name = e["name"];
        const DriftRecord* r = report.find(name, e["step"].get<long long>());
        QVERIFY2(r, name.c_str());
        QCOMPARE(r->nan, e["nan"].get<std::uint64_t>());
        QCOMPARE(r->inf, e["inf"].get<std::uint64_t>());
        for (const auto& [key, value] : { std::pair { "relative_change", r->relativeChange },
                                          std::pair { "max_abs_change", r->maxAbsChange } }) {
            if (!e.contains(key))
                continue;
            QCOMPARE(value.has_value(), !e[key].is_null());
            if (value)
                QVERIFY2(std::fabs(*value - e[key].get<double>()) <= 1e-4 * std::fabs(e[key].get<double>()),
                         (name + " " + key).c_str());
        }
    }
    // The planted faults: layer 1's down_proj scaled by 1.5 at step 30, NaN and Inf at step 40.
    QVERIFY(std::fabs(*report.find("model.layers.1.mlp.down_proj.weight", 30)->relativeChange - 0.5) < 1e-3);
    QCOMPARE(report.find("model.layers.0.self_attn.q_proj.weight", 40)->nan, std::uint64_t(3));
    QCOMPARE(report.find("lm_head.weight", 40)->inf, std::uint64_t(1));
    QCOMPARE(report.nonFiniteRecords(), std::uint64_t(2));
    QVERIFY(!report.clean());
    QVERIFY(report.damaged.empty());
}

void TestDrift::jsonHasTheDocumentedShape()
{
    const auto j = driftReportToJson(drift(fixture(kRun)));
    QVERIFY(j["steps"] == nlohmann::json({ 10, 20, 30, 40 }));
    for (const char* key : { "name", "step", "relative_change", "max_abs_change", "norm", "nan", "inf" })
        QVERIFY2(j["records"][0].contains(key), key);
    QVERIFY(j["records"][0]["relative_change"].is_null());
    QVERIFY(j["records"][0]["why"] == "first step");
    QVERIFY(j["damaged"].is_array());
    QVERIFY(j["clean"] == false);
    const std::string csv = driftReportToCsv(drift(fixture(kRun)));
    QVERIFY(csv.rfind("name,step,previous_step,dtype,shape,relative_change,max_abs_change,norm,nan,inf,why\r\n", 0) == 0);
    QCOMPARE(std::count(csv.begin(), csv.end(), '\n'), std::ptrdiff_t(121));
}

void TestDrift::nullsSayWhy()
{
    const std::string run = makeTempDir() + "/run";
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    writeStep(run + "/global_step_1/actor", { { "w", { 3, 4 } }, { "bias", { 0, 0 } }, { "bad", { 1, 1 } } });
    writeStep(run + "/global_step_2/actor", { { "w", { 3, 4.5f } }, { "bias", { 0.5f, 0 } }, { "bad", { inf, 1 } } });
    writeStep(run + "/global_step_3/actor", { { "w", { 0, 0 } }, { "bias", { 0.5f, 0 } }, { "bad", { 1, nan } } });
    writeStep(run + "/global_step_4/actor", { { "w", { 1, 0 } }, { "bias", { 0.5f, 0 } }, { "bad", { 1, 2 } } });
    const auto report = drift(run);
    QCOMPARE(report.find("w", 1)->why, std::string("first step"));
    QCOMPARE(*report.find("w", 1)->norm, 5.0);
    QCOMPARE(*report.find("w", 2)->relativeChange, 0.5 / 5.0);
    QCOMPARE(*report.find("w", 2)->maxAbsChange, 0.5);
    QCOMPARE(*report.find("w", 2)->previousStep, 2 - 1LL);
    QVERIFY(!report.find("bias", 2)->relativeChange);
    QVERIFY(!report.find("bias", 2)->maxAbsChange);
    QCOMPARE(report.find("bias", 2)->why, std::string("previous norm is 0"));
    QCOMPARE(*report.find("bias", 3)->relativeChange, 0.0);
    QCOMPARE(report.find("bad", 2)->why, std::string("NaN/Inf in this step"));
    QVERIFY(!report.find("bad", 2)->norm);
    QCOMPARE(report.find("bad", 3)->nan, std::uint64_t(1));
    QCOMPARE(report.find("bad", 4)->why, std::string("NaN/Inf in the previous step"));
    QCOMPARE(*report.find("bad", 4)->norm, std::sqrt(5.0));
    QCOMPARE(report.find("w", 4)->why, std::string("previous norm is 0"));
    // Records come step by step, each step's tensors in the order the first step lists them.
    QCOMPARE(report.records.size(), std::size_t(12));
    for (std::size_t i = 0; i < report.records.size(); ++i) {
        QCOMPARE(report.records[i].name, report.tensors[i % 3]);
        QCOMPARE(report.records[i].step, static_cast<long long>(i / 3 + 1));
    }
}

void TestDrift::thresholdOfTheKernelIsFloat64()
{
    // A change of one unit in the last place of a large value: float32 arithmetic would lose it in the sum.
    const std::string run = makeTempDir() + "/run";
    std::vector<float> before(100001, 1.0f), after = before;
    after[77777] = std::nextafter(1.0f, 2.0f);
    writeStep(run + "/iter_0000001", { { "x", before } });
    writeStep(run + "/iter_0000002", { { "x", after } });
    const auto report = drift(run);
    const double ulp = std::nextafter(1.0f, 2.0f) - 1.0;
    QCOMPARE(*report.find("x", 2)->maxAbsChange, ulp);
    QCOMPARE(*report.find("x", 2)->relativeChange, ulp / std::sqrt(100001.0));
    // bfloat16 steps are read as they are stored.
    const std::string bf = makeTempDir() + "/run";
    writeStep(bf + "/step-10", { { "x", { 1, 2 } } }, DType::BFloat16);
    writeStep(bf + "/step-20", { { "x", { 1, 2.5f } } }, DType::BFloat16);
    QCOMPARE(*drift(bf).find("x", 20)->relativeChange, 0.5 / std::sqrt(5.0));
}

void TestDrift::stepsChooseThePrevious()
{
    const auto all = drift(fixture(kRun));
    const auto some = drift(fixture(kRun), { 40, 20 });
    QCOMPARE(some.steps.size(), std::size_t(2));
    QCOMPARE(some.steps[0].step, 20LL);
    const DriftRecord* r = some.find("model.layers.2.mlp.up_proj.weight", 40);
    QCOMPARE(*r->previousStep, 20LL);
    QVERIFY(*r->relativeChange > *all.find("model.layers.2.mlp.up_proj.weight", 40)->relativeChange);
    QCOMPARE(some.find("model.layers.2.mlp.up_proj.weight", 20)->why, std::string("first step"));
    DriftOptions options;
    options.root = fixture(kRun);
    options.steps = { 15 };
    const auto refused = driftRun(options);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("step 15 is not saved") != std::string::npos
                 && refused.error().message.find("10, 20, 30, 40") != std::string::npos,
             refused.error().message.c_str());
}

void TestDrift::mixedLayoutsGiveTheSameNumbers()
{
    // Step 20 merged to a Hugging Face folder, step 30 resharded to 3 ranks, step 40 to a DCP folder: each read with
    // its own layout, they give the numbers of the rank files they were made from.
    const std::string run = makeTempDir() + "/run";
    fs::create_directories(run);
    fs::copy(fixture(kRun) + "/global_step_10", run + "/global_step_10", fs::copy_options::recursive);
    QCOMPARE(runTessera(A({ "merge", "--backend", "fsdp", "--local_dir", fixture(kRun) + "/global_step_20/actor",
                            "--target_dir", run + "/global_step_20/actor", "--quiet" })),
             0);
    QCOMPARE(runTessera(A({ "split", "--local_dir", fixture(kRun) + "/global_step_30/actor", "--format", "fsdp",
                            "--world_size", "3", "--target_dir", run + "/global_step_30/actor", "--quiet" })),
             0);
    QCOMPARE(runTessera(A({ "split", "--local_dir", fixture(kRun) + "/global_step_40/actor", "--format", "dcp",
                            "--world_size", "2", "--target_dir", run + "/step-40", "--quiet" })),
             0);
    const auto mixed = drift(run), original = drift(fixture(kRun));
    QCOMPARE(mixed.records.size(), original.records.size());
    for (std::size_t i = 0; i < mixed.records.size(); ++i) {
        QCOMPARE(mixed.records[i].name, original.records[i].name);
        QCOMPARE(mixed.records[i].relativeChange, original.records[i].relativeChange);
        QCOMPARE(mixed.records[i].norm, original.records[i].norm);
        QCOMPARE(mixed.records[i].nan, original.records[i].nan);
        QCOMPARE(mixed.records[i].inf, original.records[i].inf);
    }
}

void TestDrift::damagedStepIsReportedAndTheOthersRead()
{
    const std::string run = copyFixtureFolder(kRun);
    fs::resize_file(run + "/global_step_30/actor/model_world_size_2_rank_1.pt", 1000);
    fs::remove_all(run + "/global_step_20/actor");
    fs::create_directories(run + "/global_step_20/critic");
    const auto report = drift(run);
    QCOMPARE(report.steps.size(), std::size_t(4));
    QCOMPARE(report.damagedSteps(), std::size_t(2));
    QCOMPARE(report.damaged.front().step, 20LL);
    QVERIFY(!report.find("model.embed_tokens.weight", 20));
    // Step 40 is compared with the last step whose tensor could be read.
    const DriftRecord* r = report.find("model.layers.2.mlp.up_proj.weight", 40);
    QVERIFY(r);
    QCOMPARE(*r->previousStep, 10LL);
    QVERIFY(!report.clean());
    QString out;
    QCOMPARE(runTessera(A({ "drift", run, "--quiet" }), &out), 1);
    QVERIFY2(out.contains(QStringLiteral("Damaged steps:")) && out.contains(QStringLiteral("step 30:")), qPrintable(out));
}

void TestDrift::stepFolders()
{
    const std::string run = makeTempDir() + "/run";
    writeStep(run + "/checkpoint/step-100", { { "x", { 1 } } });
    writeStep(run + "/checkpoint/step-20", { { "x", { 2 } } });
    auto steps = findRunSteps(run);
    QVERIFY(steps);
    QCOMPARE(steps->size(), std::size_t(2));
    QCOMPARE(steps->front().step, 20LL); // by number, not by name
    // One step's folder, or its role folder, is a run of one step.
    auto one = findRunSteps(fixture(kRun) + "/global_step_20/actor");
    QVERIFY(one);
    QCOMPARE(one->size(), std::size_t(1));
    QCOMPARE(one->front().step, 20LL);
    auto critic = findRunSteps(fixture(kRun), "critic");
    QVERIFY(critic);
    QVERIFY(critic->front().path.find("global_step_10/critic") != std::string::npos);
    const auto none = findRunSteps(makeTempDir());
    QVERIFY(!none);
    QVERIFY(none.error().message.find("global_step_N") != std::string::npos);
    writeStep(run + "/checkpoint/global_step_20", { { "x", { 2 } } });
    QVERIFY(!findRunSteps(run + "/checkpoint")); // step 20 twice
}

void TestDrift::commandLine()
{
    QString out, err;
    QCOMPARE(runTessera(A({ "drift", fixture(kRun), "--quiet" }), &out, &err), 1);
    const int nonFinite = out.indexOf(QStringLiteral("NaN/Inf found:"));
    const int movers = out.indexOf(QStringLiteral("largest relative changes"));
    QVERIFY2(nonFinite > 0 && movers > nonFinite, qPrintable(out));
    QVERIFY(out.contains(QStringLiteral("3 NaN, 0 Inf of 4096  model.layers.0.self_attn.q_proj.weight")));
    QVERIFY(out.contains(QStringLiteral("2 tensors have no relative change: NaN/Inf in this step")));
    QCOMPARE(runTessera(A({ "drift", fixture(kRun), "--steps", "10,20,30" }), &out), 0);
    QVERIFY(out.contains(QStringLiteral("OK: no NaN or Inf in 3 steps")));
    QCOMPARE(runTessera(A({ "drift", fixture(kRun), "--json" }), &out), 1);
    QCOMPARE(nlohmann::json::parse(out.toStdString())["records"].size(), std::size_t(120));
    QCOMPARE(runTessera(A({ "drift", fixture(kRun), "--role", "ref" }), &out, &err), 2);
    QVERIFY2(err.contains(QStringLiteral("--role is actor or critic")), qPrintable(err));
    QCOMPARE(runTessera(A({ "drift", fixture(kRun), "--steps", "10,,20" }), &out, &err), 2);
    QCOMPARE(runTessera(A({ "drift", fixture(kRun), "--steps", "15" }), &out, &err), 1);
    QVERIFY2(err.contains(QStringLiteral("step 15 is not saved")), qPrintable(err));
    // inspect of a run root shows its newest step and points to drift for the others.
    QCOMPARE(runTessera(A({ "inspect", fixture(kRun) }), &out), 0);
    QVERIFY2(out.contains(QStringLiteral("Run         4 saved steps (10, 20, 30, 40): ") + test::programName()
                          + QStringLiteral(" drift")),
             qPrintable(out));
    QCOMPARE(runTessera(A({ "inspect", fixture(kRun), "--json" }), &out), 0);
    QVERIFY(nlohmann::json::parse(out.toStdString())["run_steps"] == nlohmann::json({ 10, 20, 30, 40 }));
    QCOMPARE(runTessera(A({ "drift", "--help" }), &out), 0);
    QVERIFY(out.contains(QStringLiteral("--steps")));
}

void TestDrift::requestRoundTrip()
{
    auto r = DriftRequest::fromArgs({ "RUN", "--steps", "1,2", "--role", "critic", "--json", "--threads", "2" });
    QVERIFY(r);
    QCOMPARE(DriftRequest::fromArgs(r->toArgs()).value(), *r);
    auto options = driftSettings(*r);
    QVERIFY(options);
    QCOMPARE(options->steps, (std::vector<long long> { 1, 2 }));
    QCOMPARE(options->role, std::string("critic"));
    QCOMPARE(options->threads, 2);
}

QTEST_GUILESS_MAIN(TestDrift)
#include "tst_drift.moc"
