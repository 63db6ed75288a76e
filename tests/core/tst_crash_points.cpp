// SPDX-License-Identifier: GPL-3.0-or-later
// Every publishing path killed at each of its distinct steps, then run again. A step is a system call made from one
// call path (strace -k: the stack of return addresses): every rename, fsync and unlink site and every site that
// writes, each killed at its first and its last call, so a step repeated over many files (a rename per file, a
// write per block) is killed before the first and before the last file, not at every one. strace's fault
// injection (`-e inject=SYSCALL:signal=KILL:when=N`) stops the process exactly at the N-th call, before it runs.
// After the kill the target must hold its old content, or exactly the single-process result, or (killed while the
// publish moves files) lack a name the output needs: it never looks complete while it is not. After the run again,
// it must be exactly the single-process result. Parts are killed in the part that finishes the set (and in the
// first part), then run again as a retrying scheduler would. The points where a kill once found a defect (the
// finisher's last publish rename, the journal's write and its removal, a split's final unlink) are among the
// points of every path, and the test checks that they are.
//
// Needs strace (packaging/install-deps.sh installs it); skipped where it is missing. Not run under the sanitizer
// preset: a sanitized process makes thousands of extra system calls.

#include "testutil.h"

#include <QProcess>
#include <QtTest>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace tessera;
using test::A;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// The target's content as a user sees it: every file below it, by path, except Tessera's own bookkeeping (the
/// staging folder, the parts' shared folder, the lock), which a kill may leave for the next run to clear.
std::map<std::string, std::string> visibleTree(const std::string& target)
{
    std::map<std::string, std::string> files;
    std::error_code ec;
    if (!fs::is_directory(target, ec))
        return files;
    for (fs::recursive_directory_iterator it(target, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string rel = it->path().lexically_relative(target).string();
        if (rel.find(".tessera-") != std::string::npos) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_symlink())
            files[rel] = "<symbolic link>";
        else if (it->is_regular_file())
            files[rel] = test::readFile(it->path().string());
    }
    return files;
}

/// The temporary files of the target's lock ("..<target>.tessera-lock.new-…" beside it, "..tessera-lock.…" inside),
/// which a run killed while taking the lock leaves behind.
std::vector<fs::path> lockTemporaries(const std::string& target)
{
    std::vector<fs::path> found;
    const fs::path t(target);
    for (const auto& [folder, prefix] : { std::pair { t.parent_path(), "." + t.filename().string() + ".tessera-lock." },
                                          std::pair { t, std::string(".tessera-lock.") } }) {
        std::error_code ec;
        for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
            if (it->path().filename().string().rfind("." + prefix, 0) == 0)
                found.push_back(it->path());
    }
    return found;
}

/// One call of a traced system call: which call, its number among that thread's calls of it (strace counts
/// injections per system call and per thread), and its call path.
struct TracedCall {
    std::string call;
    int n = 0;
    std::string path;
};

/// The calls of `calls` that `args` makes, thread by thread in the order each thread makes them, with their stacks
/// (strace -k, one trace file per thread: -ff).
std::vector<TracedCall> traceCalls(const QStringList& args, const QString& calls)
{
    const std::string dir = test::makeTempDir();
    QProcess strace;
    // --seccomp-bpf stops the process at the traced calls only, which halves the sweep's time (with it, strace 6.1's
    // injection never fires, so the killed runs go without).
    strace.start(QStringLiteral("strace"),
                 QStringList { QStringLiteral("-ff"), QStringLiteral("--seccomp-bpf"), QStringLiteral("-k"),
                               QStringLiteral("-o"), q(dir + "/trace"), QStringLiteral("-e"),
                               QStringLiteral("trace=") + calls, q(test::tesseraBinary()) }
                     + args);
    strace.waitForFinished(600000);
    std::vector<TracedCall> traced;
    const std::regex callLine(R"(^([a-z0-9_]+)\()");
    // A frame: "module(symbol+0x…) [0xOFFSET]"; the module and its offset name the return address.
    const std::regex frameLine(R"(^ > ([^(]*)\(.*\[(0x[0-9a-f]+)\]$)");
    for (const auto& entry : fs::directory_iterator(dir)) {
        std::map<std::string, int> perCall;
        std::istringstream in(test::readFile(entry.path().string()));
        std::string text;
        while (std::getline(in, text)) {
            std::smatch m;
            if (std::regex_search(text, m, callLine)) {
                traced.push_back({ m[1].str(), ++perCall[m[1].str()], m[1].str() });
            } else if (text.find("unexpected_backtracing_error") != std::string::npos) {
                // A stack cut short would merge distinct steps into one and leave them unkilled.
                qFatal("strace -k could not walk the stack of %s: %s", qPrintable(args.join(QLatin1Char(' '))),
                       text.c_str());
            } else if (!traced.empty() && std::regex_match(text, m, frameLine)) {
                traced.back().path += " " + fs::path(m[1].str()).filename().string() + "+" + m[2].str();
            }
        }
    }
    return traced;
}

