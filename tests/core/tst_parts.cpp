// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera merge --part K/N`: one merge split across processes gives the folder a single merge gives, bit for bit,
// whatever order the parts run in, when one runs twice or is killed and run again; the target is published only
// when every part is done, and `--status` names the parts that are missing. The same for a GGUF export
// (`--format gguf --part K/N`: byte ranges of one file). Launchers: --part auto under Slurm, a Kubernetes indexed
// Job, MPICH's and Open MPI's mpirun.

#include "testutil.h"

#include "../../bench/synthetic_checkpoint.h"
#include "formats/gguf_file.h"
#include "formats/scan.h"
#include "merge/gguf_parts.h"
#include "merge/merge_parts.h"
#include "publish/output_staging.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRandomGenerator>
#include <QStandardPaths>
#include <QThread>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

using test::A;
QString q(const std::string& s) { return QString::fromStdString(s); }
std::string actor(const std::string& c) { return test::fixture(c + "/global_step_10/actor"); }

/// Every entry below `dir` (hidden ones too) with its bytes; folders map to "<dir>".
std::map<std::string, std::string> tree(const std::string& dir)
{
    std::map<std::string, std::string> files;
    if (!fs::is_directory(dir))
        return files;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        const std::string rel = fs::relative(entry.path(), dir).string();
        files[rel] = entry.is_directory() ? std::string("<dir>") : test::readFile(entry.path().string());
    }
    return files;
}

/// Names in `dir` (not below).
/// The entries of `dir`, but for the target's lock file: once a job in parts has published, it stays beside the
/// target as the record that lets a part run again see that its job is done (publish/target_lock.h).
std::vector<std::string> names(const std::string& dir)
{
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.size() < 13 || name.compare(name.size() - 13, 13, ".tessera-lock") != 0)
            found.push_back(name);
    }
    std::sort(found.begin(), found.end());
    return found;
}

/// The parts' shared folders in `dir`.
std::vector<std::string> setFolders(const std::string& dir)
{
    std::vector<std::string> found;
    for (const auto& name : names(dir))
        if (name.find("tessera-parts-") != std::string::npos)
            found.push_back(name);
    return found;
}

QStringList withTarget(const QStringList& args, const std::string& target)
{
    return A({ "merge" }) + args + A({ "--target_dir", target, "--quiet" });
}

QStringList part(const QStringList& args, const std::string& target, unsigned k, unsigned n)
{
    return withTarget(args, target) + A({ "--part", std::to_string(k) + "/" + std::to_string(n) });
}

int runWithEnv(const QStringList& args, const std::map<QString, QString>& env, QString* out, QString* err)
{
    QProcess p;
    auto environment = QProcessEnvironment::systemEnvironment();
    for (const auto& [k, v] : env)
        environment.insert(k, v);
    p.setProcessEnvironment(environment);
    p.start(q(test::tesseraBinary()), args);
    if (!p.waitForFinished(120000))
        return -1;
    *out = QString::fromUtf8(p.readAllStandardOutput());
    *err = QString::fromUtf8(p.readAllStandardError());
    return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
}

/// The GGUF fixture's Hugging Face folder with Llama 3 rope scaling in its config.json, so its export has a
/// generated tensor (rope_freqs) that only the finishing part writes.
std::string llama3RopeModel()
{
    const std::string dir = test::copyFixtureFolder("gguf_llama_w2_fp32/reference");
    std::string config = test::readFile(dir + "/config.json");
    const auto brace = config.rfind('}');
    config.insert(brace, ",\n  \"rope_scaling\": { \"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                         "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64 }\n");
    test::writeFile(dir + "/config.json", config);
    return dir;
}

QStringList ggufArgs(const std::string& source, const char* outtype)
{
    return A({ "--local_dir", source, "--format", "gguf", "--outtype", outtype });
}

/// A plan of `sizes` (bytes per tensor) in files of `perFile` tensors, for planParts() alone.
struct FakeMerge {
    CheckpointInfo info;
    MergePlan plan;
    FakeMerge(const std::vector<std::uint64_t>& sizes, std::size_t perFile)
    {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            if (i % perFile == 0) {
                plan.files.push_back({});
                plan.files.back().name = "f" + std::to_string(plan.files.size());
            }
            PlannedTensor t;
            t.name = "t" + std::to_string(i);
            t.source = i;
            t.bytes = sizes[i];
            t.file = plan.files.size() - 1;
            t.fileOffset = 8 + plan.files.back().size;
            plan.files.back().size += sizes[i];
            plan.files.back().tensors.push_back(i);
            plan.tensors.push_back(t);
            info.tensors.push_back({});
        }
    }
};

/// Starts `tessera args…` and kills it (SIGKILL) as soon as a part's output folder below `parent` holds a file
/// with `extension`; true when it was still running then (false: it finished before).
bool killWhileWriting(const QStringList& args, const std::string& parent, const std::string& extension)
{
    QProcess p;
    p.start(q(test::tesseraBinary()), args);
    if (!p.waitForStarted())
        return false;
    QElapsedTimer waited;
    waited.start();
    auto writing = [&] {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(parent, ec))
            for (const auto& f : fs::directory_iterator(entry.path() / "out", ec))
                if (f.path().extension() == extension)
                    return true;
        return false;
    };
    // Every 2 ms: often enough to catch a part while it writes, without listing the folders thousands of times a
    // second beside it. Waiting on the process, not sleeping, is what notices a part that ended first: without an
    // event loop QProcess learns of its end only inside a wait.
    bool ended = false;
    while (!ended && waited.elapsed() < 20000 && !writing())
        ended = p.waitForFinished(2);
    const bool running = !ended && p.state() != QProcess::NotRunning;
    ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
    p.waitForFinished(30000);
    return running;
}

} // namespace

class TestParts : public QObject {
    Q_OBJECT

    /// A synthetic FSDP2 checkpoint large enough to kill a part while it writes.
    std::string m_big;
    /// The single run's output of each command line, made once for the whole file (several tests compare with the
    /// same one).
    std::map<QStringList, std::map<std::string, std::string>> m_references;

    const std::map<std::string, std::string>& reference(const QStringList& args)
    {
        auto known = m_references.find(args);
        if (known != m_references.end())
            return known->second;
        const std::string out = test::makeTempDir() + "/single";
        QString so, se;
        const int code = test::runTessera(withTarget(args, out), &so, &se);
        if (code != 0)
            qWarning("%s", qPrintable(se));
        auto& made = m_references[args];
        if (code == 0)
            made = tree(out);
        return made;
    }

private Q_SLOTS:
    void initTestCase()
    {
        m_big = test::makeTempDir() + "/actor";
        QVERIFY_RESULT(bench::writeCheckpoint(m_big, 0.03, 2, 64));
    }

