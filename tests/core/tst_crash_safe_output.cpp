// SPDX-License-Identifier: GPL-3.0-or-later
// The output of a merge appears complete or not at all: a kill at any moment, a full disk, a target that cannot
// take the output, a failure while publishing. What the target held before is never mixed with a partial model.

#include "testutil.h"

#include "../../bench/synthetic_checkpoint.h"
#include "formats/safetensors_reader.h"
#include "publish/output_staging.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QRandomGenerator>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <string>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// Every regular file of a folder (not below it) with its bytes.
std::map<std::string, std::string> folderFiles(const std::string& dir)
{
    std::map<std::string, std::string> files;
    if (!fs::is_directory(dir))
        return files;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file())
            files[entry.path().filename().string()] = test::readFile(entry.path().string());
    return files;
}

/// Hidden folders (temporary folders of runs) in `dir`.
std::vector<std::string> hiddenFolders(const std::string& dir)
{
    std::vector<std::string> found;
    if (!fs::is_directory(dir))
        return found;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_directory() && entry.path().filename().string()[0] == '.')
            found.push_back(entry.path().string());
    return found;
}

QStringList mergeArgs(const std::string& checkpoint, const std::string& target)
{
    return { QStringLiteral("merge"), QStringLiteral("--local_dir"), q(checkpoint), QStringLiteral("--target_dir"),
             q(target), QStringLiteral("--quiet") };
}

/// A read-only view of `dir` at `mountPoint` (a bind mount), so even root cannot write there; false when the
/// system does not let this process mount.
bool bindReadOnly(const std::string& dir, const std::string& mountPoint)
{
    if (::mount(dir.c_str(), mountPoint.c_str(), nullptr, MS_BIND, nullptr) != 0)
        return false;
    if (::mount(nullptr, mountPoint.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
        ::umount2(mountPoint.c_str(), MNT_DETACH);
        return false;
    }
    return true;
}

/// Unmounts at the end of a test, however it ends.
struct Unmount {
    std::string path;
    ~Unmount()
    {
        if (!path.empty())
            ::umount2(path.c_str(), MNT_DETACH);
    }
};

} // namespace

class TestCrashSafeOutput : public QObject {
    Q_OBJECT

    std::string m_checkpoint;                      ///< a synthetic FSDP2 checkpoint big enough to interrupt
    std::map<std::string, std::string> m_reference; ///< its complete merge, file by file
    qint64 m_mergeMs = 0;

private Q_SLOTS:
    void initTestCase()
    {
        m_checkpoint = test::makeTempDir() + "/actor";
        // About 8 MB in 2 ranks: a merge long enough (with its flushes) to be killed at many different moments,
        // short enough for 40 runs.
        QVERIFY_RESULT(bench::writeCheckpoint(m_checkpoint, 0.005, 2, 64));
        // The fastest of three merges: the first pays for cold caches, and a time measured too long lets later
        // merges finish before the kill lands.
        std::string target;
        for (int run = 0; run < 3; ++run) {
            target = test::makeTempDir() + "/reference";
            QElapsedTimer timer;
            timer.start();
            QString out, err;
            QCOMPARE(test::runTessera(mergeArgs(m_checkpoint, target), &out, &err), 0);
            m_mergeMs = run == 0 ? timer.elapsed() : std::min(m_mergeMs, timer.elapsed());
        }
        qInfo("a complete merge takes %lld ms", static_cast<long long>(m_mergeMs));
        m_reference = folderFiles(target);
        QVERIFY(m_reference.count("model.safetensors") == 1 && m_reference.count("config.json") == 1);
        QVERIFY(hiddenFolders(fs::path(target).parent_path().string()).empty());
    }