/// Where to kill `args`: each distinct call path at its first and its last call (one point when they coincide).
std::vector<std::pair<std::string, int>> killPoints(const std::vector<TracedCall>& traced)
{
    std::map<std::string, std::pair<const TracedCall*, const TracedCall*>> firstAndLast;
    for (const auto& call : traced) {
        auto [it, fresh] = firstAndLast.try_emplace(call.path, &call, &call);
        if (!fresh)
            it->second.second = &call;
    }
    std::set<std::pair<std::string, int>> points;
    for (const auto& [path, ends] : firstAndLast) {
        points.insert({ ends.first->call, ends.first->n });
        points.insert({ ends.second->call, ends.second->n });
    }
    return { points.begin(), points.end() };
}

/// Runs `args` killed at the `n`-th call of `call`; true when the process was killed.
bool runKilledAt(const QStringList& args, const std::string& call, int n)
{
    QProcess strace;
    strace.start(QStringLiteral("strace"),
                 QStringList { QStringLiteral("-f"), QStringLiteral("-o"), QStringLiteral("/dev/null"),
                               QStringLiteral("-e"), q("trace=" + call), QStringLiteral("-e"),
                               q("inject=" + call + ":signal=KILL:when=" + std::to_string(n)),
                               q(test::tesseraBinary()) }
                     + args);
    strace.waitForFinished(600000);
    // strace ends the way its tracee did: killed by the same signal.
    return strace.exitStatus() == QProcess::CrashExit || strace.exitCode() == 128 + 9;
}

/// One publishing path: the commands of a run (one, or the parts in the order a scheduler starts them), the
/// content the target holds before (empty: no target), and which of the commands is killed.
struct PublishingPath {
    QString name;
    std::function<std::vector<QStringList>(const std::string& target)> commands;
    std::map<std::string, std::string> before;
    /// A split never replaces files: run again after a kill that came once its output was complete (at the lock's
    /// release), it refuses, and the target keeps that complete output.
    bool refusesToRedoACompleteOutput = false;
};

const QString kCalls = QStringLiteral("rename,renameat,renameat2,fsync,fdatasync,unlink,unlinkat");

} // namespace

class TestCrashPoints : public QObject {
    Q_OBJECT

    bool m_haveStrace = false;
    std::string m_demo;
    std::string m_gguf;
    std::string m_lora;

    static std::string actor(const std::string& fixture) { return test::fixture(fixture + "/global_step_10/actor"); }

    /// The target's content after the commands run undisturbed into a fresh target holding `before`.
    std::map<std::string, std::string> reference(const PublishingPath& path)
    {
        const std::string target = prepare(path);
        for (const auto& args : path.commands(target)) {
            QString out, err;
            if (test::runTessera(args, &out, &err) != 0)
                qWarning("%s", qPrintable(err));
        }
        return visibleTree(target);
    }

    std::string prepare(const PublishingPath& path)
    {
        const std::string target = test::makeTempDir() + "/target";
        for (const auto& [name, content] : path.before) {
            fs::create_directories(fs::path(target + "/" + name).parent_path());
            test::writeFile(target + "/" + name, content);
        }
        return target;
    }

