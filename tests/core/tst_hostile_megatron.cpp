// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron files and placements whose numbers are built to overflow or multiply work: parallel sizes whose
// product wraps an int, shared sub-dicts that name billions of tensors, split factors of 2^62, one shard listed
// thousands of times; tensor names long enough to overflow a regex engine that recurses per character. Each must be
// refused with a clear problem, or read as it is, quickly and in bounded memory.

#include "testutil.h"
#include "corruption_zip.h"
#include "hostilefiles.h"

#include "formats/scan.h"
#include "model/coverage.h"
#include "model/placement.h"

#include <QTest>

#include <chrono>
#include <filesystem>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

std::string allProblems(const CheckpointInfo& info)
{
    std::string s;
    for (const auto& p : info.problems)
        s += p.text() + "\n";
    return s;
}

bool mentions(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

/// A Megatron-LM iter folder: one mp_rank_* folder per name, each with a model_optim_rng.pt holding
/// {'args': Namespace(args), 'model': <modelPickle>}.
std::string megatronLmFolder(const std::vector<std::string>& folders,
                             const std::vector<std::pair<std::string, std::int64_t>>& args,
                             const std::string& modelPickle = "}")
{
    // Nested so that no transformer_config.json of a parent folder (up to two levels are searched) is found.
    const std::string dir = makeTempDir() + "/run/checkpoints/iter_0000001";
    const std::string pickle = std::string("\x80\x02}(") + pickleStr("args") + pickleNamespace(args)
                               + pickleStr("model") + modelPickle + "u.";
    for (const auto& name : folders) {
        fs::create_directories(dir + "/" + name);
        writeFile(dir + "/" + name + "/model_optim_rng.pt", torchSaveOf(pickle));
    }
    return dir;
}

/// A dict of `levels` levels whose two keys refer to the same dict one level down (memoised), ending in {}.
std::string billionLaughsDict(int levels)
{
    std::string p = "}r";
    putLe(p, 0, 4);
    p += "0";
    for (int i = 1; i <= levels; ++i) {
        p += "}(" + pickleStr("a") + "j";
        putLe(p, static_cast<std::uint64_t>(i - 1), 4);
        p += pickleStr("b") + "j";
        putLe(p, static_cast<std::uint64_t>(i - 1), 4);
        p += "ur";
        putLe(p, static_cast<std::uint64_t>(i), 4);
        if (i < levels)
            p += "0";
    }
    return p;
}

/// `pickle` with every string opcode (BINUNICODE or SHORT_BINUNICODE) whose text is `from` rewritten as a
/// BINUNICODE of `to`; a protocol 4 pickle's one FRAME is resized to match.
std::string renameInPickle(const std::string& pickle, const std::string& from, const std::string& to)
{
    std::string binunicode = "X", shortText = "\x8c";
    putLe(binunicode, from.size(), 4);
    shortText += static_cast<char>(from.size());
    std::string replacement = "X";
    putLe(replacement, to.size(), 4);
    replacement += to;
    std::string out = pickle;
    for (const std::string& op : { binunicode + from, shortText + from })
        for (std::size_t at = 0; (at = out.find(op, at)) != std::string::npos; at += replacement.size())
            out.replace(at, op.size(), replacement);
    if (out.size() > 11 && static_cast<std::uint8_t>(out[2]) == 0x95)
        zip::set32(out, 3, static_cast<std::uint32_t>(out.size() - 11));
    return out;
}

/// A 30,000-character parameter name inside `module` (`decoder.layers.0.self_attention.linear_proj`): far past any
/// real name, well under the 64 KiB a name may have.
std::string longName(const std::string& module) { return module + "." + std::string(30000, 'x') + ".weight"; }

} // namespace

