// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera-cli`, the headless executable cluster nodes install: it runs the commands as the workbench `tessera`
// does (a merge in parts under Slurm's `--part auto` gives the same folder, bit for bit), names itself in what it
// prints (help, usage errors, the hint to run --status), and `gui` says where the workbench is. That it links no
// GUI library is the test cli_links_no_gui (cmake/CheckNoGuiLibraries.cmake).

#include "testutil.h"

#include <QProcess>
#include <QProcessEnvironment>

#include <filesystem>
#include <map>
#include <string>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

using test::A;
QString q(const std::string& s) { return QString::fromStdString(s); }

/// The built tessera-cli: TESSERA_CLI_BINARY (ctest sets it), else the one beside the workbench executable.
std::string cliBinary()
{
    if (const char* env = std::getenv("TESSERA_CLI_BINARY"))
        return env;
    return (fs::path(test::tesseraBinary()).parent_path() / "tessera-cli").string();
}

struct Run {
    int code = -1;
    QString out, err;
};

/// Runs `program args…` with `env` added to this process's environment.
Run run(const std::string& program, const QStringList& args, const std::map<QString, QString>& env = {})
{
    QProcess p;
    auto environment = QProcessEnvironment::systemEnvironment();
    for (const auto& [k, v] : env)
        environment.insert(k, v);
    p.setProcessEnvironment(environment);
    p.start(q(program), args);
    Run r;
    if (!p.waitForFinished(120000))
        return r;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    return r;
}

/// Every file below `dir` with its bytes.
std::map<std::string, std::string> tree(const std::string& dir)
{
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir))
        if (entry.is_regular_file())
            files[fs::relative(entry.path(), dir).string()] = test::readFile(entry.path().string());
    return files;
}

} // namespace