    /// Kills command `killed` of the path at every point, checks the target, runs the rest and the killed command
    /// again, and checks the result.
    void killEverywhere(const PublishingPath& path, std::size_t killed)
    {
        const auto expected = reference(path);
        QVERIFY2(!expected.empty(), qPrintable(path.name));
        const std::string probe = prepare(path);
        const auto commands = path.commands(probe);
        for (std::size_t i = 0; i < killed; ++i)
            QCOMPARE(test::runTessera(commands[i]), 0);
        const auto traced = traceCalls(commands[killed], kCalls + QStringLiteral(",write,pwrite64"));
        const auto points = killPoints(traced);
        QVERIFY2(points.size() >= 4, qPrintable(path.name));
        // Every step is killed, and so is the last call of each kind: the points where a kill once found a defect
        // (the finisher's last publish rename, the journal's write and its removal, a split's final unlink).
        const std::set<std::pair<std::string, int>> chosen(points.begin(), points.end());
        std::map<std::string, int> lastOfEach;
        for (const auto& call : traced) {
            lastOfEach[call.call] = std::max(lastOfEach[call.call], call.n);
            const bool stepKilled = std::any_of(traced.begin(), traced.end(), [&](const TracedCall& other) {
                return other.path == call.path && chosen.count({ other.call, other.n }) > 0;
            });
            QVERIFY2(stepKilled, qPrintable(path.name + QStringLiteral(": a step is never killed:") + q(call.path)));
        }
        for (const auto& [call, n] : lastOfEach)
            QVERIFY2(chosen.count({ call, n }) > 0,
                     qPrintable(path.name + QStringLiteral(": the last ") + q(call)
                                + QStringLiteral(" is not killed")));
        int kills = 0;
        for (const auto& [call, n] : points) {
            const std::string target = prepare(path);
            const auto run = path.commands(target);
            for (std::size_t i = 0; i < killed; ++i)
                QCOMPARE(test::runTessera(run[i]), 0);
            kills += runKilledAt(run[killed], call, n) ? 1 : 0;
            const auto after = visibleTree(target);
            const QString where = path.name + QStringLiteral(": killed at ") + q(call) + QStringLiteral(" #")
                + QString::number(n);
            // In between, while the publish moves files, the target may be neither; but it never looks complete:
            // a name the output needs is missing until the last rename.
            bool lacksAName = false;
            for (const auto& entry : expected)
                lacksAName |= after.count(entry.first) == 0;
            QVERIFY2(after == path.before || after == expected || lacksAName,
                     qPrintable(where + QStringLiteral(": the target looks complete but is not the output")));
            // The lock's temporary files a kill left are removed by the next run once they are ten minutes old.
            for (const auto& temporary : lockTemporaries(target))
                fs::last_write_time(temporary, fs::file_time_type::clock::now() - std::chrono::minutes(11));
            // Run again: the killed command, then those after it (a retrying scheduler runs what did not finish).
            for (std::size_t i = killed; i < run.size(); ++i) {
                QString out, err;
                const int code = test::runTessera(run[i], &out, &err);
                const bool refusedComplete = path.refusesToRedoACompleteOutput && after == expected
                    && err.contains(QStringLiteral("already holds a checkpoint"));
                QVERIFY2(code == 0 || refusedComplete, qPrintable(where + QStringLiteral(", run again: ") + err));
                if (refusedComplete)
                    break;
            }
            QVERIFY2(visibleTree(target) == expected,
                     qPrintable(where + QStringLiteral(": run again, the target is not the single-process result")));
            const auto leftLockFiles = lockTemporaries(target);
            QVERIFY2(leftLockFiles.empty(),
                     qPrintable(where + QStringLiteral(": run again, a lock's temporary file is left: ")
                                + q(leftLockFiles.empty() ? std::string() : leftLockFiles.front().string())));
        }
        qInfo("%s: killed at %d of %d points (%d calls traced)", qPrintable(path.name), kills, int(points.size()),
              int(traced.size()));
        QVERIFY(kills > 0);
    }

    /// An older model's files under the names the output has: what a merge replaces.
    std::map<std::string, std::string> olderFiles(const PublishingPath& fresh)
    {
        std::map<std::string, std::string> old;
        for (const auto& [name, content] : reference(fresh))
            old[name] = "older " + name + "\n";
        return old;
    }

private Q_SLOTS:
    void initTestCase()
    {
        m_haveStrace = QProcess::execute(QStringLiteral("strace"), { QStringLiteral("-V") }) == 0;
        m_demo = actor("fsdp2_llama_w4");
        m_gguf = actor("gguf_llama_w2_fp32");
        m_lora = actor("lora_llama_w2_fp32");
    }

    void init()
    {
        if (test::sampled())
            QSKIP("not under the sanitizers: a sanitized process makes thousands of extra system calls");
        if (!m_haveStrace)
            QSKIP("strace is not installed (packaging/install-deps.sh installs it)");
    }

