// SPDX-License-Identifier: GPL-3.0-or-later
// Files that are not what their names say: FIFOs and devices where a rank file, metadata, config or tracker
// should be, numbers in names and trackers too large for any integer, symlink loops and links out of the
// checkpoint. Each must end in a clear error or problem at once: no hang, no exception, nothing followed.

#include "testutil.h"
#include "hostilefiles.h"

#include "formats/scan.h"
#include "formats/safetensors_reader.h"
#include "io/mapped_file.h"
#include "io/printable.h"
#include "io/text_file.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"

#include <QTest>

#include <filesystem>
#include <sys/stat.h>

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

void makeFifo(const std::string& path)
{
    if (::mkfifo(path.c_str(), 0600) != 0)
        qFatal("mkfifo %s failed", path.c_str());
}

/// A copy of the 4-rank verl FSDP2 fixture's actor folder (symlinks to the rank files, copies of the rest).
std::string fsdpActorCopy()
{
    const std::string dir = makeTempDir() + "/global_step_10/actor";
    const std::string source = fixture("fsdp2_llama_w4/global_step_10/actor");
    fs::create_directories(dir);
    for (int r = 0; r < 4; ++r) {
        const std::string name = "model_world_size_4_rank_" + std::to_string(r) + ".pt";
        fs::create_symlink(source + "/" + name, dir + "/" + name);
    }
    fs::copy_file(source + "/fsdp_config.json", dir + "/fsdp_config.json");
    fs::copy(source + "/huggingface", dir + "/huggingface", fs::copy_options::recursive);
    return dir;
}

bool mentions(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

} // namespace

