// SPDX-License-Identifier: GPL-3.0-or-later
// tessera split carries a verl FSDP run's training state to another world size: the optimizer files resharded
// like their parameters (read back here: every moment equal to the source's, bit for bit, the state dict's
// structure and hyper-parameters the same), each new rank's extra state an old rank's file under the new name,
// data.pt beside the step and the tracker; and refuses, before writing anything, what it cannot carry.
// (That real PyTorch resumes the result exactly is checked with ../shared/fixtures/gen/resume/check_resume.py.)

#include "testutil.h"

#include "formats/layouts.h"
#include "formats/scan.h"
#include "formats/training_state.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "merge/source_files.h"
#include "pickle/pickle_writer.h"
#include "pickle/torch_save.h"
#include "pickle/torch_save_writer.h"

#include <QTest>

#include <algorithm>
#include <filesystem>

using namespace tessera;
using test::A;

namespace fs = std::filesystem;

namespace {

const char* kRun = "resume_llama_w2_k2/run";

/// A writable copy of the resume fixture's run; returns its actor folder.
std::string copyRun()
{
    return test::copyFixtureFolder(kRun) + "/global_step_2/actor";
}

/// The bytes of tensor `index` of `info`, assembled whole.
std::string wholeTensor(const CheckpointInfo& info, std::size_t index)
{
    auto planned = planTensorCopy(info.tensors[index], index, std::nullopt);
    if (!planned)
        return "<" + planned.error().message + ">";
    std::string bytes(planned->bytes, '\0');
    SourceFiles files;
    auto done = materializeTensor(files, info.tensors[index], *planned, reinterpret_cast<std::uint8_t*>(bytes.data()));
    return done ? bytes : "<" + done.error().message + ">";
}

QString firstProblem(const std::vector<Problem>& problems)
{
    return problems.empty() ? QString() : QString::fromStdString(problems.front().text());
}

int runSplit(const QStringList& args, QString* err = nullptr)
{
    QString out, error;
    const int code = test::runTessera(QStringList { QStringLiteral("split") } + args, &out, &error);
    if (err)
        *err = out + error;
    return code;
}

/// The optimizer state of `actor` (world `world`), read.
OptimizerFiles optimizerOf(const std::string& actor, int world)
{
    auto files = scanVerlFsdpOptimizer(actor, world, 1, silentProgress());
    return files ? std::move(*files) : OptimizerFiles {};
}

/// A torch.save file holding {"lr_scheduler": {"last_epoch": epoch}, "rng": {}}.
void writeExtraState(const std::string& path, std::int64_t epoch)
{
    Pickler p;
    p.op('}');
    p.op('(');
    p.str("lr_scheduler");
    p.op('}');
    p.op('(');
    p.str("last_epoch");
    p.integer(epoch);
    p.op('u');
    p.str("rng");
    p.op('}');
    p.op('u');
    fs::remove(path);
    QVERIFY_RESULT(writeTorchSavePickle(path, fs::path(path).stem().string(), "\x80\x02" + p.out + "."));
}

std::string madeDcp() { return std::string(TESSERA_TEST_DATA_DIR) + "/dcp_llama_optim_w2/checkpoint/step-3"; }
std::string madeDcpConfig() { return std::string(TESSERA_TEST_DATA_DIR) + "/dcp_llama_optim_w2/hf_config"; }

/// The bytes of a DCP non-tensor entry.
std::string entryBytes(const DcpBytesEntry& e)
{
    const std::string file = test::readFile(e.file);
    return e.offset + e.length <= file.size() ? file.substr(e.offset, e.length) : "<past the end>";
}

} // namespace