    /// The assignment covers every tensor once, in contiguous runs, balanced within half the largest tensor
    /// (single file) and in whole files when there are many.
    void assignmentIsBalancedAndComplete()
    {
        std::mt19937 gen(7);
        std::vector<std::uint64_t> sizes;
        for (int i = 0; i < 200; ++i)
            sizes.push_back(1000 + gen() % 100000);
        for (std::size_t perFile : { std::size_t(200), std::size_t(10) }) {
            FakeMerge m(sizes, perFile);
            const std::vector<MergeOutput> outputs { { &m.info, &m.plan, "" } };
            std::uint64_t total = 0, largest = 0;
            for (auto s : sizes)
                total += s, largest = std::max(largest, s);
            for (unsigned n : { 1u, 2u, 3u, 5u, 7u, 64u }) {
                auto plan = planParts(outputs, n);
                QVERIFY_RESULT(plan);
                auto again = planParts(outputs, n);
                QCOMPARE(again->id, plan->id);
                std::vector<int> seen(sizes.size(), 0);
                std::uint64_t sum = 0;
                for (const auto& s : plan->shares) {
                    sum += s.bytes;
                    std::uint64_t ranged = 0;
                    for (const auto& r : s.ranges) {
                        ranged += r.end - r.begin;
                        for (auto t : r.tensors)
                            ++seen[t];
                    }
                    QCOMPARE(ranged, s.bytes);
                    const double ideal = double(total) / n;
                    const double allowed = perFile == 200 ? double(largest) : ideal / 4 + double(largest);
                    QVERIFY2(std::abs(double(s.bytes) - ideal) <= allowed + 1,
                             qPrintable(QStringLiteral("n=%1 share %2 ideal %3").arg(n).arg(s.bytes).arg(ideal)));
                }
                QCOMPARE(sum, total);
                QVERIFY(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
                if (perFile == 10 && n <= 3)
                    for (const auto& s : plan->shares)
                        QCOMPARE(s.wholeFiles, s.ranges.size()); // 20 files: every part writes whole files
                if (n > 1)
                    QVERIFY(planParts(outputs, n - 1)->id != plan->id);
            }
        }
    }

    void everyFixtureMergesBitExactInParts_data()
    {
        QTest::addColumn<QStringList>("args");
        const std::vector<std::string> fixtures { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "fsdp1_llama_w2_dtensor",
                                                  "hsdp_qwen2_2x2", "lora_llama_w2_fp32", "megatron_legacy_qwen2_tp2_pp2",
                                                  "megatron_dist_llama_tp2_pp2", "megatron_dist_deepseekv3_tp2_pp1",
                                                  "megatron_legacy_qwen25vl_tp2_pp1", "gguf_llama_w2_fp32" };
        // Sampled (sanitizers): one FSDP, one DCP and one Megatron fixture, and the sharded rows.
        const std::vector<std::string> sample { "fsdp2_llama_w4", "megatron_dist_deepseekv3_tp2_pp1" };
        for (const auto& c : fixtures) {
            if (test::sampled() && std::find(sample.begin(), sample.end(), c) == sample.end())
                continue;
            QTest::newRow(c.c_str()) << A({ "--local_dir", actor(c) });
            if (fs::exists(test::fixture(c + "/dcp")))
                QTest::newRow((c + "/dcp").c_str())
                    << A({ "--local_dir", test::fixture(c + "/dcp"), "--hf_model_path", actor(c) + "/huggingface" });
        }
        // Sharded outputs: several files and an index, cut between parts by file and by byte range.
        QTest::newRow("fsdp2_llama_w4 sharded") << A({ "--local_dir", actor("fsdp2_llama_w4"), "--max_shard_size", "60KB" });
        QTest::newRow("megatron_dist_deepseekv3_tp2_pp1 sharded")
            << A({ "--local_dir", actor("megatron_dist_deepseekv3_tp2_pp1"), "--max_shard_size", "100KB" });
    }

    /// Every fixture merged in parts: see checkPartsMatchSingleRun().
    void everyFixtureMergesBitExactInParts()
    {
        QFETCH(QStringList, args);
        checkPartsMatchSingleRun(args, "merge");
    }

    /// A part killed while it writes (many files, and one file written as byte ranges): the target stays as it
    /// was, --status names the part, and running it again publishes the same model as a single merge.
    void killedPartRerunCompletesTheMerge_data()
    {
        QTest::addColumn<QString>("shardSize");
        QTest::newRow("one file, byte ranges") << QStringLiteral("5GB");
        QTest::newRow("many files") << QStringLiteral("300KB");
    }
    void killedPartRerunCompletesTheMerge()
    {
        QFETCH(QString, shardSize);
        const QStringList args = A({ "--local_dir", m_big, "--max_shard_size", shardSize });
        const auto expected = reference(args);
        QVERIFY(!expected.empty());
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/merged";
        fs::create_directories(target);
        test::writeFile(target + "/README.md", "kept\n");
        QString so, se;
        // Part 1 is killed once its bytes are being written into the shared folder.
        QVERIFY(killWhileWriting(part(args, target, 1, 3), target, ".safetensors"));
        QVERIFY(!fs::exists(fs::path(target) / "model.safetensors"));
        QCOMPARE(test::runTessera(part(args, target, 2, 3), &so, &se), 0);
        QVERIFY2(so.isEmpty(), qPrintable(so)); // --quiet
        QCOMPARE(test::runTessera(part(args, target, 0, 3), &so, &se), 0);
        QCOMPARE(names(target).size(), std::size_t(2)); // README.md and the shared folder
        QCOMPARE(test::readFile(target + "/README.md"), std::string("kept\n"));
        QCOMPARE(test::runTessera(A({ "merge", "--status", target }), &so, &se), 1);
        QVERIFY2(so.contains(QStringLiteral("part 1: missing")) && so.contains(QStringLiteral("missing: part 1;")),
                 qPrintable(so));
        QCOMPARE(test::runTessera(part(args, target, 1, 3), &so, &se), 0);
        auto expectedWithReadme = expected;
        expectedWithReadme["README.md"] = "kept\n";
        QVERIFY(tree(target) == expectedWithReadme);
        QCOMPARE(test::runTessera(A({ "merge", "--status", target }), &so, &se), 0);
        QVERIFY2(so.contains(QStringLiteral("No parts of a merge or split are under way")), qPrintable(so));
    }

    /// Without one part nothing is published, whether the target is new or holds an older model, and --status
    /// names the missing part (also as JSON).
    void missingPartLeavesTargetUntouched()
    {
        const QStringList args = A({ "--local_dir", actor("fsdp2_llama_w4") });
        for (const bool existing : { false, true }) {
            const std::string parent = test::makeTempDir();
            const std::string target = parent + "/merged";
            std::map<std::string, std::string> before;
            if (existing) {
                fs::create_directories(target);
                test::writeFile(target + "/model.safetensors", "old weights");
                test::writeFile(target + "/config.json", "{\"old\": true}\n");
                before = tree(target);
            }
            QString so, se;
            for (unsigned k : { 0u, 2u, 3u }) {
                QCOMPARE(test::runTessera(part(args, target, k, 4), &so, &se), 0);
                QCOMPARE(fs::exists(target), existing);
            }
            QCOMPARE(test::runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", target,
                                          "--part", "3/4" }), &so, &se), 0);
            QVERIFY2(so.contains(QStringLiteral("Waiting for part 1 of 4")), qPrintable(so));
            if (existing) {
                auto now = tree(target);
                for (auto it = now.begin(); it != now.end();)
                    it = it->first.rfind(".tessera-parts-", 0) == 0 ? now.erase(it) : std::next(it);
                QVERIFY(now == before);
            }
            QCOMPARE(test::runTessera(A({ "merge", "--status", target }), &so, &se), 1);
            QVERIFY2(so.contains(QStringLiteral("part 1: missing")) && so.contains(QStringLiteral("3 done, 1 missing")),
                     qPrintable(so));
            QCOMPARE(test::runTessera(A({ "merge", "--status", target, "--json" }), &so, &se), 1);
            const auto sets = QJsonDocument::fromJson(so.toUtf8()).object().value(QStringLiteral("sets")).toArray();
            QCOMPARE(sets.size(), 1);
            QCOMPARE(sets[0].toObject().value(QStringLiteral("missing")).toArray(), QJsonArray { 1 });
            QCOMPARE(sets[0].toObject().value(QStringLiteral("done")).toArray().size(), 3);
            // The part that completes the set publishes.
            QCOMPARE(test::runTessera(part(args, target, 1, 4), &so, &se), 0);
            QCOMPARE(test::readFile(target + "/model.safetensors"), test::readFile(test::fixture("fsdp2_llama_w4/reference/model.safetensors")));
        }
    }

    /// --status shows what a record or the publishing claim says of its process as data: a pid no process can have
    /// (2^70, negative, text) is "pid unknown" (null in JSON), never a number wrapped to INT64_MIN, a record with one
    /// still counts as done, and the host is escaped.
    void statusShowsRecordedHostAndPidAsData()
    {
        const QStringList args = A({ "--local_dir", actor("fsdp2_llama_w4") });
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/merged";
        QString so, se;
        QCOMPARE(test::runTessera(part(args, target, 0, 2), &so, &se), 0);
        const std::string set = parent + "/" + names(parent).front();
        auto record = nlohmann::json::parse(test::readFile(set + "/part-0-of-2.json"));
        record["host"] = "node\x1b[31m7";
        for (const char* pid : { "1180591620717411303424", "-5", "\"12\"" }) {
            record["pid"] = 0;
            std::string text = record.dump(1);
            text.replace(text.find("\"pid\": 0"), 8, "\"pid\": " + std::string(pid));
            test::writeFile(set + "/part-0-of-2.json", text);
            QCOMPARE(test::runTessera(A({ "merge", "--status", target }), &so, &se), 1);
            QVERIFY2(so.contains(QStringLiteral("1 done, 1 missing")), qPrintable(so));
            QVERIFY2(so.contains(QStringLiteral(" on node\\x1B[31m7, pid unknown)")), qPrintable(so));
            QVERIFY2(!so.contains(QStringLiteral("-9223372036854775808")), qPrintable(so));
            QCOMPARE(test::runTessera(A({ "merge", "--status", target, "--json" }), &so, &se), 1);
            const auto done = QJsonDocument::fromJson(so.toUtf8())[QStringLiteral("sets")][0][QStringLiteral("done")][0];
            QVERIFY2(done[QStringLiteral("pid")].isNull(), qPrintable(so));
            QCOMPARE(done[QStringLiteral("host")].toString(), QStringLiteral("node\x1b[31m7"));
        }
        // Every part recorded and a live process holding the claim: --status names the publisher, pid as data.
        record["part"] = 1;
        test::writeFile(set + "/part-1-of-2.json", record.dump(1));
        test::writeFile(set + "/finishing", "node\x1b[31m7 1180591620717411303424\n");
        const int claim = ::open((set + "/finishing").c_str(), O_RDONLY);
        QVERIFY(claim >= 0 && ::flock(claim, LOCK_EX) == 0);
        QCOMPARE(test::runTessera(A({ "merge", "--status", target }), &so, &se), 1);
        ::close(claim);
        QVERIFY2(so.contains(QStringLiteral("every part is done; node\\x1B[31m7 (pid unknown) is publishing the model")),
                 qPrintable(so));
    }

    /// All parts started at the same moment, several times: exactly one publishes (the claim is atomic), the
    /// others say another process publishes or that they wait, and the model is the single merge's.
    void partsFinishingTogetherPublishOnce()
    {
        const QStringList args = A({ "--local_dir", actor("hsdp_qwen2_2x2"), "--max_shard_size", "50KB" });
        const auto expected = reference(args);
        for (int round = 0; round < 6; ++round) {
            const std::string parent = test::makeTempDir();
            const std::string target = parent + "/merged";
            const unsigned n = 4;
            std::vector<std::unique_ptr<QProcess>> procs;
            for (unsigned k = 0; k < n; ++k) {
                procs.push_back(std::make_unique<QProcess>());
                procs.back()->start(q(test::tesseraBinary()), part(args, target, k, n) + A({ "--json" }));
            }
            int published = 0;
            for (auto& p : procs) {
                QVERIFY(p->waitForFinished(60000));
                QCOMPARE(p->exitCode(), 0);
                const auto j = QJsonDocument::fromJson(p->readAllStandardOutput()).object();
                published += j.value(QStringLiteral("published")).toBool() ? 1 : 0;
            }
            QCOMPARE(published, 1);
            QVERIFY(tree(target) == expected);
            QVERIFY(names(parent) == std::vector<std::string> { "merged" });
        }
    }

    /// The claim of a finisher that died (its lock released) is taken over by the next part to finish.
    void deadFinishersClaimIsTakenOver()
    {
        const QStringList args = A({ "--local_dir", actor("fsdp2_llama_w4") });
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/merged";
        QString so, se;
        QCOMPARE(test::runTessera(part(args, target, 0, 2), &so, &se), 0);
        const auto shared = setFolders(parent);
        QCOMPARE(shared.size(), std::size_t(1));
        test::writeFile(parent + "/" + shared.front() + "/finishing", "elsewhere 12345\n");
        QCOMPARE(test::runTessera(part(args, target, 1, 2) + A({ "--json" }), &so, &se), 0);
        const auto j = QJsonDocument::fromJson(so.toUtf8()).object();
        QVERIFY2(j.value(QStringLiteral("published")).toBool(), qPrintable(so));
        QVERIFY2(so.contains(QStringLiteral("took over publishing from elsewhere 12345")), qPrintable(so));
        QVERIFY(tree(target) == reference(args));
    }

    /// A publish killed after its journal was committed is decided: the next claimant completes it (the old files
    /// it had not replaced yet are replaced, the files of other names are kept) and publishes nothing else. The
    /// journal stays until the set is removed, so a kill before that is recognised again.
    void adoptCompletesADecidedPublish()
    {
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/model";
        const std::string folder = target + "/.tessera-parts-0123456789abcdef/out";
        fs::create_directories(folder + "/.replaced");
        test::writeFile(target + "/README.md", "kept\n");
        // Killed after moving the old model aside and the new one in; config.json and extra.json not moved yet.
        test::writeFile(folder + "/.replaced/model.safetensors", "old weights");
        test::writeFile(target + "/model.safetensors", "new weights");
        test::writeFile(target + "/config.json", "old config");
        test::writeFile(folder + "/config.json", "new config");
        test::writeFile(folder + "/extra.json", "new extra");
        test::writeFile(folder + "/.publish-journal",
                        "tessera-publish-journal 2\nf extra.json\nk model.safetensors\nk config.json\n");
        auto staging = OutputStaging::adopt(target, folder);
        QVERIFY_RESULT(staging);
        QVERIFY(staging->completedEarlier());
        QCOMPARE(test::readFile(target + "/model.safetensors"), std::string("new weights"));
        QCOMPARE(test::readFile(target + "/config.json"), std::string("new config"));
        QCOMPARE(test::readFile(target + "/extra.json"), std::string("new extra"));
        QCOMPARE(test::readFile(target + "/README.md"), std::string("kept\n"));
        QVERIFY(fs::exists(folder + "/.publish-journal"));
        // Held: nobody else can adopt it meanwhile.
        QVERIFY(!OutputStaging::adopt(target, folder));
    }

    /// A finisher killed while it wrote the journal decided nothing: what it left is cleared, the target is as it
    /// was, and the next claimant publishes the folder.
    void adoptClearsAJournalNeverCommitted()
    {
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/model";
        const std::string folder = target + "/.tessera-parts-0123456789abcdef/out";
        fs::create_directories(folder + "/.replaced");
        test::writeFile(target + "/config.json", "old config");
        test::writeFile(folder + "/config.json", "new config");
        test::writeFile(folder + "/model.safetensors", "new weights");
        test::writeFile(folder + "/..publish-journal.tessera-new-12-abcdef", "tessera-publish-journal 2\nk mod");
        {
            auto staging = OutputStaging::adopt(target, folder);
            QVERIFY_RESULT(staging);
            QVERIFY(!staging->completedEarlier());
            QCOMPARE(test::readFile(target + "/config.json"), std::string("old config"));
            QVERIFY(!fs::exists(folder + "/.replaced"));
            QVERIFY(!fs::exists(folder + "/..publish-journal.tessera-new-12-abcdef"));
        }
        auto staging = OutputStaging::adopt(target, folder);
        QVERIFY_RESULT(staging);
        QVERIFY_RESULT(staging->publish({ "model.safetensors", "config.json" }, { "model.safetensors", "config.json" }));
        QCOMPARE(test::readFile(target + "/model.safetensors"), std::string("new weights"));
        QCOMPARE(test::readFile(target + "/config.json"), std::string("new config"));
    }

    /// What interrupted parts left (a set being removed, a set begun long ago and never put in place) goes; a set
    /// being made right now stays.
    void leftoversOfInterruptedPartsAreRemoved()
    {
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/merged";
        const std::string base = parent + "/..merged.tessera-parts-0123456789abcdef";
        for (const char* tail : { ".done-12-34", ".new-56-78", ".new-90-12" }) {
            fs::create_directories(base + tail + "/out");
            fs::permissions(base + tail, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
            test::writeFile(base + tail + "/out/model.safetensors", "leftover");
        }
        fs::last_write_time(base + ".new-56-78", fs::file_time_type::clock::now() - std::chrono::hours(1));
        QString so, se;
        QCOMPARE(test::runTessera(part(A({ "--local_dir", actor("fsdp2_qwen2_w2_fp32") }), target, 0, 2) + A({ "--json" }),
                                  &so, &se), 0);
        QVERIFY(!fs::exists(base + ".done-12-34") && !fs::exists(base + ".new-56-78"));
        QVERIFY(fs::exists(base + ".new-90-12"));
        QVERIFY2(so.contains(QStringLiteral("left by an interrupted part")), qPrintable(so));
    }

    /// While parts of a job are under way for a target, another run into it is refused, naming the job; the job
    /// can be discarded (`--status TARGET --discard`), and then the other run goes ahead.
    void anotherRunWaitsForASetOrItsDiscard()
    {
        const QStringList args = A({ "--local_dir", actor("fsdp2_qwen2_w2_fp32") });
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/merged";
        QString so, se;
        QCOMPARE(test::runTessera(part(args, target, 0, 2), &so, &se), 0);
        const auto shared = setFolders(parent);
        QCOMPARE(shared.size(), std::size_t(1));
        const auto sharedBefore = tree(parent + "/" + shared.front());
        // A plain merge, and parts of another plan (4 parts), are refused and touch nothing.
        for (const auto& other : { withTarget(args, target), part(args, target, 0, 4) }) {
            QCOMPARE(test::runTessera(other, &so, &se), 1);
            QVERIFY2(se.contains(QStringLiteral("is being written by a job split into parts"))
                         && se.contains(QStringLiteral("--discard")),
                     qPrintable(se));
        }
        QVERIFY(tree(parent + "/" + shared.front()) == sharedBefore);
        QVERIFY(!fs::exists(target));
        // The job's own parts go on; discarded, the plain merge goes ahead.
        QCOMPARE(test::runTessera(A({ "merge", "--status", target, "--discard" }), &so, &se), 0);
        QVERIFY2(se.contains(QStringLiteral("discarded")), qPrintable(se));
        QVERIFY(setFolders(parent).empty());
        QCOMPARE(test::runTessera(withTarget(args, target), &so, &se), 0);
        QCOMPARE(names(parent), std::vector<std::string> { "merged" });
        QVERIFY(tree(target) == reference(args));
    }

    /// --part auto from each launcher's environment, and the usage errors.
    void launchersFromEnvironment()
    {
        const QStringList args = A({ "--local_dir", actor("fsdp2_llama_w4") });
        const auto expected = reference(args);
        const std::vector<std::function<std::map<QString, QString>(unsigned)>> launchers {
            [](unsigned k) {
                return std::map<QString, QString> { { QStringLiteral("SLURM_ARRAY_TASK_ID"), QString::number(k + 1) },
                                                    { QStringLiteral("SLURM_ARRAY_TASK_MIN"), QStringLiteral("1") },
                                                    { QStringLiteral("SLURM_ARRAY_TASK_COUNT"), QStringLiteral("3") } };
            },
            [](unsigned k) {
                return std::map<QString, QString> { { QStringLiteral("SLURM_PROCID"), QString::number(k) },
                                                    { QStringLiteral("SLURM_NTASKS"), QStringLiteral("3") } };
            },
            [](unsigned k) {
                return std::map<QString, QString> { { QStringLiteral("JOB_COMPLETION_INDEX"), QString::number(k) } };
            },
            [](unsigned k) {
                return std::map<QString, QString> { { QStringLiteral("PMI_RANK"), QString::number(k) },
                                                    { QStringLiteral("PMI_SIZE"), QStringLiteral("3") } };
            },
            [](unsigned k) {
                return std::map<QString, QString> { { QStringLiteral("OMPI_COMM_WORLD_RANK"), QString::number(k) },
                                                    { QStringLiteral("OMPI_COMM_WORLD_SIZE"), QStringLiteral("3") } };
            },
        };
        for (std::size_t l = 0; l < launchers.size(); ++l) {
            const std::string target = test::makeTempDir() + "/merged";
            for (unsigned k : { 2u, 0u, 1u }) {
                QString so, se;
                QStringList line = withTarget(args, target) + A({ "--part", "auto" });
                if (l == 2)
                    line += A({ "--parts", "3" });
                QCOMPARE(runWithEnv(line, launchers[l](k), &so, &se), 0);
                QCOMPARE(fs::exists(target), k == 1);
            }
            QVERIFY2(tree(target) == expected, qPrintable(QStringLiteral("launcher %1").arg(l)));
        }
        QString so, se;
        const std::string target = test::makeTempDir() + "/merged";
        const QStringList line = withTarget(args, target);
        // Usage errors, before anything is read or written.
        QCOMPARE(runWithEnv(line + A({ "--part", "3/3" }), {}, &so, &se), 2);
        QVERIFY2(se.contains(QStringLiteral("numbered 0 to 2")), qPrintable(se));
        QCOMPARE(runWithEnv(line + A({ "--part", "1-3" }), {}, &so, &se), 2);
        QCOMPARE(runWithEnv(line + A({ "--part", "auto" }),
                            { { QStringLiteral("JOB_COMPLETION_INDEX"), QStringLiteral("1") } }, &so, &se), 2);
        QVERIFY2(se.contains(QStringLiteral("--parts N")), qPrintable(se));
        QCOMPARE(runWithEnv(line + A({ "--part", "auto", "--parts", "4" }),
                            { { QStringLiteral("SLURM_PROCID"), QStringLiteral("1") },
                              { QStringLiteral("SLURM_NTASKS"), QStringLiteral("3") } }, &so, &se), 2);
        QVERIFY2(se.contains(QStringLiteral("disagree")) || se.contains(QStringLiteral("says 3 parts")), qPrintable(se));
        QVERIFY(!fs::exists(target));
        // --dry-run shows the assignment and writes nothing.
        QCOMPARE(runWithEnv(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", target, "--part", "1/3",
                                "--dry-run" }), {}, &so, &se), 0);
        QVERIFY2(so.startsWith(QStringLiteral("Merge in parts ")) && so.contains(QStringLiteral("* part 1:")),
                 qPrintable(so));
        QVERIFY(!fs::exists(target));
    }

    void splitInPartsMatchesTheSingleSplit_data()
    {
        QTest::addColumn<QStringList>("args");
        const std::string hf = test::fixture("fsdp2_llama_w4/reference");
        QTest::newRow("fsdp world 4") << A({ "--hf_dir", hf, "--format", "fsdp", "--world_size", "4" });
        QTest::newRow("dcp world 3") << A({ "--hf_dir", hf, "--format", "dcp", "--world_size", "3" });
        QTest::newRow("megatron tp2 pp2") << A({ "--hf_dir", hf, "--format", "megatron", "--tp", "2", "--pp", "2" });
        QTest::newRow("megatron-lm tp2") << A({ "--hf_dir", hf, "--format", "megatron", "--flavor", "megatron-lm", "--tp", "2" });
        QTest::newRow("megatron-dist tp2 pp2") << A({ "--hf_dir", hf, "--format", "megatron-dist", "--tp", "2", "--pp", "2" });
        QTest::newRow("megatron legacy -> fsdp world 8")
            << A({ "--local_dir", actor("megatron_legacy_qwen2_tp2_pp2"), "--format", "fsdp", "--world_size", "8" });
    }
    /// `tessera split --part K/N` (N = 2, 3, parts in a shuffled order, one run twice): published with the last part
    /// only, the same files and sizes as the single split, the same tensors bit for bit (`tessera diff`; torch.save
    /// archives differ only in their serialization id, which names the folder they were written in), and its run
    /// root's latest_checkpointed_iteration.txt when the single split writes one.
    void splitInPartsMatchesTheSingleSplit()
    {
        QFETCH(QStringList, args);
        QString so, se;
        const std::string single = test::makeTempDir() + "/run/global_step_7/actor";
        QVERIFY2(test::runTessera(A({ "split" }) + args + A({ "--target_dir", single, "--quiet" }), &so, &se) == 0,
                 qPrintable(se));
        std::map<std::string, std::uint64_t> sizes;
        for (const auto& entry : fs::recursive_directory_iterator(single))
            sizes[fs::relative(entry.path(), single).string()] = entry.is_regular_file() ? entry.file_size() : 0;
        std::mt19937 gen(static_cast<unsigned>(qHash(QString::fromLatin1(QTest::currentDataTag()))));
        for (unsigned n : { 2u, 3u }) {
            const std::string root = test::makeTempDir() + "/run";
            const std::string target = root + "/global_step_7/actor";
            std::vector<unsigned> order(n);
            for (unsigned k = 0; k < n; ++k)
                order[k] = k;
            std::shuffle(order.begin(), order.end(), gen);
            bool tooMany = false;
            for (std::size_t i = 0; i < n && !tooMany; ++i) {
                const QStringList line = A({ "split" }) + args
                    + A({ "--target_dir", target, "--quiet", "--part", std::to_string(order[i]) + "/" + std::to_string(n) });
                // A split with fewer files than parts is refused, before anything is written.
                const int code = test::runTessera(line, &so, &se);
                if (code != 0 && se.contains(QStringLiteral("use at most"))) {
                    QVERIFY(!fs::exists(root));
                    tooMany = true;
                    break;
                }
                QVERIFY2(code == 0, qPrintable(se));
                if (i == 0)
                    QVERIFY2(test::runTessera(line, &so, &se) == 0, qPrintable(se));
                QCOMPARE(fs::exists(target), i + 1 == n);
            }
            if (tooMany)
                continue;
            std::map<std::string, std::uint64_t> now;
            for (const auto& entry : fs::recursive_directory_iterator(target)) {
                const std::string rel = fs::relative(entry.path(), target).string();
                now[rel] = entry.is_regular_file() ? entry.file_size() : 0;
                const std::string bytes = entry.is_regular_file() ? test::readFile(entry.path().string()) : "";
                if (entry.is_regular_file() && bytes.rfind("PK", 0) != 0)
                    QVERIFY2(bytes == test::readFile(single + "/" + rel), rel.c_str());
            }
            QVERIFY(now == sizes);
            const std::string singleRoot = fs::path(single).parent_path().parent_path().string();
            QCOMPARE(fs::exists(root + "/latest_checkpointed_iteration.txt"),
                     fs::exists(singleRoot + "/latest_checkpointed_iteration.txt"));
            QVERIFY(names(fs::path(target).parent_path().string()) == std::vector<std::string> { "actor" });
            QVERIFY2(test::runTessera(A({ "diff", single, target }), &so, &se) == 0, qPrintable(so + se));
        }
    }

    void partsOfChangedInputsNeverCombine_data()
    {
        QTest::addColumn<QString>("command");
        QTest::addColumn<QString>("change");
        for (const char* command : { "split", "merge" })
            for (const char* change : { "adapter weights", "lora_alpha", "side file", "config edit" })
                QTest::addRow("%s, %s", command, change) << command << change;
    }
    /// The parts of a split or a merge combine only when they would write the same output. A LoRA adapter whose
    /// weights or alpha change between two parts, a side file edited between them, or a config edit (--dtype on a
    /// float32 model: the same tensors, another config.json) given to one part only, makes another set: the second
    /// part is refused (another job holds the target) and publishes nothing; once the first set is discarded, the
    /// new one writes what a single run writes.
    void partsOfChangedInputsNeverCombine()
    {
        QFETCH(QString, command);
        QFETCH(QString, change);
        const bool lora = change == QLatin1String("adapter weights") || change == QLatin1String("lora_alpha");
        const std::string adapter = test::copyFixtureFolder("lora_llama_w2_fp32/reference_adapter");
        const std::string model = test::copyFixtureFolder("fsdp2_qwen2_w2_fp32/reference");
        QStringList args = A({ command.toStdString() });
        args += lora ? A({ "--local_dir", adapter, "--base_model", test::fixture("lora_llama_w2_fp32/reference") })
                     : A({ "--local_dir", model });
        if (command == QLatin1String("split"))
            args += A({ "--format", "fsdp", "--world_size", "2" });
        else if (lora)
            args += A({ "--lora", "fused" });
        const QStringList first = change == QLatin1String("config edit") ? A({ "--dtype", "fp32" }) : QStringList();
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/out";
        auto line = [&](const QStringList& extra, const std::string& into, const std::string& part) {
            return args + extra + A({ "--target_dir", into, "--quiet" }) + (part.empty() ? QStringList() : A({ "--part", part }));
        };
        QString so, se;
        QVERIFY2(test::runTessera(line(first, target, "0/2"), &so, &se) == 0, qPrintable(se));
        if (change == QLatin1String("adapter weights")) {
            // Another adapter of the same shapes: the last weight's lowest bit differs.
            std::string bytes = test::readFile(adapter + "/adapter_model.safetensors");
            bytes.back() = static_cast<char>(bytes.back() ^ 1);
            test::writeFile(adapter + "/adapter_model.safetensors", bytes);
        } else if (change == QLatin1String("lora_alpha")) {
            std::string config = test::readFile(adapter + "/adapter_config.json");
            const std::string alpha = "\"lora_alpha\": 16";
            const auto at = config.find(alpha);
            QVERIFY(at != std::string::npos);
            config.replace(at, alpha.size(), "\"lora_alpha\": 32");
            test::writeFile(adapter + "/adapter_config.json", config);
        } else if (change == QLatin1String("side file")) {
            test::writeFile(model + "/generation_config.json", "{ \"do_sample\": false }\n");
        }
        const int code = test::runTessera(line({}, target, "1/2"), &so, &se);
        QVERIFY2(!fs::exists(target), "parts of two different outputs were combined");
        QCOMPARE(code, 1);
        QVERIFY2(se.contains(QStringLiteral("is being written by a job split into parts")), qPrintable(se));
        QCOMPARE(setFolders(parent).size(), std::size_t(1));
        QCOMPARE(test::runTessera(A({ "merge", "--status", target, "--discard" }), &so, &se), 0);
        for (const char* part : { "1/2", "0/2" })
            QVERIFY2(test::runTessera(line({}, target, part), &so, &se) == 0, qPrintable(se));
        const std::string single = test::makeTempDir() + "/single";
        QVERIFY2(test::runTessera(line({}, single, ""), &so, &se) == 0, qPrintable(se));
        QVERIFY2(test::runTessera(A({ "diff", single, target }), &so, &se) == 0, qPrintable(so + se));
        if (change == QLatin1String("side file"))
            QCOMPARE(test::readFile(target + (command == QLatin1String("split") ? "/huggingface" : "")
                                    + "/generation_config.json"),
                     std::string("{ \"do_sample\": false }\n"));
    }

    /// A split part killed while it writes leaves the target as it was; --status names it; run again, it completes.
    void killedSplitPartRerunCompletesTheSplit()
    {
        QString so, se;
        const std::string merged = test::makeTempDir() + "/model";
        QVERIFY2(test::runTessera(withTarget(A({ "--local_dir", m_big }), merged), &so, &se) == 0, qPrintable(se));
        const QStringList args = A({ "split", "--hf_dir", merged, "--format", "fsdp", "--world_size", "4", "--quiet" });
        const std::string single = test::makeTempDir() + "/single";
        QCOMPARE(test::runTessera(args + A({ "--target_dir", single }), &so, &se), 0);
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/split";
        const bool killedWhileWriting
            = killWhileWriting(args + A({ "--target_dir", target, "--part", "0/2" }), parent, ".pt");
        if (!killedWhileWriting)
            qInfo("part 0 finished before it could be killed");
        QCOMPARE(test::runTessera(args + A({ "--target_dir", target, "--part", "1/2" }), &so, &se), 0);
        if (killedWhileWriting) {
            QVERIFY(!fs::exists(target));
            QCOMPARE(test::runTessera(A({ "split", "--status", target }), &so, &se), 1);
            QVERIFY2(so.contains(QStringLiteral("part 0: missing")), qPrintable(so));
        }
        QCOMPARE(test::runTessera(args + A({ "--target_dir", target, "--part", "0/2" }), &so, &se), 0);
        QVERIFY(fs::exists(target + "/fsdp_config.json"));
        QVERIFY2(test::runTessera(A({ "diff", single, target }), &so, &se) == 0, qPrintable(so + se));
        QVERIFY(names(parent) == std::vector<std::string> { "split" });
    }

    /// A GGUF export's assignment: every part's byte ranges and the generated tensors tile the data section of
    /// the one file exactly (each tensor with its padding), and the set's id names the outtype, the name and N.
    void ggufAssignmentTilesTheFile()
    {
        auto info = scanCheckpoint(test::fixture("gguf_llama_w2_fp32/reference"));
        QVERIFY_RESULT(info);
        std::set<std::string> ids;
        for (auto type : { GgufOutType::F32, GgufOutType::F16, GgufOutType::Q8_0, GgufOutType::Q4_K_M, GgufOutType::Q2_K })
            for (const char* name : { "", "other" }) {
                GgufOptions options;
                options.outType = type;
                options.name = name;
                auto gguf = planGgufMerge(*info, options);
                QVERIFY_RESULT(gguf);
                const std::uint64_t dataStart = gguf->merge.files.front().header.size();
                // Sampled (sanitizers): 3 parts (one run twice) and 5 (one killed), the cases the others are part of.
        const std::vector<unsigned> counts = test::sampled() ? std::vector<unsigned> { 3, 5 }
                                                               : std::vector<unsigned> { 1, 2, 3, 5 };
        for (unsigned n : counts) {
                    auto parts = planGgufParts(*gguf, n);
                    QVERIFY_RESULT(parts);
                    QVERIFY(ids.insert(parts->plan.id).second);
                    QCOMPARE(planGgufParts(*gguf, n)->plan.id, parts->plan.id);
                    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
                    for (const auto& share : parts->plan.shares)
                        for (const auto& r : share.ranges) {
                            QCOMPARE(r.path, gguf->fileName);
                            spans.push_back({ r.begin, r.end });
                        }
                    for (const auto& g : gguf->generated)
                        spans.push_back({ g.fileOffset, (g.fileOffset + g.bytes.size() + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment });
                    std::sort(spans.begin(), spans.end());
                    std::uint64_t at = dataStart;
                    for (const auto& [begin, end] : spans) {
                        QCOMPARE(begin, at);
                        at = end;
                    }
                    QCOMPARE(at, gguf->fileSize);
                }
            }
    }

    void ggufExportsBitExactInParts_data()
    {
        QTest::addColumn<QStringList>("args");
        for (const char* type : { "f32", "f16", "q8_0" })
            QTest::newRow(type) << ggufArgs(actor("gguf_llama_w2_fp32"), type);
        // Whole super-blocks of 256 (rows of 256 and 768), and the mixture's fallbacks on rows of 128.
        QTest::newRow("llama256 q4_k_m") << ggufArgs(actor("gguf_llama256_w2_bf16"), "q4_k_m");
        if (test::sampled())
            return; // streamed, converted and quantized tensors: the paths the rows below repeat
        QTest::newRow("q4_k_m fallbacks") << ggufArgs(actor("gguf_llama_w2_fp32"), "q4_k_m");
        const std::string families = std::string(TESSERA_TEST_DATA_DIR) + "/gguf_families";
        QTest::newRow("qwen2moe q8_0") << ggufArgs(families + "/qwen2moe", "q8_0");
        QTest::newRow("qwen3_bf16 bf16") << ggufArgs(families + "/qwen3_bf16", "bf16");
        QTest::newRow("llama 3 rope_freqs q8_0") << ggufArgs(llama3RopeModel(), "q8_0");
        QTest::newRow("llama256 q2_k") << ggufArgs(actor("gguf_llama256_w2_bf16"), "q2_k");
        QTest::newRow("llama256 q5_k_m") << ggufArgs(actor("gguf_llama256_w2_bf16"), "q5_k_m");
        QTest::newRow("mixtral q4_0") << ggufArgs(families + "/mixtral", "q4_0");
    }

    /// `--format gguf --part K/N` as the safetensors merges above (checkPartsMatchSingleRun()): the .gguf appears
    /// only with the last part, byte-identical to the single export.
    void ggufExportsBitExactInParts()
    {
        QFETCH(QStringList, args);
        checkPartsMatchSingleRun(args, "export");
    }

    /// A GGUF part killed while it writes its byte ranges of the file: the target stays as it was, --status names
    /// the part, and running it again publishes the file the single export writes.
    void killedGgufPartRerunCompletesTheExport()
    {
        // m_big's model with a Llama config and tokenizer beside it, so it exports as GGUF.
        const std::string source = test::makeTempDir() + "/actor";
        QVERIFY_RESULT(bench::writeCheckpoint(source, 0.03, 2, 64));
        bench::writeLlamaConfig(source + "/huggingface", 0.03, 64);
        const QStringList args = ggufArgs(source, "q8_0");
        const auto expected = reference(args);
        QVERIFY(!expected.empty());
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/merged";
        QVERIFY(killWhileWriting(part(args, target, 1, 3), parent, ".gguf"));
        QString so, se;
        for (unsigned k : { 2u, 0u })
            QVERIFY2(test::runTessera(part(args, target, k, 3), &so, &se) == 0, qPrintable(se));
        QVERIFY(!fs::exists(target));
        QCOMPARE(test::runTessera(A({ "merge", "--status", target }), &so, &se), 1);
        QVERIFY2(so.contains(QStringLiteral("part 1: missing")) && so.contains(QStringLiteral("missing: part 1;")),
                 qPrintable(so));
        QVERIFY2(test::runTessera(part(args, target, 1, 3), &so, &se) == 0, qPrintable(se));
        QVERIFY(tree(target) == expected);
        QCOMPARE(names(parent), std::vector<std::string> { "merged" });
    }

    /// A GGUF part that fails (canceled while it writes) leaves no record and the target untouched; with it
    /// missing nothing is published and --status names it, while an f16 export into the same target is refused
    /// (one job writes a target at a time); run again, the part publishes its export alone, byte-identical to the
    /// single one, and the f16 export can follow.
    void ggufMissingPartLeavesTargetUntouched()
    {
        const std::string source = actor("gguf_llama_w2_fp32");
        const auto q8 = reference(ggufArgs(source, "q8_0"));
        const auto f16 = reference(ggufArgs(source, "f16"));
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/merged";
        fs::create_directories(target);
        test::writeFile(target + "/README.md", "kept\n");
        QString so, se;
        for (unsigned k : { 0u, 2u })
            QCOMPARE(test::runTessera(part(ggufArgs(source, "q8_0"), target, k, 3), &so, &se), 0);
        QCOMPARE(test::runTessera(part(ggufArgs(source, "f16"), target, 1, 3), &so, &se), 1);
        QVERIFY2(se.contains(QStringLiteral("is being written by a job split into parts")), qPrintable(se));

        // Part 1 of the q8_0 export fails halfway (canceled after its first progress report).
        auto info = scanCheckpoint(source);
        QVERIFY_RESULT(info);
        GgufOptions options;
        options.outType = GgufOutType::Q8_0;
        auto gguf = planGgufMerge(*info, options);
        QVERIFY_RESULT(gguf);
        auto parts = planGgufParts(*gguf, 3);
        QVERIFY_RESULT(parts);
        test::CancelAfterFirstReport progress;
        MergeRunOptions run;
        run.threads = 1;
        run.progress = &progress;
        auto failed = runGgufPart(*parts, 1, target, run);
        QVERIFY(!failed);
        QVERIFY(failed.error().isCanceled());

        QCOMPARE(names(target).size(), std::size_t(2)); // README.md and the set
        QCOMPARE(test::readFile(target + "/README.md"), std::string("kept\n"));
        QCOMPARE(test::runTessera(A({ "merge", "--status", target, "--json" }), &so, &se), 1);
        const auto sets = QJsonDocument::fromJson(so.toUtf8()).object().value(QStringLiteral("sets")).toArray();
        QCOMPARE(sets.size(), 1);
        QCOMPARE(sets[0].toObject().value(QStringLiteral("id")).toString(), QString::fromStdString(parts->plan.id));
        QCOMPARE(sets[0].toObject().value(QStringLiteral("missing")).toArray(), QJsonArray { 1 });
        QCOMPARE(test::runTessera(A({ "merge", "--status", target }), &so, &se), 1);
        QVERIFY2(so.contains(QStringLiteral("part 1: missing")), qPrintable(so));

        // Run again, it completes the q8_0 set; then the f16 export may write the target.
        QCOMPARE(test::runTessera(part(ggufArgs(source, "q8_0"), target, 1, 3), &so, &se), 0);
        auto expected = q8;
        expected["README.md"] = "kept\n";
        QVERIFY(tree(target) == expected);
        for (unsigned k : { 2u, 0u, 1u })
            QCOMPARE(test::runTessera(part(ggufArgs(source, "f16"), target, k, 3), &so, &se), 0);
        for (const auto& [name, bytes] : f16)
            QCOMPARE(test::readFile(target + "/" + name), bytes);
        // --dry-run shows the byte ranges of the file and writes nothing.
        const std::string fresh = test::makeTempDir() + "/merged";
        QCOMPARE(test::runTessera(A({ "merge" }) + ggufArgs(source, "q8_0")
                                      + A({ "--target_dir", fresh, "--part", "1/3", "--dry-run" }), &so, &se), 0);
        QVERIFY2(so.startsWith(QStringLiteral("GGUF export in parts ")) && so.contains(QStringLiteral("* part 1:"))
                     && so.contains(QStringLiteral(".gguf bytes ")),
                 qPrintable(so));
        QVERIFY(!fs::exists(fresh));
    }

    /// mpirun (Open MPI, as Debian's openmpi-bin installs it) starts the parts of a merge and of a GGUF export;
    /// skipped when it is not installed.
    void mpirunStartsTheParts()
    {
        const QString mpirun = QStandardPaths::findExecutable(QStringLiteral("mpirun"));
        if (mpirun.isEmpty())
            QSKIP("mpirun is not installed (Debian: apt-get install openmpi-bin)");
        // A safetensors merge, and a q8_0 GGUF export (byte ranges of one file).
        for (const QStringList& args : { A({ "--local_dir", actor("megatron_legacy_qwen2_tp2_pp2") }),
                                         ggufArgs(actor("gguf_llama_w2_fp32"), "q8_0") }) {
            const std::string target = test::makeTempDir() + "/merged";
            QStringList line = A({ "-n", "3", "--oversubscribe" });
            if (::geteuid() == 0)
                line += A({ "--allow-run-as-root" });
            line += A({ test::tesseraBinary() }) + withTarget(args, target) + A({ "--part", "auto" });
            QProcess p;
            p.start(mpirun, line);
            QVERIFY(p.waitForFinished(120000));
            QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0,
                     qPrintable(QString::fromUtf8(p.readAllStandardError())));
            QVERIFY(tree(target) == reference(args));
        }
    }

