// SPDX-License-Identifier: GPL-3.0-or-later
// Pickles built to exhaust the stack or memory: nesting built behind the depth check's back, chains freed without
// recursion, shared references that multiply work. Each must end in a clear error, quickly.

#include "testutil.h"
#include "hostilefiles.h"

#include "io/mapped_file.h"
#include "pickle/unpickler.h"

#include <QTest>

#include <chrono>

using namespace tessera;
using namespace tessera::test;

namespace {

ByteView viewOf(const std::string& bytes)
{
    auto owner = std::make_shared<std::string>(bytes);
    return ByteView(owner, reinterpret_cast<const std::uint8_t*>(owner->data()), owner->size());
}

/// A chain of `levels` nested lists, each appended to its parent while still empty and filled afterwards, so
/// the depth seen at every APPEND is 1.
std::string appendThenFillChain(int levels)
{
    std::string p = "\x80\x02]";
    p += "r";
    putLe(p, 0, 4); // LONG_BINPUT 0: the root
    p += "0";       // POP: the memo keeps it
    for (int i = 0; i < levels; ++i) {
        p += "j"; // LONG_BINGET i: the innermost list so far
        putLe(p, static_cast<std::uint64_t>(i), 4);
        p += "]r"; // a new empty list, memoised as i+1
        putLe(p, static_cast<std::uint64_t>(i) + 1, 4);
        p += "a0"; // APPEND it to list i, POP list i
    }
    p += "j";
    putLe(p, 0, 4);
    return p + ".";
}

} // namespace

class TestHostilePickles : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void depthIsBoundedWhenListsAreFilledAfterAppending()
    {
        // 100,000 levels in 1.5 MB: before the fix, freeing it (and walking it) overflowed the stack.
        const auto started = std::chrono::steady_clock::now();
        auto result = unpickle(viewOf(appendThenFillChain(100'000)), "chain.pkl");
        QVERIFY(!result);
        QVERIFY2(result.error().message.find("levels deep") != std::string::npos, result.error().message.c_str());
        QVERIFY(result.error().message.find("chain.pkl") != std::string::npos);
        QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    }

    void shallowAppendThenFillStillReads()
    {
        auto result = unpickle(viewOf(appendThenFillChain(100)), "chain.pkl");
        QVERIFY_RESULT(result);
        QCOMPARE((*result)->kind, PyValue::Kind::List);
        QCOMPARE((*result)->depth, 100); // the innermost list is empty, a leaf
    }

    void depthJustOverTheLimitIsRefused()
    {
        UnpickleLimits limits;
        limits.maxDepth = 50;
        QVERIFY(unpickle(viewOf(appendThenFillChain(50)), "ok.pkl", limits));
        QVERIFY(!unpickle(viewOf(appendThenFillChain(51)), "deep.pkl", limits));
    }

    void deepChainOfValuesIsFreedWithoutRecursion()
    {
        // Values can be built outside the unpickler too; 200,000 levels would overflow an 8 MB stack when
        // freed recursively (each level is a few frames).
        PyRef root = std::make_shared<PyValue>();
        root->kind = PyValue::Kind::List;
        PyValue* inner = root.get();
        for (int i = 0; i < 200'000; ++i) {
            auto child = std::make_shared<PyValue>();
            child->kind = PyValue::Kind::Dict;
            inner->entries.emplace_back(nullptr, child);
            inner = child.get();
        }
        root.reset();
        QVERIFY(true);
    }

    void sharedChildrenAreFreedOnceTheirLastOwnerGoes()
    {
        auto shared = std::make_shared<PyValue>();
        shared->kind = PyValue::Kind::List;
        shared->items.push_back(std::make_shared<PyValue>());
        std::weak_ptr<PyValue> watch = shared;
        {
            auto a = std::make_shared<PyValue>();
            a->items = { shared, shared };
            shared.reset();
            QVERIFY(!watch.expired());
        }
        QVERIFY(watch.expired());
    }
};

QTEST_GUILESS_MAIN(TestHostilePickles)
#include "tst_hostile_pickles.moc"