    /// 20 merges killed with SIGKILL at random moments, alternately into a new folder and replacing an older model
    /// in an existing one: the target is always the old content or the complete new model, a leftover temporary
    /// folder never holds a model that reads as valid but is wrong, and the next run cleans up and succeeds.
    void killAtRandomMomentsNeverLeavesAWrongModel()
    {
        auto* random = QRandomGenerator::global();
        const std::string parent = test::makeTempDir();
        const std::string target = parent + "/model";
        const std::map<std::string, std::string> old { { "model.safetensors", "old weights" },
                                                       { "config.json", "{\"old\": true}\n" },
                                                       { "README.md", "kept as it is\n" } };
        int interrupted = 0;
        int killedWhileWriting = 0;
        // Until 20 runs were killed before they finished (a run that finished first is checked all the same).
        for (int round = 0; interrupted < 20 && round < 60; ++round) {
            const bool existing = round % 2 == 1;
            fs::remove_all(target);
            if (existing) {
                fs::create_directories(target);
                for (const auto& [name, bytes] : old)
                    test::writeFile(target + "/" + name, bytes);
            }
            QProcess merge;
            QElapsedTimer ran;
            ran.start();
            merge.start(q(test::tesseraBinary()), mergeArgs(m_checkpoint, target));
            QVERIFY(merge.waitForStarted());
            // Half the kills land anywhere in the run (start-up and scanning take most of it); the other half
            // once the temporary folder exists, while the files are written, flushed and published.
            if (round % 4 >= 2) {
                QElapsedTimer waited;
                waited.start();
                // Waiting on the merge (not sleeping) notices one that ended first: QProcess learns of that in a wait.
                while (hiddenFolders(parent).empty() && hiddenFolders(target).empty() && waited.elapsed() < 5000
                       && !merge.waitForFinished(1)) {
                }
                merge.waitForFinished(random->bounded(static_cast<int>(m_mergeMs / 3) + 1));
            } else {
                merge.waitForFinished(random->bounded(static_cast<int>(m_mergeMs * 11 / 10) + 1));
            }
            if (merge.state() != QProcess::NotRunning) {
                ::kill(static_cast<pid_t>(merge.processId()), SIGKILL);
                QVERIFY(merge.waitForFinished(30000));
            } else { // finished before the kill: merges run faster now (the machine's load fell), so kill sooner
                m_mergeMs = std::min(m_mergeMs, ran.elapsed());
            }
            interrupted += merge.exitStatus() == QProcess::CrashExit ? 1 : 0;

            // The target: as it was, or the complete new model (plus, when it existed, its other files).
            auto now = folderFiles(target);
            std::map<std::string, std::string> expectedNew = m_reference;
            if (existing)
                expectedNew.emplace("README.md", old.at("README.md"));
            const bool asBefore = existing ? now == old : !fs::exists(target);
            // Killed in the microseconds while files move into an existing folder: the old model file is already
            // aside, so the folder holds no model at all (the next run puts the old files back first).
            const bool midPublish = existing && now.count("model.safetensors") == 0;
            QVERIFY2(asBefore || midPublish || now == expectedNew,
                     qPrintable(QStringLiteral("round %1: mixed target").arg(round)));

            // Leftovers: hidden temporary folders, whose model files never read as a valid but wrong model.
            for (const auto& where : { parent, target })
                for (const auto& temp : hiddenFolders(where)) {
                    const std::string file = temp + "/model.safetensors";
                    killedWhileWriting += fs::exists(file) ? 1 : 0;
                    if (fs::exists(file) && readSafetensorsFile(file))
                        QVERIFY2(test::readFile(file) == m_reference.at("model.safetensors"),
                                 qPrintable(q("a complete-looking wrong model in " + temp)));
                }

            // The next run removes them and succeeds.
            QString out, err;
            QCOMPARE(test::runTessera(mergeArgs(m_checkpoint, target), &out, &err), 0);
            QCOMPARE(folderFiles(target), expectedNew);
            QVERIFY(hiddenFolders(parent).empty() && hiddenFolders(target).empty());
        }
        qInfo("%d merges were killed before they finished, %d of them while writing the model file", interrupted,
              killedWhileWriting);
        QCOMPARE(interrupted, 20);
    }

