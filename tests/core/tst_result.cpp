// SPDX-License-Identifier: GPL-3.0-or-later
// Errors as values (core/result.h): a cancel is a kind of error, not a message, so it stays a cancel whatever
// context is added to it on its way up, and no failure becomes a cancel by its words.

#include "testutil.h"

#include "result.h"

#include <QTest>

#include <string>

using namespace tessera;

namespace {

Status stoppedReading() { return canceledError().withContext("model.embed_tokens.weight"); }

Result<int> readAll()
{
    TESSERA_TRY(stoppedReading());
    return 1;
}

} // namespace

class TestResult : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void canceledErrorIsACancel()
    {
        const Error e = canceledError();
        QVERIFY(e.isCanceled());
        QCOMPARE(e.kind, ErrorKind::Canceled);
        QCOMPARE(e.message, std::string("canceled"));
    }

    void contextKeepsTheCancel()
    {
        const Error e = canceledError().withContext("A").withContext("the adapter");
        QVERIFY(e.isCanceled());
        QCOMPARE(e.message, std::string("the adapter: A: canceled"));
    }

    void contextKeepsAFailure()
    {
        const Error e = makeError("x.pt: truncated").withContext("rank 3");
        QVERIFY(!e.isCanceled());
        QCOMPARE(e.kind, ErrorKind::Failure);
        QCOMPARE(e.message, std::string("rank 3: x.pt: truncated"));
    }

    /// The words "canceled" alone make no cancel: a message is never asked what kind of error it is.
    void wordsMakeNoCancel() { QVERIFY(!makeError("canceled").isCanceled()); }

    void statusResultAndTryCarryTheKind()
    {
        const Status status = stoppedReading();
        QVERIFY(!status);
        QVERIFY(status.error().isCanceled());
        const auto result = readAll();
        QVERIFY(!result);
        QVERIFY(result.error().isCanceled());
        QCOMPARE(result.error().message, std::string("model.embed_tokens.weight: canceled"));
    }
};

QTEST_GUILESS_MAIN(TestResult)
#include "tst_result.moc"
