// SPDX-License-Identifier: GPL-3.0-or-later
// The requests of core/ops: every flag of every command is held as data and written back as the command line reads
// it (fromArgs(toArgs(r)) == r), the spellings verl's scripts use are read alike, validate() refuses what the command
// line refuses with the same words, and the command line toArgs() writes is one the real CLI runs.

#include "testutil.h"

#include "ops/diff_request.h"
#include "ops/merge_request.h"
#include "ops/prepare_merge.h"
#include "ops/prepare_split.h"
#include "ops/split_request.h"
#include "ops/test_request.h"
#include "ops/vocabulary.h"
#include "merge/merge_plan.h"
#include "split/split_plan.h"

#include <algorithm>
#include <QTest>

#include <nlohmann/json.hpp>

using namespace tessera;
using namespace tessera::test;

namespace {

using Words = std::vector<std::string>;

/// What the tests need of a request type, whatever the command.
struct Command {
    std::string name;
    std::function<ArgParser()> parser;
    /// Parses `args`; on success `same` tells whether the request round-trips through its toArgs(), and `equal`
    /// whether it equals the request of `other`.
    std::function<Result<std::string>(const Words& args)> roundTrip;
    std::function<Result<bool>(const Words& a, const Words& b)> equal;
    Words base; ///< what every command line of it needs (diff's A)
};

template <typename Request>
Command command(std::string name, Words base)
{
    Command c;
    c.name = name;
    c.parser = [] { return Request::parser(); };
    c.roundTrip = [](const Words& args) -> Result<std::string> {
        auto r = Request::fromArgs(args);
        TESSERA_TRY(r);
        auto back = Request::fromArgs(r->toArgs());
        TESSERA_TRY(back);
        if (*back != *r)
            return makeError("toArgs() " + commandLineText("", r->toArgs()) + " reads back as another request");
        return commandLineText("", r->toArgs());
    };
    c.equal = [](const Words& a, const Words& b) -> Result<bool> {
        auto ra = Request::fromArgs(a);
        TESSERA_TRY(ra);
        auto rb = Request::fromArgs(b);
        TESSERA_TRY(rb);
        return *ra == *rb;
    };
    c.base = std::move(base);
    return c;
}

std::vector<Command> commands()
{
    return { command<MergeRequest>("merge", {}), command<TestRequest>("test", {}),
             command<DiffRequest>("diff", { "A" }), command<SplitRequest>("split", {}) };
}

std::string actor(const char* name) { return fixture(std::string(name) + "/global_step_10/actor"); }

} // namespace

