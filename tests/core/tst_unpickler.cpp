// SPDX-License-Identifier: GPL-3.0-or-later
// The restricted pickle machine: what it accepts, what it refuses, and that hostile input never crashes it.

#include "testutil.h"

#include "pickle/unpickler.h"

#include <QTest>

#include <memory>

using namespace tessera;
using namespace std::string_literals;

namespace {

/// Wraps bytes in a ByteView that owns them.
ByteView viewOf(const std::string& bytes)
{
    auto owned = std::make_shared<std::string>(bytes);
    return ByteView(owned, reinterpret_cast<const std::uint8_t*>(owned->data()), owned->size());
}

Result<PyRef> load(const std::string& bytes) { return unpickle(viewOf(bytes), "test.pkl"); }

std::string str(const std::string& s)
{
    std::string out = "X";
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int i = 0; i < 4; ++i)
        out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
    return out + s;
}

const std::string kProto2 = "\x80\x02";

} // namespace

class TestUnpickler : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void plainValues()
    {
        // {'a': (1, 300, -2, True, None, 1.5, 'x'), 'b': [ ]}
        std::string p = kProto2 + "}q\x00("s + str("a") + "(K\x01M\x2c\x01J\xfe\xff\xff\xff\x88NG\x3f\xf8\x00\x00\x00\x00\x00\x00"s
            + str("x") + "t" + str("b") + "]q\x01u.";
        auto v = load(p);
        QVERIFY_RESULT(v);
        QCOMPARE((*v)->kind, PyValue::Kind::Dict);
        auto a = (*v)->get("a");
        QVERIFY(a);
        QCOMPARE(a->items.size(), std::size_t(7));
        QCOMPARE(a->items[0]->integer, std::int64_t(1));
        QCOMPARE(a->items[1]->integer, std::int64_t(300));
        QCOMPARE(a->items[2]->integer, std::int64_t(-2));
        QVERIFY(a->items[3]->boolean);
        QVERIFY(a->items[4]->isNone());
        QCOMPARE(a->items[5]->real, 1.5);
        QCOMPARE(QString::fromStdString(a->items[6]->text), QStringLiteral("x"));
        QCOMPARE((*v)->get("b")->kind, PyValue::Kind::List);
    }

    void memoSharesObjects()
    {
        // l = []; (l, l) — both tuple items must be the same object
        std::string p = kProto2 + "]q\x05h\x05\x86q\x06.";
        auto v = load(p);
        QVERIFY_RESULT(v);
        QCOMPARE((*v)->items[0].get(), (*v)->items[1].get());
    }

    void protocol4Frames()
    {
        // PROTO 4, FRAME, SHORT_BINUNICODE 'torch', SHORT_BINUNICODE 'Size', STACK_GLOBAL, ((2, 3),) REDUCE
        std::string body = std::string("\x8c\x05torch\x94\x8c\x04Size\x94\x93\x94K\x02K\x03\x86\x85R.");
        std::string p = std::string("\x80\x04\x95") + std::string(1, static_cast<char>(body.size())) + std::string(7, '\0') + body;
        auto v = load(p);
        QVERIFY_RESULT(v);
        std::vector<std::int64_t> shape;
        QVERIFY(toIntList(*v, shape));
        QCOMPARE(shape, (std::vector<std::int64_t> { 2, 3 }));
    }

    void unknownClassesBecomeInertRecords()
    {
        // argparse.Namespace() with BUILD {'tensor_model_parallel_size': 2}
        std::string p = kProto2 + "cargparse\nNamespace\n)\x81}" + str("tensor_model_parallel_size") + "K\x02sb.";
        auto v = load(p);
        QVERIFY_RESULT(v);
        QCOMPARE((*v)->kind, PyValue::Kind::Object);
        QCOMPARE(QString::fromStdString((*v)->qualifiedName()), QStringLiteral("argparse.Namespace"));
        std::int64_t tp = 0;
        QVERIFY(toInt((*v)->attr("tensor_model_parallel_size"), tp));
        QCOMPARE(tp, std::int64_t(2));
    }

    void refusesCodeExecution_data()
    {
        QTest::addColumn<QByteArray>("pickle");
        QTest::addColumn<QString>("named");
        auto row = [](const char* name, const std::string& p, const char* global) {
            QTest::newRow(name) << QByteArray(p.data(), static_cast<int>(p.size())) << QString::fromLatin1(global);
        };
        row("os.system", kProto2 + "cos\nsystem\n" + str("echo pwned") + "\x85R.", "os.system");
        row("posix.system", kProto2 + "cposix\nsystem\n" + str("id") + "\x85R.", "posix.system");
        row("builtins.eval", kProto2 + "c__builtin__\neval\n" + str("1") + "\x85R.", "builtins.eval");
        row("subprocess", kProto2 + "csubprocess\nPopen\n" + str("id") + "\x85R.", "subprocess.Popen");
        row("unknown function", kProto2 + "cmymodule\nrun_me\n)R.", "mymodule.run_me");
        row("stack global", std::string("\x80\x04") + "\x8c\x02os\x8c\x06system\x93" + str("id") + "\x85R.", "os.system");
        row("torch.load", kProto2 + "ctorch\nload\n" + str("x.pt") + "\x85R.", "torch.load");
    }

    void refusesCodeExecution()
    {
        QFETCH(QByteArray, pickle);
        QFETCH(QString, named);
        auto v = load(pickle.toStdString());
        QVERIFY(!v);
        const QString message = QString::fromStdString(v.error().message);
        QVERIFY2(message.contains(named), qPrintable(message));
        QVERIFY2(message.startsWith(QStringLiteral("test.pkl")), qPrintable(message));
    }

    void refusesForeignPersistentIds()
    {
        auto v = load(kProto2 + str("not a storage") + "Q.");
        QVERIFY(!v);
        QVERIFY(QString::fromStdString(v.error().message).contains(QStringLiteral("persistent id")));
    }

    void refusesSelfReferences_data()
    {
        QTest::addColumn<QByteArray>("pickle");
        auto row = [](const char* name, const std::string& p) {
            QTest::newRow(name) << QByteArray(p.data(), static_cast<int>(p.size()));
        };
        row("list in itself via memo", kProto2 + "]q\x00" "h\x00" "a."s);
        row("list in itself via DUP", kProto2 + "]2a.");
        row("dict in a list in the dict", kProto2 + "}q\x01" + str("k") + "]q\x02" "h\x01" "as."s);
    }

    void refusesSelfReferences()
    {
        QFETCH(QByteArray, pickle);
        auto v = load(pickle.toStdString());
        QVERIFY(!v);
        QVERIFY2(QString::fromStdString(v.error().message).contains(QStringLiteral("self-referencing")),
                 qPrintable(QString::fromStdString(v.error().message)));
    }

    void boundsNesting()
    {
        std::string p = kProto2;
        for (int i = 0; i < 1000; ++i)
            p += "]";
        for (int i = 0; i < 999; ++i)
            p += "a";
        p += ".";
        auto v = load(p);
        QVERIFY(!v);
        QVERIFY(QString::fromStdString(v.error().message).contains(QStringLiteral("nested")));
    }

    void malformedInputNeverCrashes_data()
    {
        QTest::addColumn<QByteArray>("pickle");
        auto row = [](const char* name, const std::string& p) {
            QTest::newRow(name) << QByteArray(p.data(), static_cast<int>(p.size()));
        };
        row("empty", "");
        row("truncated string", kProto2 + "X\xff\xff\x00\x00" "abc"s);
        row("no stop", kProto2 + "K\x01");
        row("stack underflow", kProto2 + "R.");
        row("bad memo", kProto2 + "h\x09.");
        row("unknown opcode", kProto2 + "\xff.");
        row("setitem on list", kProto2 + "]K\x01K\x02s.");
        row("append on dict", kProto2 + "}K\x01a.");
        row("pop mark without mark", kProto2 + "1.");
        row("two values", kProto2 + "K\x01K\x02.");
        row("huge LONG4", kProto2 + "\x8b\xff\xff\xff\x7f.");
        row("huge BINBYTES8", kProto2 + "\x8e\xff\xff\xff\xff\xff\xff\xff\xff.");
        row("tensor without storage", kProto2 + "ctorch._utils\n_rebuild_tensor_v2\n(NK\x00)))\x89NtR."s);
        row("negative stride", kProto2 + "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage")
                + "ctorch\nFloatStorage\n" + str("0") + str("cpu") + "K\x04tQK\x00K\x04\x85J\xff\xff\xff\xff\x85\x89NtR."s);
    }

    void malformedInputNeverCrashes()
    {
        QFETCH(QByteArray, pickle);
        auto v = load(pickle.toStdString());
        QVERIFY(!v);
        QVERIFY(!v.error().message.empty());
    }

    void randomMutationsNeverCrash()
    {
        // Every single-byte mutation of a real state-dict pickle must load or fail cleanly (ASan checks the rest).
        const std::string fixturePkl = [] {
            // A small real pickle: a DTensor state dict entry taken from the fixture's data.pkl.
            return test::readFile(test::fixture("fsdp2_llama_w4/dcp/.metadata"));
        }();
        QVERIFY(fixturePkl.size() > 1000);
        const std::string sample = fixturePkl;
        std::uint32_t seed = 12345;
        const int mutations = test::sampled() ? 500 : 2000; // the fuzz target goes further under the sanitizers
        for (int i = 0; i < mutations; ++i) {
            seed = seed * 1664525u + 1013904223u;
            std::string mutated = sample;
            const std::size_t pos = seed % mutated.size();
            mutated[pos] = static_cast<char>(mutated[pos] ^ static_cast<char>(1 + (seed >> 24) % 255));
            auto v = load(mutated);
            if (!v)
                QVERIFY(!v.error().message.empty());
        }
    }
};

QTEST_GUILESS_MAIN(TestUnpickler)
#include "tst_unpickler.moc"
