// SPDX-License-Identifier: GPL-3.0-or-later
// What Tessera publishes, checked by opening what was published: only the files a writer lists and prints, each a
// regular file it wrote; nothing read from outside the checkpoint unasked; nothing written outside the target; one
// run per target at a time; a job in parts publishes only bytes it checked. The kills are tst_crash_points'.

#include "testutil.h"

#include "publish/staged_files.h"
#include "publish/target_lock.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace fs = std::filesystem;
using namespace tessera;
using test::A;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

std::string actor(const std::string& fixture) { return test::fixture(fixture + "/global_step_10/actor"); }

/// A writable copy of a fixture's actor folder: its rank files linked (they are only read), the rest copied.
std::string actorCopy(const std::string& fixture)
{
    const std::string dir = test::makeTempDir() + "/global_step_10/actor";
    fs::create_directories(dir);
    for (const auto& entry : fs::directory_iterator(actor(fixture))) {
        const fs::path to = fs::path(dir) / entry.path().filename();
        if (entry.is_regular_file() && entry.path().extension() == ".pt")
            fs::create_symlink(entry.path(), to);
        else
            fs::copy(entry.path(), to, fs::copy_options::recursive);
    }
    return dir;
}

/// Every entry below `dir`, by relative path: "file", "folder", "link" or "other".
std::map<std::string, std::string> entries(const std::string& dir)
{
    std::map<std::string, std::string> found;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const auto status = it->symlink_status();
        found[it->path().lexically_relative(dir).string()] = fs::is_symlink(status) ? "link"
            : fs::is_regular_file(status)                                           ? "file"
            : fs::is_directory(status)                                              ? "folder"
                                                                                    : "other";
    }
    return found;
}

/// True when some file below `dir` holds `needle`.
bool anyFileHolds(const std::string& dir, const std::string& needle)
{
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file() && test::readFile(it->path().string()).find(needle) != std::string::npos)
            return true;
    return false;
}

QJsonObject jsonOf(const QString& text) { return QJsonDocument::fromJson(text.toUtf8()).object(); }

/// The set id a `--part` job into `target` gets (its --dry-run says).
std::string setIdOf(const QStringList& command, const std::string& target)
{
    QString out, err;
    test::runTessera(command + A({ "--target_dir", target, "--part", "0/2", "--dry-run", "--json" }), &out, &err);
    return jsonOf(out).value(QStringLiteral("id")).toString().toStdString();
}

} // namespace

class TestPublish : public QObject {
    Q_OBJECT

private Q_SLOTS:
    /// The property every writer keeps: the published folder holds exactly the files the command printed, each a
    /// regular file, and nothing of the run's own (staging, shared folder) is left in it.
    void everyWriterPublishesExactlyWhatItPrints_data()
    {
        QTest::addColumn<QStringList>("command");
        QTest::addColumn<int>("parts");
        const std::string demo = actor("fsdp2_llama_w4");
        const std::string gguf = actor("gguf_llama_w2_fp32");
        const std::string lora = actor("lora_llama_w2_fp32");
        const std::string hf = test::fixture("fsdp2_llama_w4/reference");
        const std::vector<std::pair<const char*, QStringList>> commands {
            { "merge", A({ "merge", "--local_dir", demo }) },
            { "merge sharded", A({ "merge", "--local_dir", demo, "--max_shard_size", "100KB" }) },
            { "merge with a report", A({ "merge", "--local_dir", demo, "--save_intermediate" }) },
            { "LoRA fused and adapter", A({ "merge", "--local_dir", lora, "--lora", "both" }) },
            { "GGUF", A({ "merge", "--local_dir", gguf, "--format", "gguf", "--outtype", "q8_0" }) },
            { "split fsdp", A({ "split", "--hf_dir", hf, "--format", "fsdp", "--world_size", "3" }) },
            { "split dcp", A({ "split", "--local_dir", demo, "--format", "dcp", "--world_size", "2" }) },
            { "split megatron", A({ "split", "--hf_dir", hf, "--format", "megatron", "--tp", "2", "--pp", "2" }) },
            { "split torch_dist", A({ "split", "--hf_dir", hf, "--format", "megatron-dist", "--tp", "2" }) },
        };
        for (const auto& [name, command] : commands) {
            QTest::newRow(name) << command << 1;
            if (std::string(name) != "merge with a report")
                QTest::newRow((std::string(name) + " in parts").c_str()) << command << 2;
        }
    }