class TestHostilePaths : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void fifoIsNotOpenedAsAFile()
    {
        const std::string fifo = makeTempDir() + "/data.pt";
        makeFifo(fifo);
        auto mapped = MappedFile::open(fifo);
        QVERIFY(!mapped);
        QVERIFY2(mentions(mapped.error().message, "FIFO"), mapped.error().message.c_str());
        auto text = readTextFile(fifo);
        QVERIFY(!text);
        QVERIFY(mentions(text.error().message, fifo + ": is a FIFO"));
    }

    void endlessDeviceIsNotReadAsText()
    {
        auto text = readTextFile("/dev/zero");
        QVERIFY(!text);
        QVERIFY2(mentions(text.error().message, "character device"), text.error().message.c_str());
    }

    void oversizedTextFileIsRefused()
    {
        const std::string path = makeTempDir() + "/big.json";
        writeFile(path, std::string(5000, ' '));
        QVERIFY(!readTextFile(path, 4096));
        QVERIFY(readTextFile(path, 5000));
    }

    void fifoRankFileIsAProblem()
    {
        const std::string dir = makeTempDir();
        writeFile(dir + "/model_world_size_2_rank_0.pt", "not a zip");
        makeFifo(dir + "/model_world_size_2_rank_1.pt");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "FIFO"), allProblems(*info).c_str());
    }

    void fifoFsdpConfigIsAProblem()
    {
        const std::string dir = fsdpActorCopy();
        fs::remove(dir + "/fsdp_config.json");
        makeFifo(dir + "/fsdp_config.json");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "fsdp_config.json: is a FIFO"), allProblems(*info).c_str());
        QVERIFY(!info->tensors.empty());
    }

    void deeplyNestedJsonValuesAreNotDumped()
    {
        const std::string dir = fsdpActorCopy();
        writeFile(dir + "/fsdp_config.json", "{\"world_size\": 4, \"FSDP_version\": " + std::string(200000, '[')
                                                 + std::string(200000, ']') + "}");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY(!info->notes.count("fsdp_version"));
    }

    void fifoDcpMetadataIsAnError()
    {
        const std::string dir = makeTempDir() + "/dcp";
        fs::create_directories(dir);
        makeFifo(dir + "/.metadata");
        writeFile(dir + "/__0_0.distcp", "");
        auto info = scanCheckpoint(dir);
        QVERIFY(!info);
        QVERIFY2(mentions(info.error().message, "FIFO"), info.error().message.c_str());
    }

    void trackerFifoOrDeviceIsAnError()
    {
        const std::string root = makeTempDir();
        fs::create_directories(root + "/global_step_1");
        makeFifo(root + "/latest_checkpointed_iteration.txt");
        auto fifo = scanCheckpoint(root);
        QVERIFY(!fifo);
        QVERIFY2(mentions(fifo.error().message, "FIFO"), fifo.error().message.c_str());

        fs::remove(root + "/latest_checkpointed_iteration.txt");
        fs::create_symlink("/dev/zero", root + "/latest_checkpointed_iteration.txt");
        auto zero = scanCheckpoint(root);
        QVERIFY(!zero);
        QVERIFY2(mentions(zero.error().message, "character device"), zero.error().message.c_str());
    }

    void hugeStepNumbersDoNotThrow()
    {
        const std::string root = makeTempDir();
        writeFile(root + "/latest_checkpointed_iteration.txt", "99999999999999999999999999\n");
        auto tracker = scanCheckpoint(root);
        QVERIFY(!tracker);
        QVERIFY2(mentions(tracker.error().message, "neither global_step_99999999999999999999999999"),
                 tracker.error().message.c_str());

        writeFile(root + "/latest_checkpointed_iteration.txt", "\x1b[2J\n");
        auto escape = scanCheckpoint(root);
        QVERIFY(!escape);
        QVERIFY2(mentions(escape.error().message, "\\x1B[2J") && !mentions(escape.error().message, "\x1b"),
                 escape.error().message.c_str());

        const std::string run = makeTempDir();
        fs::create_directories(run + "/global_step_999999999999999999999999999");
        fs::create_directories(run + "/global_step_5");
        auto newest = scanCheckpoint(run);
        QVERIFY(!newest); // global_step_5 is empty; what matters is that the huge name did not throw
        QVERIFY2(mentions(newest.error().message, "global_step_5"), newest.error().message.c_str());
    }

    void hugeWorldSizeInFileNameIsLeftOut()
    {
        const std::string dir = fsdpActorCopy();
        writeFile(dir + "/model_world_size_99999999999_rank_0.pt", "x");
        writeFile(dir + "/model_world_size_20000000_rank_0.pt", "x");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(mentions(allProblems(*info), "model_world_size_99999999999_rank_0.pt: the world size or rank"),
                 allProblems(*info).c_str());
        QCOMPARE(info->parallel.worldSize, 4);
    }

    void worldSizeFarBeyondTheFilesIsRefused()
    {
        const std::string dir = makeTempDir();
        writeFile(dir + "/model_world_size_1000000_rank_0.pt", "x");
        auto info = scanCheckpoint(dir);
        QVERIFY(!info);
        QVERIFY2(mentions(info.error().message, "claim world size 1000000 but only 1"), info.error().message.c_str());
    }

    void worldSizeThatWrapsIsRefused()
    {
        const std::string dir = fsdpActorCopy();
        writeFile(dir + "/fsdp_config.json", R"({"FSDP_version": 2, "world_size": 4294967300})");
        auto info = scanCheckpoint(dir);
        QVERIFY(!info);
        QVERIFY2(mentions(info.error().message, "world_size is 4294967300"), info.error().message.c_str());
        writeFile(dir + "/fsdp_config.json", R"({"FSDP_version": 2, "world_size": -4})");
        QVERIFY(!scanCheckpoint(dir));
    }

    void symlinkLoopIsAnError()
    {
        const std::string root = makeTempDir();
        fs::create_directories(root + "/a");
        fs::create_directories(root + "/b");
        fs::create_directory_symlink("../b", root + "/a/actor");
        fs::create_directory_symlink("../a", root + "/b/actor");
        auto info = scanCheckpoint(root + "/a");
        QVERIFY(!info);
        fs::create_symlink("self", root + "/self");
        auto self = scanCheckpoint(root + "/self");
        QVERIFY(!self);
        QVERIFY2(mentions(self.error().message, "symbolic links"), self.error().message.c_str());
    }

    void indexListingASpecialFileSaysWhatItIs()
    {
        const std::string dir = makeTempDir();
        writeFile(dir + "/model.safetensors.index.json",
                  R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
        makeFifo(dir + "/model-00001-of-00002.safetensors");
        auto info = scanSafetensorsFolder(dir);
        QVERIFY_RESULT(info);
        const std::string problems = allProblems(*info);
        QVERIFY2(mentions(problems, "it is a FIFO (named pipe), not a regular file"), problems.c_str());
        QVERIFY2(mentions(problems, "the file does not exist"), problems.c_str());
    }

    void configJsonThatIsAFifoFailsThePlan()
    {
        const std::string dir = fsdpActorCopy();
        fs::remove(dir + "/huggingface/config.json");
        makeFifo(dir + "/huggingface/config.json");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY(!plan);
        QVERIFY2(mentions(plan.error().message, "config.json: is a FIFO"), plan.error().message.c_str());
    }

    void sideFileLinkOutOfTheCheckpointIsNotCopied()
    {
        const std::string dir = fsdpActorCopy();
        const std::string secret = makeTempDir() + "/secret.txt";
        writeFile(secret, "secret");
        fs::create_symlink(secret, dir + "/huggingface/tokenizer_extra.json");
        fs::create_symlink("config.json", dir + "/huggingface/tokenizer_alias.json");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        const auto& side = plan->config.files;
        QVERIFY(std::find(side.begin(), side.end(), "tokenizer_extra.json") == side.end());
        QVERIFY(std::find(side.begin(), side.end(), "tokenizer_alias.json") != side.end());
        bool warned = false;
        for (const auto& w : plan->warnings)
            warned |= mentions(w, "tokenizer_extra.json: a symbolic link that leads out");
        QVERIFY(warned);
        // What the plan says is what is written: the merged folder holds the link's target's content only for the
        // link that stays inside, and nothing of the secret.
        const std::string out = makeTempDir() + "/merged";
        QVERIFY_RESULT(mergeCheckpoint(*info, *plan, out, {}));
        QVERIFY(!fs::exists(out + "/tokenizer_extra.json"));
        QCOMPARE(readFile(out + "/tokenizer_alias.json"), readFile(dir + "/huggingface/config.json"));
        for (const auto& entry : fs::directory_iterator(out))
            QVERIFY2(readFile(entry.path().string()).find("secret") == std::string::npos, entry.path().c_str());
    }

    void printableTextEscapesControlsAndBadUtf8()
    {
        QCOMPARE(printableText("model.layers.0.weight"), std::string("model.layers.0.weight"));
        QCOMPARE(printableText("a\x1b[31mb"), std::string("a\\x1B[31mb"));
        QCOMPARE(printableText("caf\xc3\xa9"), std::string("caf\xc3\xa9"));
        QCOMPARE(printableText("bad\xff\xfe"), std::string("bad\\xFF\\xFE"));
        QCOMPARE(printableText(std::string("nul\0x", 5)), std::string("nul\\x00x"));
        // A right-to-left override would show what follows it reversed.
        QCOMPARE(printableText("a\xe2\x80\xae" "b"), std::string("a\\xE2\\x80\\xAEb"));
        QCOMPARE(printableText("\xe2\x80\x94"), std::string("\xe2\x80\x94")); // an em dash is text
        QVERIFY(!isPrintableText("\xc0\xaf")); // overlong '/'
        QVERIFY(isPrintableText("\xe4\xb8\xad"));
    }
};

QTEST_GUILESS_MAIN(TestHostilePaths)
#include "tst_hostile_paths.moc"