    void staleFolderOfDeadRunIsRemovedWithNote()
    {
        const std::string parent = test::makeTempDir();
        const std::string dead = parent + "/.model.tessera-partial-999999-abc123";
        fs::create_directories(dead);
        test::writeFile(dead + "/model.safetensors", "partial");
        // A live run's folder is locked: it must be left alone.
        const std::string live = parent + "/.model.tessera-partial-1-live00";
        fs::create_directories(live);
        const int lock = ::open(live.c_str(), O_RDONLY | O_DIRECTORY);
        QVERIFY(lock >= 0 && ::flock(lock, LOCK_EX) == 0);
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), q(m_checkpoint),
                                    QStringLiteral("--target_dir"), q(parent + "/model") },
                                  &out, &err),
                 0);
        ::close(lock);
        QVERIFY2(err.contains(QStringLiteral("note: removed")) && err.contains(q(dead)), qPrintable(err));
        QVERIFY(!fs::exists(dead));
        QVERIFY(fs::exists(live));
        QCOMPARE(folderFiles(parent + "/model"), m_reference);
    }

    /// A publish killed halfway after its journal was committed (old keystone moved aside, some new files moved
    /// in) is completed by the next run: the target holds the complete new output, and the files of other names.
    void interruptedPublishIsCompleted()
    {
        const std::string target = test::makeTempDir() + "/model";
        fs::create_directories(target + "/.tessera-partial-999999-abc123/.replaced");
        const std::string temp = target + "/.tessera-partial-999999-abc123";
        test::writeFile(target + "/README.md", "other file\n");
        test::writeFile(target + "/tokenizer.json", "new tokenizer");   // moved in; the old one is in .replaced
        test::writeFile(temp + "/.replaced/tokenizer.json", "old tokenizer");
        test::writeFile(target + "/vocab.txt", "new vocab");           // moved in, had no predecessor
        test::writeFile(temp + "/.replaced/model.safetensors", "old model"); // keystone moved aside first
        test::writeFile(temp + "/model.safetensors", "new model");     // not moved yet
        test::writeFile(temp + "/config.json", "new config");          // not moved yet
        test::writeFile(target + "/config.json", "old config");        // not replaced yet
        test::writeFile(temp + "/.publish-journal", "tessera-publish-journal 2\nf vocab.txt\nf tokenizer.json\n"
                                                    "k model.safetensors\nk config.json\n");
        const auto notes = OutputStaging::removeStale(target);
        QCOMPARE(notes.size(), std::size_t(1));
        QVERIFY(notes[0].find("after completing the publish") != std::string::npos);
        const std::map<std::string, std::string> expected { { "README.md", "other file\n" },
                                                            { "tokenizer.json", "new tokenizer" },
                                                            { "vocab.txt", "new vocab" },
                                                            { "model.safetensors", "new model" },
                                                            { "config.json", "new config" } };
        QCOMPARE(folderFiles(target), expected);
        QVERIFY(hiddenFolders(target).empty());
    }

    /// A run killed before its journal was committed decided nothing: its folder goes, the target stays as it was.
    void publishKilledBeforeItsJournalLeavesTheTarget()
    {
        const std::string target = test::makeTempDir() + "/model";
        const std::string temp = target + "/.tessera-partial-999999-abc123";
        fs::create_directories(temp + "/.replaced");
        test::writeFile(target + "/config.json", "old config");
        test::writeFile(temp + "/config.json", "new config");
        test::writeFile(temp + "/..publish-journal.tessera-new-999999-abcdef", "tessera-publish-journal 2\nk con");
        OutputStaging::removeStale(target);
        const std::map<std::string, std::string> expected { { "config.json", "old config" } };
        QCOMPARE(folderFiles(target), expected);
        QVERIFY(hiddenFolders(target).empty());
    }

    void finalNameTakenByFolderIsRefusedUpFront()
    {
        const std::string target = test::makeTempDir() + "/model";
        fs::create_directories(target + "/config.json");
        test::writeFile(target + "/tokenizer.json", "old");
        for (bool dryRun : { true, false }) {
            QStringList args = mergeArgs(m_checkpoint, target);
            if (dryRun)
                args << QStringLiteral("--dry-run");
            QString out, err;
            QCOMPARE(test::runTessera(args, &out, &err), 1);
            QVERIFY2(err.contains(q(target + "/config.json")) && err.contains(QStringLiteral("is a folder")),
                     qPrintable(err));
        }
        QVERIFY(fs::is_directory(target + "/config.json") && fs::is_empty(target + "/config.json"));
        QCOMPARE(folderFiles(target), (std::map<std::string, std::string> { { "tokenizer.json", "old" } }));
        QVERIFY(hiddenFolders(target).empty());
    }

    void targetThatIsAFileIsRefused()
    {
        const std::string parent = test::makeTempDir();
        test::writeFile(parent + "/model", "a file");
        for (const std::string& target : { parent + "/model", parent + "/model/sub" })
            for (bool dryRun : { true, false }) {
                QStringList args = mergeArgs(m_checkpoint, target);
                if (dryRun)
                    args << QStringLiteral("--dry-run");
                QString out, err;
                QCOMPARE(test::runTessera(args, &out, &err), 1);
                QVERIFY2(err.contains(QStringLiteral("not a folder")), qPrintable(err));
            }
        QCOMPARE(folderFiles(parent), (std::map<std::string, std::string> { { "model", "a file" } }));
        QVERIFY(hiddenFolders(parent).empty());
    }

    void emptyTargetIsAUsageError()
    {
        QString out, err;
        QCOMPARE(test::runTessera(mergeArgs(m_checkpoint, ""), &out, &err), 2);
        QVERIFY2(err.contains(QStringLiteral("--target_dir")), qPrintable(err));
    }

    void readOnlyTargetIsRefusedUpFront()
    {
        const std::string parent = test::makeTempDir();
        const std::string dir = parent + "/data";
        const std::string view = parent + "/view";
        fs::create_directories(dir + "/existing");
        fs::create_directories(view);
        Unmount unmount;
        if (::geteuid() == 0) {
            if (!bindReadOnly(dir, view))
                QSKIP("running as root without permission to make a read-only bind mount");
            unmount.path = view;
        } else {
            fs::permissions(dir, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                            fs::perm_options::remove);
            fs::permissions(dir + "/existing", fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                            fs::perm_options::remove);
            fs::remove(view);
            fs::create_directory_symlink(dir, view);
        }
        for (const std::string& target : { view + "/existing", view + "/new" })
            for (bool dryRun : { true, false }) {
                QStringList args = mergeArgs(m_checkpoint, target);
                if (dryRun)
                    args << QStringLiteral("--dry-run");
                QString out, err;
                QCOMPARE(test::runTessera(args, &out, &err), 1);
                QVERIFY2(err.contains(QStringLiteral("cannot")) && err.contains(q(view)), qPrintable(err));
            }
        QVERIFY(fs::is_empty(dir + "/existing"));
        QVERIFY(!fs::exists(dir + "/new"));
        if (::geteuid() != 0)
            fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add);
    }

    /// A target that is a mount point: the temporary folder goes inside it, so the publish needs no cross-device
    /// rename.
    void mountPointTargetWorks()
    {
        const std::string target = test::makeTempDir() + "/mounted";
        fs::create_directories(target);
        if (::mount("tessera-test", target.c_str(), "tmpfs", 0, "size=256m") != 0)
            QSKIP("cannot mount a tmpfs here (not root, or no permission)");
        Unmount unmount { target };
        QString out, err;
        QCOMPARE(test::runTessera(mergeArgs(m_checkpoint, target), &out, &err), 0);
        QCOMPARE(folderFiles(target), m_reference);
        QVERIFY(hiddenFolders(target).empty());
    }

    /// The disk fills up during the merge (a tmpfs with room for the bytes but too few files): a clear error and
    /// nothing left behind.
    void fullDiskEndsInClearErrorWithNothingLeft()
    {
        const std::string target = test::makeTempDir() + "/small";
        fs::create_directories(target);
        // Room for the folder itself, the temporary folder, the weights and one side file, not for the others.
        if (::mount("tessera-test", target.c_str(), "tmpfs", 0, "size=64m,nr_inodes=4") != 0)
            QSKIP("cannot mount a tmpfs here (not root, or no permission)");
        Unmount unmount { target };
        const std::string actor = test::fixture("fsdp2_llama_w4/global_step_10/actor");
        QString out, err;
        QCOMPARE(test::runTessera(mergeArgs(actor, target), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("No space left on device")), qPrintable(err));
        QVERIFY(fs::is_empty(target));

        // Too little room for the bytes: refused before anything is written.
        ::umount2(target.c_str(), MNT_DETACH);
        QVERIFY(::mount("tessera-test", target.c_str(), "tmpfs", 0, "size=1m") == 0);
        QCOMPARE(test::runTessera(mergeArgs(m_checkpoint, target), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("free")), qPrintable(err));
        QVERIFY(fs::is_empty(target));
    }

    /// A file size limit (ulimit -f) is an error like a full disk, not a crash by SIGXFSZ.
    void fileSizeLimitEndsInClearError()
    {
        const std::string parent = test::makeTempDir();
        QProcess merge;
        merge.setChildProcessModifier([] {
            struct rlimit limit { 1u << 20, 1u << 20 };
            ::setrlimit(RLIMIT_FSIZE, &limit);
        });
        merge.start(q(test::tesseraBinary()), mergeArgs(m_checkpoint, parent + "/model"));
        QVERIFY(merge.waitForFinished(30000));
        QCOMPARE(merge.exitStatus(), QProcess::NormalExit);
        QCOMPARE(merge.exitCode(), 1);
        QVERIFY2(QString::fromLocal8Bit(merge.readAllStandardError()).contains(QStringLiteral("File too large")),
                 "expected a clear error");
        QVERIFY(fs::is_empty(parent));
    }
};

QTEST_GUILESS_MAIN(TestCrashSafeOutput)
#include "tst_crash_safe_output.moc"