    void everyWriterPublishesExactlyWhatItPrints()
    {
        QFETCH(QStringList, command);
        QFETCH(int, parts);
        const std::string target = test::makeTempDir() + "/out";
        QJsonArray printed;
        for (int k = 0; k < parts; ++k) {
            QStringList line = command + A({ "--target_dir", target, "--json" });
            if (parts > 1)
                line << A({ "--part", std::to_string(k) + "/" + std::to_string(parts) });
            QString out, err;
            QVERIFY2(test::runTessera(line, &out, &err) == 0, qPrintable(err));
            const auto files = jsonOf(out).value(QStringLiteral("files")).toArray();
            if (!files.isEmpty())
                printed = files;
        }
        std::set<std::string> listed;
        for (const auto& f : printed)
            listed.insert(f.toString().toStdString());
        QVERIFY(!listed.empty());
        std::set<std::string> published;
        for (const auto& [path, kind] : entries(target)) {
            QVERIFY2(kind == "file" || kind == "folder", qPrintable(q(path + " is a " + kind)));
            if (kind == "file")
                published.insert(path);
        }
        QVERIFY2(published == listed, qPrintable(q("published " + std::to_string(published.size()) + " files, printed "
                                                   + std::to_string(listed.size()))));
    }

    /// A config folder's file that is a link out of it (a private file, /etc/shadow) is never read: not copied by a
    /// merge, a split or a merge in parts, not embedded by a GGUF export; the plan says so. Checked in the output.
    void sideFileLinksOutAreNeverRead_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QStringList>("options");
        QTest::addColumn<int>("parts");
        QTest::newRow("merge") << QStringLiteral("fsdp2_llama_w4") << QStringList {} << 1;
        QTest::newRow("merge in parts") << QStringLiteral("fsdp2_llama_w4") << QStringList {} << 2;
        QTest::newRow("split") << QStringLiteral("fsdp2_llama_w4") << A({ "--format", "dcp", "--world_size", "2" }) << 1;
        QTest::newRow("split in parts") << QStringLiteral("fsdp2_llama_w4") << A({ "--format", "dcp", "--world_size", "2" })
                                        << 2;
        QTest::newRow("GGUF") << QStringLiteral("gguf_llama_w2_fp32") << A({ "--format", "gguf" }) << 1;
    }

    void sideFileLinksOutAreNeverRead()
    {
        QFETCH(QString, fixture);
        QFETCH(QStringList, options);
        QFETCH(int, parts);
        const std::string dir = actorCopy(fixture.toStdString());
        const std::string secret = test::makeTempDir() + "/secret.txt";
        test::writeFile(secret, "PRIVATE-KEY-DO-NOT-SHIP");
        ::chmod(secret.c_str(), 0600);
        fs::create_symlink(secret, dir + "/huggingface/tokenizer_extra.json");
        fs::create_symlink(secret, dir + "/huggingface/chat_template.jinja");
        fs::create_symlink(secret, dir + "/huggingface/helper.py");
        const bool split = options.contains(QStringLiteral("dcp"));
        const std::string target = test::makeTempDir() + "/out";
        QString out, err, allErr;
        for (int k = 0; k < parts; ++k) {
            QStringList line = A({ split ? "split" : "merge", "--local_dir", dir, "--target_dir", target }) + options;
            if (parts > 1)
                line << A({ "--part", std::to_string(k) + "/" + std::to_string(parts) });
            QVERIFY2(test::runTessera(line, &out, &err) == 0, qPrintable(err));
            allErr += err;
        }
        QVERIFY(fs::exists(target));
        QVERIFY2(!anyFileHolds(target, "PRIVATE-KEY-DO-NOT-SHIP"), "a file outside the checkpoint was published");
        for (const auto& [path, kind] : entries(target))
            QVERIFY2(path.find("tokenizer_extra.json") == std::string::npos && path.find("helper.py") == std::string::npos,
                     path.c_str());
        QVERIFY2(allErr.contains(QStringLiteral("chat_template.jinja: a symbolic link that leads out of the config folder")),
                 qPrintable(allErr));
        // Links that stay inside the folder are fine.
        fs::create_symlink("config.json", dir + "/huggingface/tokenizer_alias.json");
        fs::remove(dir + "/huggingface/chat_template.jinja");
        fs::remove(dir + "/huggingface/helper.py");
        fs::remove(dir + "/huggingface/tokenizer_extra.json");
        if (split || parts > 1)
            return;
        const std::string second = test::makeTempDir() + "/out";
        QVERIFY2(test::runTessera(A({ "merge", "--local_dir", dir, "--target_dir", second }) + options, &out, &err) == 0,
                 qPrintable(err));
        if (options.isEmpty())
            QCOMPARE(test::readFile(second + "/tokenizer_alias.json"), test::readFile(dir + "/huggingface/config.json"));
    }

    /// A config folder of the checkpoint that is itself a link out of it (huggingface → someone's project folder)
    /// brings nothing in unasked: a problem that names --hf_model_path; given that, the folder is used.
    void linkedConfigFolderIsNotUsedUnasked()
    {
        const std::string dir = actorCopy("fsdp2_llama_w4");
        const std::string elsewhere = test::makeTempDir() + "/project";
        fs::rename(dir + "/huggingface", elsewhere);
        test::writeFile(elsewhere + "/train.py", "print('private')\n");
        fs::create_symlink(elsewhere, dir + "/huggingface");
        QString out, err;
        QCOMPARE(test::runTessera(A({ "inspect", dir }), &out, &err), 1);
        QVERIFY2(out.contains(QStringLiteral("outside the checkpoint")) && out.contains(QStringLiteral("--hf_model_path")),
                 qPrintable(out));
        const std::string target = test::makeTempDir() + "/out";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", dir, "--target_dir", target }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("--hf_model_path")), qPrintable(err));
        QVERIFY(!fs::exists(target));
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", dir, "--target_dir", target, "--hf_model_path", elsewhere }),
                                  &out, &err),
                 0);
        QVERIFY(fs::exists(target + "/config.json") && fs::exists(target + "/train.py"));
    }

    /// A Hugging Face hub cache links each file of a snapshot to the repo's blobs/: those links stay inside the repo
    /// and are followed (however the snapshot's path is typed); one that leads out of the repo is not.
    void hubCacheSnapshotsAreRead()
    {
        const std::string repo = test::makeTempDir() + "/models--org--llama";
        const std::string snapshot = repo + "/snapshots/0123abcd";
        fs::create_directories(repo + "/blobs");
        fs::create_directories(snapshot);
        const std::string hf = actor("fsdp2_llama_w4") + "/huggingface";
        int blob = 0;
        for (const auto& entry : fs::directory_iterator(hf)) {
            const std::string name = "blob" + std::to_string(blob++);
            fs::copy_file(entry.path(), repo + "/blobs/" + name);
            fs::create_symlink("../../blobs/" + name, snapshot + "/" + entry.path().filename().string());
        }
        const std::string secret = test::makeTempDir() + "/secret";
        test::writeFile(secret, "PRIVATE");
        fs::create_symlink(secret, snapshot + "/tokenizer_extra.json");
        const std::string target = test::makeTempDir() + "/out";
        QString out, err;
        QVERIFY2(test::runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", target,
                                      "--hf_model_path", snapshot + "/" }),
                                  &out, &err)
                     == 0,
                 qPrintable(err));
        for (const auto& entry : fs::directory_iterator(hf))
            QCOMPARE(test::readFile(target + "/" + entry.path().filename().string()),
                     test::readFile(entry.path().string()));
        QVERIFY(!fs::exists(target + "/tokenizer_extra.json"));
        QVERIFY2(err.contains(QStringLiteral("tokenizer_extra.json: a symbolic link that leads out")), qPrintable(err));
    }

    /// A link planted where a part writes (the shared folder's name can be guessed) is never written through, a file
    /// planted there is never published, and a shared folder someone else can write is not used.
    void plantedFilesInASetAreRefused_data()
    {
        QTest::addColumn<QString>("plant");
        QTest::newRow("link at the model file") << QStringLiteral("link");
        QTest::newRow("extra file in out/") << QStringLiteral("extra");
        QTest::newRow("folder writable by others") << QStringLiteral("mode");
        QTest::newRow("the set folder a link") << QStringLiteral("setlink");
    }

    void plantedFilesInASetAreRefused()
    {
        QFETCH(QString, plant);
        const QStringList merge = A({ "merge", "--local_dir", actor("fsdp2_llama_w4") });
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/model";
        const std::string set = parent + "/.model.tessera-parts-" + setIdOf(merge, target);
        const std::string victim = test::makeTempDir() + "/victim.txt";
        test::writeFile(victim, "untouched\n");
        if (plant == QLatin1String("setlink")) {
            const std::string elsewhere = test::makeTempDir() + "/elsewhere";
            fs::create_directories(elsewhere + "/out");
            fs::create_symlink(elsewhere, set);
        } else {
            fs::create_directories(set + "/out");
            fs::permissions(set, plant == QLatin1String("mode") ? fs::perms::all : fs::perms::owner_all);
            if (plant == QLatin1String("link"))
                fs::create_symlink(victim, set + "/out/model.safetensors");
            if (plant == QLatin1String("extra"))
                test::writeFile(set + "/out/extra.py", "import os\n");
        }
        QString out, err;
        int failed = 0;
        for (const char* k : { "0/2", "1/2" })
            failed += test::runTessera(merge + A({ "--target_dir", target, "--part", k }), &out, &err) != 0;
        QVERIFY2(failed > 0, "a planted shared folder was used");
        QCOMPARE(test::readFile(victim), std::string("untouched\n"));
        QVERIFY(!fs::exists(target) || !fs::is_symlink(target + "/model.safetensors"));
        QVERIFY(!fs::exists(target + "/extra.py"));
        QVERIFY(!fs::exists(target + "/config.json"));
    }

    /// The split's tracker beside a run's steps is replaced through a fresh, exclusive name: a link planted at the
    /// old fixed name is not written through.
    void trackerIsNotWrittenThroughAPlantedLink()
    {
        const std::string root = test::makeTempDir() + "/run";
        fs::create_directories(root);
        const std::string victim = test::makeTempDir() + "/victim.txt";
        test::writeFile(victim, "untouched\n");
        fs::create_symlink(victim, root + "/latest_checkpointed_iteration.txt.tessera-new");
        QString out, err;
        QVERIFY2(test::runTessera(A({ "split", "--hf_dir", test::fixture("fsdp2_llama_w4/reference"), "--target_dir",
                                      root + "/global_step_7/actor", "--format", "fsdp", "--world_size", "2" }),
                                  &out, &err)
                     == 0,
                 qPrintable(err));
        QCOMPARE(test::readFile(victim), std::string("untouched\n"));
        QCOMPARE(test::readFile(root + "/latest_checkpointed_iteration.txt"), std::string("7"));
    }

    /// A shared file damaged between parts (removed, cut short, one byte flipped) is found by the part that would
    /// publish: it refuses, names the part to run again, and once that part has run, the set publishes the model.
    void damageBetweenPartsIsNeverPublished_data()
    {
        QTest::addColumn<QString>("damage");
        QTest::newRow("removed") << QStringLiteral("removed");
        QTest::newRow("cut short") << QStringLiteral("truncated");
        QTest::newRow("one byte flipped") << QStringLiteral("flipped");
    }

    void damageBetweenPartsIsNeverPublished()
    {
        QFETCH(QString, damage);
        const QStringList merge = A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--quiet" });
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/model";
        QString out, err;
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target, "--part", "0/2" }), &out, &err), 0);
        const std::string file = parent + "/.model.tessera-parts-" + setIdOf(merge, target) + "/out/model.safetensors";
        QVERIFY(fs::exists(file));
        if (damage == QLatin1String("removed")) {
            fs::remove(file);
        } else if (damage == QLatin1String("truncated")) {
            fs::resize_file(file, fs::file_size(file) / 3);
        } else {
            std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 4));
            f.put('\x5a');
        }
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target, "--part", "1/2" }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("run part 0/2 again")), qPrintable(err));
        QVERIFY(!fs::exists(target));
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target, "--part", "0/2" }), &out, &err), 0);
        QCOMPARE(test::readFile(target + "/model.safetensors"),
                 test::readFile(test::fixture("fsdp2_llama_w4/reference/model.safetensors")));
    }

    /// N parts are bounded by the work there is, before anything is written; a target path that is not UTF-8 is a
    /// target like any other.
    void partsAreBoundedAndAnyPathWorks()
    {
        const QStringList merge = A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--quiet" });
        const std::string parent = test::makeTempDir();
        QString out, err;
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", parent + "/m", "--part", "5/1000000" }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("use at most 39")), qPrintable(err));
        QCOMPARE(test::runTessera(A({ "split", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", parent + "/s",
                                      "--format", "fsdp", "--world_size", "2", "--part", "0/1000" }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("use at most")), qPrintable(err));
        QVERIFY(fs::is_empty(parent));
        // A Latin-1 byte in the target's path: the parts run from inside that folder (a command line passes no
        // bytes that are not text), so the absolute target they record holds it.
        const std::string latin = parent + "/mod\xe8le";
        fs::create_directories(latin);
        const fs::path here = fs::current_path();
        fs::current_path(latin);
        int failed = 0;
        for (const char* k : { "0/2", "1/2" })
            failed += test::runTessera(merge + A({ "--target_dir", "out", "--part", k }), &out, &err) != 0;
        fs::current_path(here);
        QVERIFY2(failed == 0, qPrintable(err));
        QVERIFY(fs::exists(latin + "/out/model.safetensors"));
    }

    /// A target another run is writing is refused, naming the run; a lock left by a run that died is taken over.
    void oneRunWritesATargetAtATime()
    {
        const QStringList merge = A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--quiet" });
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/model";
        const std::string lock = parent + "/.model.tessera-lock";
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        std::string start;
        {
            std::ifstream stat("/proc/self/stat");
            std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
            std::istringstream fields(text.substr(text.rfind(')') + 2));
            for (int i = 3; i <= 22 && fields >> start; ++i) { }
        }
        std::string boot;
        std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
        auto writeLock = [&](const std::string& who, long long pid, const std::string& since) {
            test::writeFile(lock, "tessera-lock 1\nkind run\nwhat merge\nset \nhost " + who + "\nboot " + boot
                                      + "\npid " + std::to_string(pid) + "\nstart " + since + "\nsince 1764770000\n");
        };
        QString out, err;
        // This test's own process holds it: a live run on this host.
        writeLock(host, ::getpid(), start);
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("is being written by another run (pid ") + QString::number(::getpid())),
                 qPrintable(err));
        QVERIFY(!fs::exists(target));
        // The dry run says the same.
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target, "--dry-run" }), &out, &err), 1);
        // A pid that now names another process (its start time differs) is a dead run's.
        writeLock(host, ::getpid(), "1");
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target }), &out, &err), 0);
        QVERIFY(!fs::exists(lock));
        // Another host's run that stopped renewing its lock two minutes ago is taken over; one that renews is not.
        writeLock("elsewhere.example", 4242, "1");
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target }), &out, &err), 1);
        const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(3);
        fs::last_write_time(lock, old);
        QCOMPARE(test::runTessera(merge + A({ "--target_dir", target }), &out, &err), 0);
    }

    /// A run killed while taking or judging a lock leaves its temporary file beside the target; the next run to lock
    /// that target removes those older than ten minutes (a live run's lasts a moment) and touches nothing else.
    void killedLockTemporariesAreRemoved()
    {
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/model";
        const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(11);
        std::vector<std::string> leftovers, kept;
        for (const char* tag : { "new", "probe", "tessera-void", "tessera-new" }) {
            leftovers.push_back(parent + "/..model.tessera-lock." + tag + "-4242-abcdefghijkl");
            kept.push_back(parent + "/..model.tessera-lock." + tag + "-4243-recentrecent"); // another run's, now
        }
        kept.push_back(parent + "/..model.tessera-lock.other-4242-abcdefghijkl"); // not a name a lock makes
        kept.push_back(parent + "/notes.txt");
        for (const auto& path : leftovers)
            test::writeFile(path, "tessera-lock 1\n");
        for (const auto& path : kept)
            test::writeFile(path, "tessera-lock 1\n");
        for (const auto& path : leftovers)
            fs::last_write_time(path, old);
        fs::last_write_time(kept.back(), old);
        fs::last_write_time(kept[kept.size() - 2], old);
        QString out, err;
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", target,
                                      "--quiet" }),
                                  &out, &err),
                 0);
        for (const auto& path : leftovers)
            QVERIFY2(!fs::exists(path), path.c_str());
        for (const auto& path : kept)
            QVERIFY2(fs::exists(path), path.c_str());
    }

    /// Two merges started into one target at once: one writes it, the other is refused (by the lock, or, if the
    /// first was already done, by the weight files it finds); the target holds one model, whole.
    void twoMergesAtOnceNeverMix()
    {
        const std::string target = test::makeTempDir() + "/model";
        QProcess a, b;
        a.start(q(test::tesseraBinary()), A({ "merge", "--local_dir", actor("hsdp_qwen2_2x2"), "--target_dir", target,
                                              "--max_shard_size", "50KB", "--quiet" }));
        b.start(q(test::tesseraBinary()), A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", target,
                                              "--quiet" }));
        QVERIFY(a.waitForFinished(60000) && b.waitForFinished(60000));
        QCOMPARE((a.exitCode() == 0 ? 1 : 0) + (b.exitCode() == 0 ? 1 : 0), 1);
        const bool sharded = a.exitCode() == 0;
        QCOMPARE(fs::exists(target + "/model.safetensors.index.json"), sharded);
        QCOMPARE(fs::exists(target + "/model.safetensors"), !sharded);
    }

    /// A target that is a folder the run reads, holds one, or lies inside one is refused before anything is written.
    void targetApartFromTheSource_data()
    {
        QTest::addColumn<QString>("where");
        for (const char* where : { "the checkpoint", "inside the checkpoint", "above the checkpoint", "the config folder",
                                   "a Hugging Face source" })
            QTest::newRow(where) << QString::fromUtf8(where);
    }

    void targetApartFromTheSource()
    {
        QFETCH(QString, where);
        const std::string dir = actorCopy("fsdp2_llama_w4");
        QStringList command = A({ "merge", "--local_dir", dir, "--dtype", "bf16" });
        std::string target;
        if (where == QLatin1String("the checkpoint"))
            target = dir;
        else if (where == QLatin1String("inside the checkpoint"))
            target = dir + "/merged";
        else if (where == QLatin1String("above the checkpoint"))
            target = fs::path(dir).parent_path().parent_path().string();
        else if (where == QLatin1String("the config folder"))
            target = dir + "/huggingface";
        else {
            const std::string hf = test::makeTempDir() + "/hf";
            fs::copy(test::fixture("fsdp2_llama_w4/reference"), hf, fs::copy_options::recursive);
            command = A({ "merge", "--local_dir", hf, "--dtype", "bf16" });
            target = hf;
        }
        const auto before = entries(fs::path(dir).parent_path().parent_path().string());
        QString out, err;
        QCOMPARE(test::runTessera(command + A({ "--target_dir", target }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("the run reads")), qPrintable(err));
        QVERIFY(entries(fs::path(dir).parent_path().parent_path().string()) == before);
    }

    /// The check under the publish: a staging folder is published only when it holds exactly the listed files.
    void stagedFilesAreExactlyTheList()
    {
        const std::string dir = test::makeTempDir() + "/staging";
        fs::create_directories(dir + "/lora_adapter");
        test::writeFile(dir + "/model.safetensors", "m");
        test::writeFile(dir + "/lora_adapter/adapter_config.json", "{}");
        auto names = checkStagedFiles(dir, { "model.safetensors", "lora_adapter/adapter_config.json" });
        QVERIFY_RESULT(names);
        QCOMPARE(*names, (std::vector<std::string> { "model.safetensors", "lora_adapter" }));
        test::writeFile(dir + "/planted.py", "x");
        QVERIFY(!checkStagedFiles(dir, { "model.safetensors", "lora_adapter/adapter_config.json" }));
        fs::remove(dir + "/planted.py");
        fs::remove(dir + "/model.safetensors");
        fs::create_symlink("/etc/hostname", dir + "/model.safetensors");
        auto refused = checkStagedFiles(dir, { "model.safetensors", "lora_adapter/adapter_config.json" });
        QVERIFY(!refused);
        QVERIFY2(refused.error().message.find("a symbolic link") != std::string::npos, refused.error().message.c_str());
        fs::remove(dir + "/model.safetensors");
        test::writeFile(dir + "/elsewhere", "e");
        fs::create_hard_link(dir + "/elsewhere", dir + "/model.safetensors");
        QVERIFY(!checkStagedFiles(dir, { "model.safetensors", "elsewhere", "lora_adapter/adapter_config.json" }));
    }
};

QTEST_GUILESS_MAIN(TestPublish)
#include "tst_publish.moc"