private:
    /// Runs the merge `args` as N = 1, 2, 3, 5 parts in a shuffled order; for N = 3 the first part runs twice, for
    /// N = 5 one part is killed at a random moment and run again. The target appears only with the last part,
    /// bit-identical to the single run (`what`: "merge" or "export"), and nothing is left beside or inside it.
    void checkPartsMatchSingleRun(const QStringList& args, const char* what)
    {
        const auto expected = reference(args);
        QVERIFY(!expected.empty());
        std::mt19937 gen(static_cast<unsigned>(qHash(QString::fromLatin1(QTest::currentDataTag()))));
        for (unsigned n : { 1u, 2u, 3u, 5u }) {
            const std::string parent = test::makeTempDir();
            const std::string target = parent + "/merged";
            std::vector<unsigned> order(n);
            for (unsigned k = 0; k < n; ++k)
                order[k] = k;
            std::shuffle(order.begin(), order.end(), gen);
            for (std::size_t i = 0; i < order.size(); ++i) {
                const unsigned k = order[i];
                if (n == 5 && i == 1) {
                    // Killed at a random moment (maybe before it wrote anything, maybe after it was done).
                    QProcess p;
                    p.start(q(test::tesseraBinary()), part(args, target, k, n));
                    QVERIFY(p.waitForStarted());
                    QThread::msleep(static_cast<unsigned long>(gen() % 120));
                    if (p.state() != QProcess::NotRunning)
                        ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
                    QVERIFY(p.waitForFinished(30000));
                    QVERIFY2(!fs::exists(target), "published with parts missing");
                }
                QString so, se;
                QCOMPARE(test::runTessera(part(args, target, k, n), &so, &se), 0);
                if (n == 3 && i == 0) {
                    // Run twice: the second run finds its bytes recorded, checks them against their CRC-32s (read
                    // back now, against the ones combined while they were written) and rewrites nothing.
                    QCOMPARE(test::runTessera(part(args, target, k, n) + A({ "--json" }), &so, &se), 0);
                    const auto again = QJsonDocument::fromJson(so.toUtf8()).object();
                    QVERIFY2(again.value(QStringLiteral("already_done")).toBool(), qPrintable(so + se));
                    QCOMPARE(again.value(QStringLiteral("bytes_written")).toInt(), 0);
                }
                if (i + 1 < order.size()) {
                    QVERIFY2(!fs::exists(target), qPrintable(QStringLiteral("published after %1 of %2 parts").arg(i + 1).arg(n)));
                } else {
                    QVERIFY2(tree(target) == expected, qPrintable(QStringLiteral("N=%1 differs from the single %2").arg(n).arg(QLatin1String(what))));
                    QCOMPARE(names(parent), std::vector<std::string> { "merged" });
                }
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestParts)
#include "tst_parts.moc"