class TestCliHeadless : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY2(fs::exists(cliBinary()), qPrintable(q(cliBinary() + " is not built (target tessera-cli)")));
    }

    /// --version, --help and each command's --help name tessera-cli; the help lists no `gui`.
    void helpAndVersionNameTheProgram()
    {
        const Run version = run(cliBinary(), A({ "--version" }));
        QCOMPARE(version.code, 0);
        QVERIFY2(version.out.startsWith(QStringLiteral("tessera-cli ")), qPrintable(version.out));
        if (test::kWorkbenchBuilt) {
            const Run workbench = run(test::tesseraBinary(), A({ "--version" }));
            QVERIFY(workbench.out.startsWith(QStringLiteral("tessera ")));
            QCOMPARE(version.out, QStringLiteral("tessera-cli ") + workbench.out.mid(8));
        }

        const Run help = run(cliBinary(), A({ "--help" }));
        QCOMPARE(help.code, 0);
        QVERIFY2(help.out.startsWith(QStringLiteral("usage: tessera-cli COMMAND ")), qPrintable(help.out));
        for (const char* command : { "inspect PATH", "merge ", "test ", "diff A B", "split " })
            QVERIFY2(help.out.contains(QStringLiteral("\n  ") + QLatin1String(command)), command);
        QVERIFY2(!help.out.contains(QStringLiteral("gui [PATH]")), qPrintable(help.out));
        QVERIFY(help.out.contains(QStringLiteral("Run 'tessera-cli COMMAND --help'")));
        // The workbench's help still offers gui, and names itself.
        if (test::kWorkbenchBuilt) {
            const Run workbenchHelp = run(test::tesseraBinary(), A({ "--help" }));
            QVERIFY(workbenchHelp.out.startsWith(QStringLiteral("usage: tessera [COMMAND] ")));
            QVERIFY(workbenchHelp.out.contains(QStringLiteral("\n  gui [PATH] ")));
        }

        const Run merge = run(cliBinary(), A({ "merge", "--help" }));
        QCOMPARE(merge.code, 0);
        QVERIFY2(merge.out.startsWith(QStringLiteral("usage: tessera-cli merge ")), qPrintable(merge.out));
        // Without a command: the usage on stderr, as a usage error.
        const Run bare = run(cliBinary(), {});
        QCOMPARE(bare.code, 2);
        QVERIFY(bare.out.isEmpty());
        QVERIFY2(bare.err.startsWith(QStringLiteral("usage: tessera-cli COMMAND ")), qPrintable(bare.err));
    }

    /// Usage errors and failures are prefixed with the program the user ran, and point to its own --help.
    void messagesNameTheProgram()
    {
        Run r = run(cliBinary(), A({ "merge", "--no_such_flag" }));
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.startsWith(QStringLiteral("tessera-cli merge: ")), qPrintable(r.err));
        QVERIFY2(r.err.contains(QStringLiteral("Run 'tessera-cli merge --help' for usage.")), qPrintable(r.err));
        r = run(cliBinary(), A({ "inspect", test::makeTempDir() + "/missing" }));
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.startsWith(QStringLiteral("tessera-cli inspect: ")), qPrintable(r.err));
        r = run(cliBinary(), A({ "frobnicate" }));
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.startsWith(QStringLiteral("tessera-cli: unknown command 'frobnicate'")), qPrintable(r.err));
        // The workbench keeps its own name.
        if (test::kWorkbenchBuilt) {
            r = run(test::tesseraBinary(), A({ "merge", "--no_such_flag" }));
            QVERIFY2(r.err.startsWith(QStringLiteral("tessera merge: ")), qPrintable(r.err));
        }
    }

    /// `tessera-cli gui` points to the workbench beside it, or to the package that brings it.
    void guiPointsToTheWorkbench()
    {
        Run r = run(cliBinary(), A({ "gui" }));
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("the workbench is another program")), qPrintable(r.err));
        if (test::kWorkbenchBuilt) {
            const std::string beside = fs::canonical(fs::path(cliBinary()).parent_path() / "tessera").string();
            QVERIFY2(r.err.contains(QStringLiteral("run ") + q(beside)), qPrintable(r.err));
        }
        // Alone in a folder, as on a cluster node with only the tessera-cli package.
        const std::string alone = test::makeTempDir() + "/tessera-cli";
        fs::copy_file(cliBinary(), alone);
        r = run(alone, A({ "gui", "some/checkpoint" }));
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("in the package tessera: install it (apt install tessera)")),
                 qPrintable(r.err));
    }

    /// A merge in two parts under Slurm (--part auto from SLURM_PROCID/SLURM_NTASKS), run by tessera-cli, gives the
    /// folder one merge by the workbench executable (where it is built) gives, bit for bit; the part that waits, and
    /// the refusal of a whole merge into the same target, name tessera-cli in the commands they suggest.
    void mergeInPartsUnderSlurm()
    {
        const std::string actor = test::fixture("fsdp2_llama_w4/global_step_10/actor");
        const std::string single = test::makeTempDir() + "/single";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", actor, "--target_dir", single, "--quiet" })), 0);

        const std::string target = test::makeTempDir() + "/merged";
        const QStringList line = A({ "merge", "--local_dir", actor, "--target_dir", target, "--part", "auto" });
        auto slurm = [](unsigned k) {
            return std::map<QString, QString> { { QStringLiteral("SLURM_PROCID"), QString::number(k) },
                                                { QStringLiteral("SLURM_NTASKS"), QStringLiteral("2") } };
        };
        Run r = run(cliBinary(), line, slurm(1));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("(SLURM_PROCID/SLURM_NTASKS): wrote ")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("Waiting for part 0 of 2")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("('tessera-cli merge --status ")), qPrintable(r.out));
        QVERIFY(!fs::exists(target));
        // A whole merge into the target the parts hold is refused, with the command to discard them in its words.
        r = run(cliBinary(), A({ "merge", "--local_dir", actor, "--target_dir", target }));
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains(q("discard it with `tessera-cli merge --status " + target + " --discard`")),
                 qPrintable(r.err));
        r = run(cliBinary(), line, slurm(0));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("All 2 parts are done: published ")), qPrintable(r.out));
        QVERIFY(tree(target) == tree(single));
    }
};

QTEST_GUILESS_MAIN(TestCliHeadless)
#include "tst_cli_headless.moc"
