// SPDX-License-Identifier: GPL-3.0-or-later
// A source file cut short by another process while it is being read. The engine reads sources through memory
// maps, where a page past the new end raises SIGBUS: once that killed the merge (4 runs in 8) and left its
// temporary folder. Every path that reads a source is cut here at a point the test chooses (after the first
// progress report, or between mapping and reading) and must fail with an error naming the file and saying it
// changed, with nothing published and no temporary folder left. The split's folders that cannot be created (a
// disk out of inodes) are an error too, not an uncaught filesystem_error.

#include "testutil.h"

#include "compare/model_compare.h"
#include "formats/scan.h"
#include "merge/gguf_plan.h"
#include "merge/merge_engine.h"
#include "merge/merge_parts.h"
#include "merge/merge_plan.h"
#include "merge/source_files.h"
#include "split/split_engine.h"
#include "split/split_plan.h"

#include <QProcess>
#include <QTest>

#include <unistd.h>

#include <atomic>
#include <filesystem>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

/// Another process truncating `files` to `size` bytes, the first time the run reports progress: the run then
/// goes on reading what it mapped when the files were whole.
class TruncateAfterFirstReport final : public Progress {
public:
    explicit TruncateAfterFirstReport(std::vector<std::string> files, std::uint64_t size = 0)
        : m_files(std::move(files)), m_size(size)
    {
    }
    void report(std::uint64_t, std::uint64_t, const std::string&) override
    {
        if (m_done.exchange(true))
            return;
        for (const auto& f : m_files)
            if (::truncate(f.c_str(), static_cast<off_t>(m_size)) != 0)
                qFatal("cannot truncate %s", f.c_str());
    }
    bool isCanceled() const override { return false; }
    bool truncated() const { return m_done.load(); }

private:
    std::vector<std::string> m_files;
    std::uint64_t m_size;
    std::atomic<bool> m_done { false };
};

/// The error names one of `files` and says it changed while it was read (or, for a file mapped only after it
/// was cut, since it was scanned).
void checkChangedError(const std::string& message, const std::vector<std::string>& files)
{
    bool named = false;
    for (const auto& f : files)
        named = named || message.find(f) != std::string::npos;
    QVERIFY2(named, message.c_str());
    QVERIFY2(message.find("changed while it was being read") != std::string::npos
                 || message.find("changed after it was scanned") != std::string::npos,
             message.c_str());
}

std::vector<std::string> rankFiles(const std::string& actor)
{
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(actor))
        if (e.path().extension() == ".pt")
            files.push_back(e.path().string());
    return files;
}

/// Nothing in `parent` (the target, and the temporary folder beside it, are gone).
void checkNothingLeft(const std::string& parent)
{
    std::string left;
    for (const auto& e : fs::directory_iterator(parent))
        left += e.path().filename().string() + " ";
    QVERIFY2(left.empty(), left.c_str());
}

} // namespace