class TestOpsRequests : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // A test opened in the Diff compares what the test compared: every flag that changes the answer is carried.
    void diffOfATestCarriesItsFlags()
    {
        auto test = TestRequest::fromArgs({ "--local_dir", "/ckpt", "--test_hf_dir", "/ref", "--hf_model_path", "/cfg",
                                            "--atol", "1e-6", "--rtol", "2e-3", "--lora", "fused", "--lora_alpha", "32",
                                            "--use_rslora", "--base_model", "/base", "--threads", "2",
                                            "--dtype", "bf16" });
        QVERIFY(test);
        const DiffRequest diff = diffRequestOfTest(*test);
        const auto words = diff.toArgs();
        // The test converts to --dtype and compares floating tensors of different widths at the narrower.
        const std::vector<std::string> expected { "/ckpt", "/ref", "--atol", "1e-6", "--rtol", "2e-3",
                                                  "--hf_model_path", "/cfg", "--threads", "2", "--lora", "fused",
                                                  "--lora_alpha", "32", "--use_rslora", "--base_model", "/base",
                                                  "--dtype", "bf16", "--round_to_narrower" };
        std::vector<std::string> sortedWords = words, sortedExpected = expected;
        std::sort(sortedWords.begin(), sortedWords.end());
        std::sort(sortedExpected.begin(), sortedExpected.end());
        QCOMPARE(sortedWords, sortedExpected);
        QVERIFY(diff.validate());
        QCOMPARE(*DiffRequest::fromArgs(words), diff);
    }

    // Each flag, set alone, changes the request and survives toArgs() → fromArgs().
    void everyFlagRoundTrips_data()
    {
        QTest::addColumn<int>("command");
        QTest::addColumn<QStringList>("flag");
        const auto all = commands();
        for (std::size_t c = 0; c < all.size(); ++c) {
            const ArgParser parser = all[c].parser();
            for (const auto& o : parser.options()) {
                const std::string flag = "--" + o.name;
                QStringList words { QString::fromStdString(flag) };
                if (o.takesValue)
                    words << QStringLiteral("some value");
                QTest::addRow("%s %s", all[c].name.c_str(), flag.c_str()) << int(c) << words;
            }
        }
    }
    void everyFlagRoundTrips()
    {
        QFETCH(int, command);
        QFETCH(QStringList, flag);
        const Command c = commands()[std::size_t(command)];
        Words args = c.base;
        for (const auto& w : flag)
            args.push_back(w.toStdString());
        const auto shown = c.roundTrip(args);
        QVERIFY_RESULT(shown);
        // --strict is the default: given alone it asks for nothing new; everything else is kept as data.
        const auto same = c.equal(args, c.base);
        QVERIFY_RESULT(same);
        QCOMPARE(*same, flag.first() == QLatin1String("--strict"));
    }

    // The spellings scripts use are one request.
    void spellingsAreOneRequest_data()
    {
        QTest::addColumn<QStringList>("a");
        QTest::addColumn<QStringList>("b");
        QTest::newRow("dashes") << A({ "--local-dir", "x" }) << A({ "--local_dir", "x" });
        QTest::newRow("=value") << A({ "--local_dir=x" }) << A({ "--local_dir", "x" });
        QTest::newRow("--strict False") << A({ "--strict", "False" }) << A({ "--no_strict" });
        QTest::newRow("--strict=0") << A({ "--strict=0" }) << A({ "--no-strict" });
        QTest::newRow("--strict true") << A({ "--strict", "true" }) << QStringList();
        QTest::newRow("--json=yes") << A({ "--json=yes" }) << A({ "--json" });
        QTest::newRow("--json False") << A({ "--json", "False" }) << QStringList();
        QTest::newRow("--tie-word-embedding") << A({ "--tie-word-embedding" })
                                              << A({ "--tie_word_embedding", "1" });
    }
    void spellingsAreOneRequest()
    {
        QFETCH(QStringList, a);
        QFETCH(QStringList, b);
        auto words = [](const QStringList& l) {
            Words w;
            for (const auto& s : l)
                w.push_back(s.toStdString());
            return w;
        };
        const auto same = commands()[0].equal(words(a), words(b));
        QVERIFY_RESULT(same);
        QVERIFY(*same);
    }

    void diffPositionalsRoundTrip()
    {
        const std::vector<Words> lines { { "a dir", "b" }, { "a", "--lora_update" }, { "a", "b", "--json" } };
        for (const Words& args : lines) {
            const auto shown = commands()[2].roundTrip(args);
            QVERIFY_RESULT(shown);
        }
    }

    // validate() says what the command line says, with its words, before anything is read.
    void validateRefusesAsTheCommandLine_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("no local_dir") << QStringList() << QStringLiteral("--local_dir is required");
        QTest::newRow("backend") << A({ "--local_dir", "x", "--backend", "deepspeed" })
                                 << QStringLiteral("--backend must be auto, fsdp, dcp or megatron (got 'deepspeed')");
        QTest::newRow("dtype") << A({ "--local_dir", "x", "--dtype", "fp8" })
                               << QStringLiteral("--dtype must be bf16, fp16 or fp32 (got 'fp8')");
        QTest::newRow("threads") << A({ "--local_dir", "x", "--threads", "2000" })
                                 << QStringLiteral("--threads must be a whole number from 1 to 1024 (got '2000')");
        QTest::newRow("regex") << A({ "--local_dir", "x", "--ignore_missing_params", "(" })
                               << QStringLiteral("--ignore_missing_params");
        QTest::newRow("lora_alpha above the bound") << A({ "--local_dir", "x", "--lora_alpha", "2e9" })
                                                    << QStringLiteral("--lora_alpha must be a number above 0 and at most 1e+09");
        QTest::newRow("lora mode") << A({ "--local_dir", "x", "--lora", "half" })
                                   << QStringLiteral("--lora must be fused, adapter or both (got 'half')");
        QTest::newRow("format") << A({ "--local_dir", "x", "--format", "onnx" })
                                << QStringLiteral("--format must be safetensors or gguf (got 'onnx')");
        QTest::newRow("outtype") << A({ "--local_dir", "x", "--format", "gguf", "--outtype", "q4" })
                                 << QStringLiteral("--outtype must be f32, f16, bf16, q8_0, q6_k, q5_k_m, q5_k_s, q5_1, q5_0, q4_k_m, q4_k_s, q4_1, q4_0, "
                                                   "q3_k_m or q2_k (got 'q4')");
        QTest::newRow("part") << A({ "--local_dir", "x", "--part", "3/2" })
                              << QStringLiteral("--part: part 3 of 2 does not exist");
        QTest::newRow("shard size") << A({ "--local_dir", "x", "--max_shard_size", "0" })
                                    << QStringLiteral("--max_shard_size: must be more than 0");
        QTest::newRow("empty target") << A({ "--local_dir", "x", "--target_dir", "" })
                                      << QStringLiteral("--target_dir: needs a folder name (it is empty)");
    }
    void validateRefusesAsTheCommandLine()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        Words words;
        for (const auto& a : args)
            words.push_back(a.toStdString());
        auto request = MergeRequest::fromArgs(words);
        QVERIFY_RESULT(request);
        const Status valid = request->validate();
        QVERIFY(!valid);
        QVERIFY2(QString::fromStdString(valid.error().message).contains(message), valid.error().message.c_str());
        // The command line says the same, as a usage error.
        QString out, err;
        QStringList cli { QStringLiteral("merge") };
        cli << args;
        QCOMPARE(runTessera(cli, &out, &err), 2);
        QVERIFY2(err.contains(message), qPrintable(err));
    }

    void backendTableAgreesWithLayouts()
    {
        QCOMPARE(backendForLayout("verl-fsdp"), std::string("fsdp"));
        QCOMPARE(backendForLayout("torch-save"), std::string("fsdp"));
        QCOMPARE(backendForLayout("dcp"), std::string("dcp"));
        for (const char* megatron : { "megatron-legacy", "megatron-lm", "megatron-dist" }) {
            QCOMPARE(backendForLayout(megatron), std::string("megatron"));
            QVERIFY(backendReads("megatron", megatron));
        }
        QCOMPARE(backendForLayout("hf-safetensors"), std::string("auto"));
        QVERIFY(!backendReads("fsdp", "hf-safetensors"));
        for (const auto& b : backends())
            QVERIFY(backendReads("auto", "hf-safetensors") && isBackendName(b.name));
    }

    // The command line toArgs() writes runs, and plans what prepareMerge() planned.
    void toArgsRunsOnTheRealCli_data()
    {
        QTest::addColumn<QString>("checkpoint");
        QTest::newRow("FSDP2") << QString::fromStdString(actor("fsdp2_llama_w4"));
        QTest::newRow("Megatron") << QString::fromStdString(actor("megatron_legacy_qwen2_tp2_pp2"));
        QTest::newRow("LoRA") << QString::fromStdString(actor("lora_llama_w2_fp32"));
    }
    void toArgsRunsOnTheRealCli()
    {
        QFETCH(QString, checkpoint);
        MergeRequest request;
        request.localDir = checkpoint.toStdString();
        request.targetDir = makeTempDir() + "/my out";
        request.dtype = "bf16";
        request.maxShardSize = "100KB";
        request.threads = "2";
        request.verifyReplicas = true;
        QVERIFY_RESULT(request.validate());
        const PreparedMerge prepared = prepareMerge(request);
        QVERIFY2(!prepared.refusal, prepared.refusal ? prepared.refusal->error.message.c_str() : "");
        QVERIFY(prepared.runnable());
        QStringList args { QStringLiteral("merge") };
        for (const auto& a : request.toArgs())
            args << QString::fromStdString(a);
        args << QStringLiteral("--dry-run") << QStringLiteral("--json");
        QString out, err;
        QCOMPARE(runTessera(args, &out, &err), 0);
        const auto cli = nlohmann::json::parse(out.toStdString());
        const auto outputs = prepared.outputs();
        const auto& o = outputs.front();
        nlohmann::json mine = mergePlanToJson(*o.plan, *o.info);
        if (prepared.model.loraPlans) {
            if (!prepared.model.loraPlans->fused)
                mine = nlohmann::json::object();
            if (prepared.model.loraPlans->adapter)
                mine["lora_adapter"] = mergePlanToJson(*prepared.model.loraPlans->adapter, prepared.model.lora->adapter);
            mine["lora_notes"] = prepared.model.loraPlans->notes;
        }
        QCOMPARE(cli.dump(), mine.dump());
    }

    void splitToArgsRunsOnTheRealCli()
    {
        SplitRequest request;
        request.hfDir = fixture("fsdp2_llama_w4/reference");
        request.targetDir = makeTempDir() + "/split";
        request.format = "megatron";
        request.tp = "2";
        QVERIFY_RESULT(request.validate());
        const PreparedSplit prepared = prepareSplit(request);
        QVERIFY2(prepared.runnable(), prepared.refusal ? prepared.refusal->error.message.c_str() : "target");
        QStringList args { QStringLiteral("split") };
        for (const auto& a : request.toArgs())
            args << QString::fromStdString(a);
        args << QStringLiteral("--dry-run") << QStringLiteral("--json");
        QString out, err;
        QCOMPARE(runTessera(args, &out, &err), 0);
        QCOMPARE(nlohmann::json::parse(out.toStdString()).dump(),
                 splitPlanToJson(*prepared.plan, prepared.model.primary()).dump());
    }
};

QTEST_GUILESS_MAIN(TestOpsRequests)
#include "tst_ops_requests.moc"