class TestSplitTraining : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void readsTheFixturesTrainingState()
    {
        auto model = scanCheckpoint(test::fixture(std::string(kRun) + "/global_step_2/actor"));
        QVERIFY_RESULT(model);
        auto state = readTrainingState(*model, 1, silentProgress());
        QVERIFY_RESULT(state);
        QVERIFY2(state->problems.empty(), qPrintable(firstProblem(state->problems)));
        QVERIFY(state->hasOptimizer());
        QCOMPARE(state->parameters.size(), model->tensors.size());
        QCOMPARE(state->optimizerParameters, static_cast<std::int64_t>(model->tensors.size()));
        QCOMPARE(state->parameters.front().parameter, model->tensors.front().name);
        QVERIFY(state->parameters.front().step.has_value());
        QCOMPARE(*state->parameters.front().step, 2.0);
        QCOMPARE(state->extraStateFiles.size(), std::size_t(2));
        QVERIFY(state->rng);
        QVERIFY(state->lrScheduler);
        QVERIFY(!state->dataFile.empty());
        QVERIFY(state->optimizerKind.find("Adam") != std::string::npos);
    }

    void carriesTheOptimizerToThreeRanksBitForBit()
    {
        const std::string source = copyRun();
        const std::string run = test::makeTempDir() + "/run";
        const std::string target = run + "/global_step_2/actor";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", source, "--format", "fsdp", "--world_size", "3", "--target_dir", target,
                              "--quiet" }), &err), 0);
        const OptimizerFiles before = optimizerOf(source, 2);
        const OptimizerFiles after = optimizerOf(target, 3);
        QVERIFY(after.skeleton);
        QVERIFY2(after.info.problems.empty(), qPrintable(firstProblem(after.info.problems)));
        QVERIFY(sameValue(before.skeleton, after.skeleton)); // the same keys, param_groups and hyper-parameters
        QCOMPARE(after.info.tensors.size(), before.info.tensors.size());
        QCOMPARE(after.info.parallel.meshes.size(), std::size_t(1));
        QVERIFY(after.info.parallel.meshes.front().shape == Shape { 3 });
        for (std::size_t i = 0; i < before.info.tensors.size(); ++i) {
            QCOMPARE(after.info.tensors[i].name, before.info.tensors[i].name);
            QCOMPARE(after.info.tensors[i].placement.empty(), before.info.tensors[i].placement.empty());
            QVERIFY2(wholeTensor(after.info, i) == wholeTensor(before.info, i),
                     qPrintable(QString::fromStdString(before.info.tensors[i].name)));
        }
        // Extra state: new rank r is old rank r mod 2's, under its own archive name.
        for (int r = 0; r < 3; ++r) {
            const std::string name = "extra_state_world_size_3_rank_" + std::to_string(r);
            auto ours = TorchSaveFile::open(target + "/" + name + ".pt");
            auto theirs = TorchSaveFile::open(source + "/extra_state_world_size_2_rank_" + std::to_string(r % 2) + ".pt");
            QVERIFY_RESULT(ours);
            QVERIFY_RESULT(theirs);
            QCOMPARE(ours->archive().prefix(), name);
            QVERIFY(sameValue(ours->root(), theirs->root()));
        }
        // The dataloader state beside the step, and the tracker at the run root.
        QCOMPARE(test::readFile(run + "/global_step_2/data.pt"), test::readFile(source + "/../data.pt"));
        QCOMPARE(test::readFile(run + "/latest_checkpointed_iteration.txt"), std::string("2"));
    }

    void modelOnlyWritesTheModelAndSaysHowToResume()
    {
        const std::string target = test::makeTempDir() + "/run/global_step_2/actor";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", copyRun(), "--world_size", "3", "--target_dir", target, "--model_only" }),
                          &err), 0);
        QVERIFY2(err.contains(QStringLiteral("checkpoint.load_contents=[model]")), qPrintable(err));
        QVERIFY(fs::exists(target + "/model_world_size_3_rank_2.pt"));
        QVERIFY(!fs::exists(target + "/optim_world_size_3_rank_0.pt"));
        QVERIFY(!fs::exists(target + "/extra_state_world_size_3_rank_0.pt"));
        QVERIFY(!fs::exists(target + "/../data.pt"));
    }

    void refusesAnOptimizerMissingARank()
    {
        const std::string source = copyRun();
        fs::remove(source + "/optim_world_size_2_rank_1.pt");
        const std::string target = test::makeTempDir() + "/out";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", source, "--world_size", "3", "--target_dir", target }), &err), 1);
        QVERIFY2(err.contains(QStringLiteral("rank 1 of 2 is missing")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("--model_only")), qPrintable(err));
        QVERIFY(!fs::exists(target));
    }

    void refusesAnOptimizerOfAnotherModel()
    {
        // The optimizer files of another model (other parameters) beside these model files.
        const std::string source = test::copyFixtureFolder("fsdp2_qwen2_w2_fp32");
        auto model = scanCheckpoint(source);
        QVERIFY_RESULT(model);
        const std::string actor = model->root;
        for (const char* f : { "optim_world_size_2_rank_0.pt", "optim_world_size_2_rank_1.pt" })
            fs::copy_file(test::fixture(std::string(kRun) + "/global_step_2/actor/") + f, actor + "/" + f);
        const std::string target = test::makeTempDir() + "/out";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", actor, "--world_size", "3", "--target_dir", target }), &err), 1);
        QVERIFY2(err.contains(QStringLiteral("not this model's")) || err.contains(QStringLiteral("has shape")),
                 qPrintable(err));
        QVERIFY(!fs::exists(target));
    }

    void refusesSchedulersThatDisagree()
    {
        const std::string source = copyRun();
        writeExtraState(source + "/extra_state_world_size_2_rank_0.pt", 2);
        writeExtraState(source + "/extra_state_world_size_2_rank_1.pt", 3);
        const std::string target = test::makeTempDir() + "/out";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", source, "--world_size", "3", "--target_dir", target }), &err), 1);
        QVERIFY2(err.contains(QStringLiteral("differs from rank 0's")), qPrintable(err));
        QVERIFY(!fs::exists(target));
    }

    void otherTargetsAndPartsRefuseNamingWhatWouldBeDropped()
    {
        const std::string source = copyRun();
        const std::string target = test::makeTempDir() + "/out";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", source, "--format", "dcp", "--world_size", "2", "--target_dir", target }),
                          &err), 1);
        QVERIFY2(err.contains(QStringLiteral("optim_world_size_2_rank_R.pt")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("--format dcp")), qPrintable(err));
        QCOMPARE(runSplit(A({ "--local_dir", source, "--world_size", "2", "--target_dir", target, "--part", "1/2" }),
                          &err), 1);
        QVERIFY2(err.contains(QStringLiteral("--part")), qPrintable(err));
        QVERIFY(!fs::exists(target));
        QCOMPARE(runSplit(A({ "--local_dir", source, "--format", "dcp", "--world_size", "2", "--target_dir", target,
                              "--model_only", "--quiet" }), &err), 0);
        QVERIFY(fs::exists(target + "/.metadata"));
    }

    void dataStaysBehindOutsideARunAndTheDryRunSaysSo()
    {
        const std::string target = test::makeTempDir() + "/plain";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", copyRun(), "--world_size", "4", "--target_dir", target, "--dry-run" }), &err),
                 0);
        QVERIFY2(err.contains(QStringLiteral("optim_world_size_4_rank_R.pt  4 files")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("3←1")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("not carried")), qPrintable(err));
        QVERIFY(!fs::exists(target));
        QCOMPARE(runSplit(A({ "--local_dir", copyRun(), "--world_size", "4", "--target_dir", target, "--quiet" }), &err),
                 0);
        QVERIFY(fs::exists(target + "/optim_world_size_4_rank_3.pt"));
        QVERIFY(!fs::exists(fs::path(target).parent_path() / "data.pt"));
    }

    // torchtitan's DCP holds the optimizer's tensors and its scheduler, train state and dataloader beside the model:
    // a DCP split carries them (the dataloader only at the same degree, as torchtitan reads it).
    void dcpCarriesTorchtitansTrainingState()
    {
        for (int world : { 2, 3 }) {
            const std::string target = test::makeTempDir() + "/dcp";
            QString err;
            QCOMPARE(runSplit(A({ "--local_dir", madeDcp(), "--hf_model_path", madeDcpConfig(), "--format", "dcp",
                                  "--world_size", std::to_string(world), "--target_dir", target, "--quiet" }), &err), 0);
            auto before = scanDcpTrainingEntries(madeDcp(), 1, silentProgress());
            auto after = scanDcpTrainingEntries(target, 1, silentProgress());
            QVERIFY_RESULT(before);
            QVERIFY_RESULT(after);
            QVERIFY2(after->tensors.problems.empty(), qPrintable(firstProblem(after->tensors.problems)));
            QCOMPARE(after->tensors.tensors.size(), before->tensors.tensors.size());
            for (std::size_t i = 0; i < before->tensors.tensors.size(); ++i) {
                const std::string& name = before->tensors.tensors[i].name;
                const TensorInfo* ours = after->tensors.find(name);
                QVERIFY2(ours, name.c_str());
                QVERIFY2(wholeTensor(after->tensors, static_cast<std::size_t>(ours - after->tensors.tensors.data()))
                             == wholeTensor(before->tensors, i),
                         name.c_str());
                QVERIFY(sameValue(after->plannerPaths.at(name), before->plannerPaths.at(name)));
            }
            std::size_t dataloader = 0;
            for (const auto& e : before->bytes) {
                const bool perRank = e.fqn.rfind("dataloader.", 0) == 0;
                dataloader += perRank ? 1 : 0;
                auto it = std::find_if(after->bytes.begin(), after->bytes.end(),
                                       [&](const DcpBytesEntry& b) { return b.fqn == e.fqn; });
                QCOMPARE(it != after->bytes.end(), !perRank || world == 2);
                if (it != after->bytes.end())
                    QVERIFY2(entryBytes(*it) == entryBytes(e), e.fqn.c_str());
            }
            QVERIFY(dataloader > 0);
            // The model is the same model.
            auto model = scanCheckpoint(target);
            QVERIFY_RESULT(model);
            QCOMPARE(model->tensors.size(), std::size_t(21));
            QCOMPARE(model->parallel.worldSize, world);
        }
    }

    void aRunSavedWithoutExtraStateSaysHowToResume()
    {
        const std::string source = copyRun();
        for (int r = 0; r < 2; ++r)
            fs::remove(source + "/extra_state_world_size_2_rank_" + std::to_string(r) + ".pt");
        const std::string target = test::makeTempDir() + "/run/global_step_2/actor";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", source, "--world_size", "3", "--target_dir", target }), &err), 0);
        QVERIFY2(err.contains(QStringLiteral("load_contents=[model,optimizer]")), qPrintable(err));
        QVERIFY(fs::exists(target + "/optim_world_size_3_rank_2.pt"));
        QVERIFY(!fs::exists(target + "/extra_state_world_size_3_rank_0.pt"));
    }

    void aDtypeChangeIsSaidToChangeTheResumedRun()
    {
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", copyRun(), "--world_size", "3", "--target_dir",
                              test::makeTempDir() + "/out", "--dtype", "bf16", "--dry-run" }), &err), 0);
        QVERIFY2(err.contains(QStringLiteral("optimizer state keeps its own dtype")), qPrintable(err));
    }

    // Megatron torch_dist's optimizer keys are listed, never silently left behind by a split.
    void megatronOptimizerIsRefusedUnlessModelOnly()
    {
        const std::string source = std::string(TESSERA_TEST_DATA_DIR) + "/megatron_dist_llama_optim_tp2";
        const std::string target = test::makeTempDir() + "/fsdp";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", source, "--world_size", "2", "--target_dir", target }), &err), 1);
        QVERIFY2(err.contains(QStringLiteral("optimizer state (27 tensors, fully_reshardable)")), qPrintable(err));
        QVERIFY(!fs::exists(target));
        QCOMPARE(runSplit(A({ "--local_dir", source, "--world_size", "2", "--target_dir", target, "--model_only",
                              "--quiet" }), &err), 0);
        QVERIFY(fs::exists(target + "/model_world_size_2_rank_1.pt"));
    }

    void dcpTrainingStateRefusesAnotherFormatUnlessModelOnly()
    {
        const std::string target = test::makeTempDir() + "/fsdp";
        QString err;
        QCOMPARE(runSplit(A({ "--local_dir", madeDcp(), "--hf_model_path", madeDcpConfig(), "--format", "fsdp",
                              "--world_size", "2", "--target_dir", target }), &err), 1);
        QVERIFY2(err.contains(QStringLiteral("torchtitan's training state")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("--model_only")), qPrintable(err));
        QVERIFY(!fs::exists(target));
    }
};

QTEST_GUILESS_MAIN(TestSplitTraining)
#include "tst_split_training.moc"