class TestSourceTruncated : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void mergeOfChecksummedRankFiles()
    {
        // verl FSDP rank files: each record's CRC-32 is read through the mapping before its bytes are copied.
        const std::string actor = copyFixtureFolder("fsdp2_llama_w4/global_step_10/actor");
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        TruncateAfterFirstReport progress(rankFiles(actor));
        MergeRunOptions run;
        run.threads = 1;
        run.progress = &progress;
        const std::string parent = makeTempDir();
        auto outcome = mergeCheckpoint(*info, *plan, parent + "/out", run);
        QVERIFY(progress.truncated());
        QVERIFY(!outcome);
        checkChangedError(outcome.error().message, rankFiles(actor));
        checkNothingLeft(parent);
    }

    void mergeOfSafetensors_data()
    {
        QTest::addColumn<bool>("convert");
        QTest::addRow("copied in the kernel") << false;
        QTest::addRow("converted from the mapping") << true;
    }

    void mergeOfSafetensors()
    {
        // A Hugging Face folder: no checksums; bytes copied with copy_file_range, or converted to bf16 from the map.
        QFETCH(bool, convert);
        const std::string hf = copyFixtureFolder("gguf_llama_w2_fp32/reference");
        auto info = scanCheckpoint(hf);
        QVERIFY_RESULT(info);
        MergeOptions options;
        if (convert)
            options.dtype = DType::BFloat16;
        auto plan = planMerge(*info, options);
        QVERIFY_RESULT(plan);
        const std::string file = hf + "/model.safetensors";
        TruncateAfterFirstReport progress({ file }, fs::file_size(file) / 2);
        MergeRunOptions run;
        run.threads = 1;
        run.progress = &progress;
        const std::string parent = makeTempDir();
        auto outcome = mergeCheckpoint(*info, *plan, parent + "/out", run);
        QVERIFY(!outcome);
        checkChangedError(outcome.error().message, { file });
        checkNothingLeft(parent);
    }

    void mergePartReadsThroughMemory()
    {
        // A part checksums the bytes it writes, so it reads them into memory (pread) rather than in the kernel.
        const std::string hf = copyFixtureFolder("gguf_llama_w2_fp32/reference");
        auto info = scanCheckpoint(hf);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        const std::vector<MergeOutput> outputs = { MergeOutput { &*info, &*plan, "" } };
        auto parts = planParts(outputs, 1);
        QVERIFY_RESULT(parts);
        const std::string file = hf + "/model.safetensors";
        TruncateAfterFirstReport progress({ file }, 4096);
        MergeRunOptions run;
        run.threads = 1;
        run.progress = &progress;
        const std::string target = makeTempDir() + "/out";
        auto outcome = runMergePart(outputs, *parts, 0, target, run);
        QVERIFY(!outcome);
        checkChangedError(outcome.error().message, { file });
        QVERIFY(!fs::exists(target + "/model.safetensors"));
    }

    void gatheredTensorsReadFromTheMapping_data()
    {
        QTest::addColumn<bool>("convert");
        QTest::addRow("bytes as stored") << false;
        QTest::addRow("converted") << true;
    }

    void gatheredTensorsReadFromTheMapping()
    {
        // The file shrinks between its mapping and the reading of a tensor assembled box by box (a q_proj in
        // llama.cpp's rotary order): the bytes are read from the mapping itself.
        const std::string hf = copyFixtureFolder("gguf_llama_w2_fp32/reference");
        auto info = scanCheckpoint(hf);
        QVERIFY_RESULT(info);
        auto plan = planGgufMerge(*info, {});
        QVERIFY_RESULT(plan);
        QFETCH(bool, convert);
        for (std::size_t i = 0; i < plan->view.tensors.size(); ++i) {
            const TensorInfo& t = plan->view.tensors[i];
            if (t.name != "blk.1.attn_q.weight")
                continue;
            auto planned = planTensorCopy(t, i, convert ? std::optional<DType>(DType::BFloat16) : std::nullopt);
            QVERIFY_RESULT(planned);
            QVERIFY(planned->mode == CopyMode::Gather);
            SourceFiles files;
            const std::string file = hf + "/model.safetensors";
            QVERIFY_RESULT(files.map(file));
            QVERIFY(::truncate(file.c_str(), 1024) == 0);
            std::vector<std::uint8_t> buffer(planned->bytes);
            const Status status = materializeTensor(files, t, *planned, buffer.data());
            QVERIFY(!status);
            checkChangedError(status.error().message, { file });
            return;
        }
        QFAIL("no blk.1.attn_q.weight in the plan");
    }

    void checksumOfARecordReadFromTheMapping()
    {
        const std::string actor = copyFixtureFolder("fsdp2_llama_w4/global_step_10/actor");
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        const Piece& piece = info->tensors.back().pieces.front();
        QVERIFY(piece.storageCrc32.has_value());
        SourceFiles files;
        QVERIFY_RESULT(files.map(piece.file));
        QVERIFY(::truncate(piece.file.c_str(), 100) == 0);
        const Status status = files.verifyStorage(piece);
        QVERIFY(!status);
        checkChangedError(status.error().message, { piece.file });
        // The file's own error, not a checksum mismatch: the bytes were never all read.
        QVERIFY2(status.error().message.find("CRC") == std::string::npos, status.error().message.c_str());
    }

    void ggufExport()
    {
        const std::string actor = copyFixtureFolder("gguf_llama_w2_fp32/global_step_10/actor");
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        GgufOptions options;
        options.outType = GgufOutType::Q8_0;
        auto plan = planGgufMerge(*info, options);
        QVERIFY_RESULT(plan);
        TruncateAfterFirstReport progress(rankFiles(actor));
        MergeRunOptions run;
        run.threads = 1;
        run.progress = &progress;
        const std::string parent = makeTempDir();
        auto outcome = writeGgufFile(*plan, parent + "/out", run);
        QVERIFY(!outcome);
        checkChangedError(outcome.error().message, rankFiles(actor));
        checkNothingLeft(parent);
    }

    void splitReadsTensorsInPlace_data()
    {
        QTest::addColumn<bool>("megatron");
        QTest::addRow("FSDP: whole rows streamed") << false;
        QTest::addRow("Megatron TP 2: boxes copied") << true;
    }

    void splitReadsTensorsInPlace()
    {
        // A Hugging Face model's tensors are cut into rank files straight from the mapping.
        QFETCH(bool, megatron);
        const std::string hf = copyFixtureFolder("gguf_llama_w2_fp32/reference");
        auto info = scanCheckpoint(hf);
        QVERIFY_RESULT(info);
        auto model = planMerge(*info, {});
        QVERIFY_RESULT(model);
        SplitOptions options;
        if (megatron) {
            options.format = SplitFormat::Megatron;
            options.tp = 2;
        } else {
            options.worldSize = 3;
        }
        auto plan = planSplit(*model, options);
        QVERIFY_RESULT(plan);
        const std::string file = hf + "/model.safetensors";
        TruncateAfterFirstReport progress({ file }, 4096);
        SplitRunOptions run;
        run.threads = 1;
        run.progress = &progress;
        const std::string parent = makeTempDir();
        auto outcome = runSplit(*info, *model, *plan, parent + "/out", run);
        QVERIFY(!outcome);
        checkChangedError(outcome.error().message, { file });
        checkNothingLeft(parent);
    }

    void comparisonWithAReference()
    {
        // `tessera test`: the reference is read where it lies; cut short, each tensor read after says so.
        auto info = scanCheckpoint(fixture("gguf_llama_w2_fp32/global_step_10/actor"));
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        const std::string reference = copyFixtureFolder("gguf_llama_w2_fp32/reference");
        const std::string file = reference + "/model.safetensors";
        TruncateAfterFirstReport progress({ file }, 4096);
        CompareOptions options;
        options.threads = 1;
        auto report = compareWithReference(*info, *plan, reference, options, progress);
        QVERIFY(progress.truncated());
        QVERIFY_RESULT(report);
        QVERIFY(!report->ok());
        std::size_t changed = 0;
        for (const auto& t : report->tensors)
            if (t.verdict == TensorComparison::Verdict::Failed) {
                checkChangedError(t.detail, { file });
                ++changed;
            }
        QVERIFY(changed > 0);
    }

    void splitFolderThatCannotBeCreated()
    {
        // Where the split puts config.json and the tokenizer (huggingface/) a file has the name: the folder cannot
        // be created, which once threw a filesystem_error nothing caught.
        auto info = scanCheckpoint(fixture("gguf_llama_w2_fp32/global_step_10/actor"));
        QVERIFY_RESULT(info);
        auto model = planMerge(*info, {});
        QVERIFY_RESULT(model);
        SplitOptions options;
        options.worldSize = 2;
        auto plan = planSplit(*model, options);
        QVERIFY_RESULT(plan);
        QCOMPARE(plan->sideFolder, std::string("huggingface"));
        const std::string dir = makeTempDir();
        writeFile(dir + "/huggingface", "not a folder");
        auto files = finishSplitFolder(*model, *plan, dir, SplitItems(plan->files.size()));
        QVERIFY(!files);
        QVERIFY2(files.error().message.find(dir + "/huggingface") != std::string::npos, files.error().message.c_str());
    }

    void splitOutOfInodes()
    {
        // The disk runs out of inodes at mkdir huggingface/ (the second mkdir: the first makes the temporary
        // folder): exit 1 naming the folder, and the temporary folder removed.
        if (::access("/usr/bin/strace", X_OK) != 0)
            QSKIP("strace is not installed");
        const std::string parent = makeTempDir();
        QProcess strace;
        strace.start(QStringLiteral("/usr/bin/strace"),
                     A({ "-f", "-qq", "-o", "/dev/null", "-e", "trace=mkdir,mkdirat", "-e",
                         "inject=mkdir,mkdirat:error=ENOSPC:when=2+", tesseraBinary(), "split", "--hf_dir",
                         fixture("gguf_llama_w2_fp32/reference"), "--target_dir", parent + "/out", "--world_size", "2",
                         "--quiet" }));
        QVERIFY(strace.waitForFinished(120000));
        const QString err = QString::fromUtf8(strace.readAllStandardError());
        if (err.contains(QStringLiteral("PTRACE")) || err.contains(QStringLiteral("ptrace")))
            QSKIP("strace cannot trace here");
        QCOMPARE(strace.exitStatus(), QProcess::NormalExit);
        QVERIFY2(strace.exitCode() == 1, qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("huggingface")) && err.contains(QStringLiteral("No space left on device")),
                 qPrintable(err));
        checkNothingLeft(parent);
    }
};

QTEST_GUILESS_MAIN(TestSourceTruncated)
#include "tst_source_truncated.moc"