class TestHostileMegatron : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void parallelSizesWhoseProductOverflowsAreRefused()
    {
        // TP=65536 × PP=65537 wrapped the int world size and wrote past the end of the rank grid.
        const std::string dir = megatronLmFolder({ "mp_rank_00_000", "mp_rank_00_001" },
                                                 { { "tensor_model_parallel_size", 65536 },
                                                   { "pipeline_model_parallel_size", 65537 } });
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "make 4295032832 ranks, but only 2 mp_rank_* folders are present"),
                 allProblems(*info).c_str());
    }

    void parallelSizesOutOfRangeInArgsAreIgnored()
    {
        const std::string dir = megatronLmFolder({ "mp_rank_00_000", "mp_rank_00_001" },
                                                 { { "tensor_model_parallel_size", 2147483647 },
                                                   { "pipeline_model_parallel_size", 2147483647 } });
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "tensor_model_parallel_size is 2147483647, outside 0 to 1048576"),
                 allProblems(*info).c_str());
    }

    void parallelSizesOutOfRangeInTransformerConfigAreAProblem()
    {
        const std::string dir = megatronLmFolder({ "mp_rank_00_000", "mp_rank_00_001" },
                                                 { { "pipeline_model_parallel_size", 2 } });
        writeFile(dir + "/transformer_config.json",
                  R"({"tensor_model_parallel_size": 2147483647, "pipeline_model_parallel_size": 2147483647})");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "transformer_config.json: tensor_model_parallel_size is 2147483647"),
                 allProblems(*info).c_str());
        writeFile(dir + "/transformer_config.json", R"({"tensor_model_parallel_size": 18446744073709551615})");
        QVERIFY_RESULT(scanCheckpoint(dir));
    }

    void hugeRankNumbersInFolderNamesAreLeftOut()
    {
        const std::string dir = megatronLmFolder({ "mp_rank_00", "mp_rank_99999999999999999999999" }, {});
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "mp_rank_99999999999999999999999: the rank numbers in this folder name "
                                              "are out of range"),
                 allProblems(*info).c_str());
    }

    void sharedSubDictsAreNotFlattenedExponentially()
    {
        // 40 levels of two references each would name 2^40 tensors from a 1.5 KB pickle.
        const auto started = std::chrono::steady_clock::now();
        const std::string dir = megatronLmFolder({ "mp_rank_00" }, {}, billionLaughsDict(40));
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "refers to the same nested dict"), allProblems(*info).c_str());
        QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    }

    void stridedShardWithAHugeSplitFactorIsRefused()
    {
        const auto started = std::chrono::steady_clock::now();
        auto layout = computeLocalLayout({ 64, 8 }, { 2 }, { 0 },
                                         { Placement::stridedShard(0, std::int64_t(1) << 62) });
        QVERIFY(!layout);
        QVERIFY2(mentions(layout.error().message, "split factor above"), layout.error().message.c_str());
        QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
    }

    void stridedShardsThatCutIntoBillionsOfBoxesAreRefused()
    {
        const auto started = std::chrono::steady_clock::now();
        auto layout = computeLocalLayout({ 80000, 80000 }, { 2, 2 }, { 0, 0 },
                                         { Placement::stridedShard(0, 40000), Placement::stridedShard(1, 40000) });
        QVERIFY(!layout);
        QVERIFY2(mentions(layout.error().message, "separate pieces"), layout.error().message.c_str());
        QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
    }

    void oneShardListedManyTimesIsCheckedInLinearTime()
    {
        TensorInfo tensor;
        tensor.name = "w";
        tensor.dtype = DType::Float32;
        tensor.shape = { 4, 4 };
        for (int i = 0; i < 20000; ++i) {
            Piece piece;
            piece.rank = 0;
            piece.offsets = { 0, 0 };
            piece.shape = { 4, 4 };
            piece.strides = { 4, 1 };
            tensor.pieces.push_back(piece);
        }
        const auto started = std::chrono::steady_clock::now();
        const auto messages = checkCoverage(tensor);
        QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
        QVERIFY(!messages.empty());
        QCOMPARE(QString::fromStdString(messages.back()), QStringLiteral("… and more overlapping pieces"));
    }

    void thirtyThousandCharacterNameInALegacyCheckpointIsNotACrash()
    {
        // std::regex recursed once per character of a name and overflowed the stack (SIGSEGV) on such a name.
        const std::string copy = copyFixtureFolder("megatron_legacy_qwen2_tp2_pp2");
        const std::string model = copy + "/global_step_10/actor/model";
        const std::string from = "decoder.layers.0.self_attention.linear_proj.weight";
        const std::string to = longName("decoder.layers.0.self_attention.linear_proj");
        for (const char* rank : { "mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001" }) {
            const std::string file = model + "/" + rank + "/model.pt";
            const std::string edited = zip::rewriteRecord(readFile(file), "/data.pkl", [&](const std::string& p) {
                return renameInPickle(p, from, to);
            });
            QVERIFY(!edited.empty() && edited.find(to) != std::string::npos);
            writeFile(file, edited);
        }
        QString out, err;
        QCOMPARE(runTessera({ QStringLiteral("inspect"), QString::fromStdString(copy + "/global_step_10/actor") },
                            &out, &err),
                 1);
        // Read as it is: a name no rule maps, and the o_proj it should have filled is missing.
        QVERIFY2(out.contains(QStringLiteral("no qwen2 rule maps decoder.layers.0.self_attention.linear_proj.xxxx")),
                 qPrintable(out.left(2000) + err.left(2000)));
        QVERIFY2(out.contains(QStringLiteral("model.layers.0.self_attn.o_proj.weight")), qPrintable(out.left(2000)));
    }

    void thirtyThousandCharacterNameInATorchDistCheckpointIsNotACrash()
    {
        const std::string copy = copyFixtureFolder("megatron_dist_llama_tp2_pp2");
        const std::string metadata = copy + "/global_step_10/actor/dist_ckpt/.metadata";
        const std::string to = longName("decoder.layers.self_attention.linear_proj");
        const std::string edited
            = renameInPickle(readFile(metadata), "decoder.layers.self_attention.linear_proj.weight", to);
        QVERIFY(edited.find(to) != std::string::npos);
        writeFile(metadata, edited);
        QString out, err;
        QCOMPARE(runTessera({ QStringLiteral("inspect"), QString::fromStdString(copy + "/global_step_10/actor") },
                            &out, &err),
                 1);
        QVERIFY2(out.contains(QStringLiteral("no llama rule maps decoder.layers.0.self_attention.linear_proj.xxxx")),
                 qPrintable(out.left(2000) + err.left(2000)));
        QVERIFY2(out.contains(QStringLiteral("model.layers.0.self_attn.o_proj.weight")), qPrintable(out.left(2000)));
    }
};

QTEST_GUILESS_MAIN(TestHostileMegatron)
#include "tst_hostile_megatron.moc"
