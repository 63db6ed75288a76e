// SPDX-License-Identifier: GPL-3.0-or-later
// A tensor's diff detail stops when it is no longer wanted: the workbench cancels it when another row is chosen or
// the window closes, and waits for it there, so a detail that ran on through its passes over a large tensor held
// the closing window for seconds (bench_gui_stalls: 1.6 s on the 1.33 GB synthetic checkpoint).
#include "testutil.h"
#include "compare/tensor_diff.h"
#include "formats/scan.h"

#include <QTest>

#include <atomic>

using namespace tessera;

namespace {
/// Cancels once the operation reports step `at`.
class CancelAtStep final : public Progress {
public:
    explicit CancelAtStep(std::uint64_t at) : m_at(at) { }
    void report(std::uint64_t done, std::uint64_t, const std::string&) override
    {
        if (done >= m_at)
            m_canceled = true;
    }
    bool isCanceled() const override { return m_canceled; }

private:
    std::uint64_t m_at;
    std::atomic<bool> m_canceled { false };
};
} // namespace

class DetailCancel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void eachPassStopsWhenCanceled_data()
    {
        QTest::addColumn<int>("step");
        QTest::addRow("during the statistics") << 1;
        QTest::addRow("during the histograms and heatmap") << 2;
    }

    void eachPassStopsWhenCanceled()
    {
        QFETCH(int, step);
        auto info = scanCheckpoint(test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        QVERIFY_RESULT(info);
        CancelAtStep progress(static_cast<std::uint64_t>(step));
        auto detail = diffTensorDetail(*info, *info, "model.embed_tokens.weight", DiffOptions {}, progress);
        QVERIFY2(!detail, "a canceled detail was computed to the end");
        QVERIFY(detail.error().kind == ErrorKind::Canceled);

        // Not canceled, the same detail is whole.
        auto whole = diffTensorDetail(*info, *info, "model.embed_tokens.weight", DiffOptions {});
        QVERIFY_RESULT(whole);
        QVERIFY(!whole->heatmap.a.empty());
    }
};

QTEST_GUILESS_MAIN(DetailCancel)
#include "tst_detail_cancel.moc"