    void mergeIntoANewTarget()
    {
        killEverywhere({ QStringLiteral("merge, new target"),
                         [&](const std::string& t) {
                             return std::vector<QStringList> { A({ "merge", "--local_dir", m_demo, "--target_dir", t,
                                                                   "--threads", "1", "--quiet" }) };
                         },
                         {} },
                       0);
    }

    void mergeReplacingAModel()
    {
        PublishingPath path { QStringLiteral("merge, replacing a model"),
                              [&](const std::string& t) {
                                  return std::vector<QStringList> { A({ "merge", "--local_dir", m_demo, "--target_dir",
                                                                        t, "--threads", "1", "--quiet" }) };
                              },
                              {} };
        path.before = olderFiles(path);
        killEverywhere(path, 0);
    }

    void loraMergeWithItsAdapter()
    {
        PublishingPath path { QStringLiteral("LoRA merge and adapter"),
                              [&](const std::string& t) {
                                  return std::vector<QStringList> { A({ "merge", "--local_dir", m_lora, "--target_dir",
                                                                        t, "--lora", "both", "--threads", "1",
                                                                        "--quiet" }) };
                              },
                              {} };
        path.before = olderFiles(path);
        killEverywhere(path, 0);
    }

    void ggufExport()
    {
        PublishingPath path { QStringLiteral("GGUF export"),
                              [&](const std::string& t) {
                                  return std::vector<QStringList> { A({ "merge", "--local_dir", m_gguf, "--target_dir",
                                                                        t, "--format", "gguf", "--outtype", "q8_0",
                                                                        "--threads", "1", "--quiet" }) };
                              },
                              {} };
        path.before = olderFiles(path);
        killEverywhere(path, 0);
    }

    void split()
    {
        killEverywhere({ QStringLiteral("split to DCP"),
                         [&](const std::string& t) {
                             return std::vector<QStringList> { A({ "split", "--local_dir", m_demo, "--target_dir", t,
                                                                   "--format", "dcp", "--world_size", "2", "--quiet" }) };
                         },
                         {}, true },
                       0);
    }

    void mergeInParts()
    {
        PublishingPath path { QStringLiteral("merge in parts"),
                              [&](const std::string& t) {
                                  std::vector<QStringList> parts;
                                  for (const char* k : { "0/2", "1/2" })
                                      parts.push_back(A({ "merge", "--local_dir", m_demo, "--target_dir", t, "--part",
                                                          k, "--threads", "1", "--quiet" }));
                                  return parts;
                              },
                              {} };
        path.before = olderFiles(path);
        killEverywhere(path, 1); // the part that finishes the set
        killEverywhere(path, 0); // the first part
    }

    void ggufExportInParts()
    {
        PublishingPath path { QStringLiteral("GGUF export in parts"),
                              [&](const std::string& t) {
                                  std::vector<QStringList> parts;
                                  for (const char* k : { "0/2", "1/2" })
                                      parts.push_back(A({ "merge", "--local_dir", m_gguf, "--target_dir", t, "--format",
                                                          "gguf", "--outtype", "q8_0", "--part", k, "--threads", "1",
                                                          "--quiet" }));
                                  return parts;
                              },
                              {} };
        path.before = olderFiles(path);
        killEverywhere(path, 1);
    }

    void loraMergeInParts()
    {
        PublishingPath path { QStringLiteral("LoRA merge and adapter in parts"),
                              [&](const std::string& t) {
                                  std::vector<QStringList> parts;
                                  for (const char* k : { "0/2", "1/2" })
                                      parts.push_back(A({ "merge", "--local_dir", m_lora, "--target_dir", t, "--lora",
                                                          "both", "--part", k, "--threads", "1", "--quiet" }));
                                  return parts;
                              },
                              {} };
        path.before = olderFiles(path);
        killEverywhere(path, 1);
    }

    void splitInParts()
    {
        killEverywhere({ QStringLiteral("split in parts"),
                         [&](const std::string& t) {
                             std::vector<QStringList> parts;
                             for (const char* k : { "0/2", "1/2" })
                                 parts.push_back(A({ "split", "--local_dir", m_demo, "--target_dir", t, "--format",
                                                     "dcp", "--world_size", "2", "--part", k, "--quiet" }));
                             return parts;
                         },
                         {}, true },
                       1);
    }
};

QTEST_GUILESS_MAIN(TestCrashPoints)
#include "tst_crash_points.moc"
