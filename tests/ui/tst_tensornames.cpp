// SPDX-License-Identifier: GPL-3.0-or-later
// Names you can read (issue: the mapping table and the tree must never elide the layer, expert or projection).
#include "jobs/mappingjob.h"
#include "mappingfixtures.h"
#include "models/mappingfilterproxy.h"
#include "models/mappingmodel.h"
#include "pages/mappingpage.h"
#include "models/shardtreemodel.h"
#include "models/shardtreeproxy.h"
#include "pages/treepage.h"
#include "testutil.h"
#include "widgets/tensornameelide.h"

#include <QHeaderView>
#include <QProxyStyle>
#include <QStyleOptionViewItem>
#include <QTextLayout>
#include <QStyle>
#include <QSet>
#include <QTableView>
#include <QTest>
#include <QTreeView>

using namespace tessera::ui;

namespace {
/// Records what the view asks the style to draw in each cell, and the room the style has for its text.
class RecordingStyle : public QProxyStyle {
public:
    struct Cell {
        int column;
        QString text;
        QFont font;
        int room;
    };
    mutable QList<Cell> cells;

    void drawControl(ControlElement element, const QStyleOption* option, QPainter* painter,
                     const QWidget* widget) const override
    {
        if (const auto* item = qstyleoption_cast<const QStyleOptionViewItem*>(option); item && element == CE_ItemViewItem) {
            const int margin = pixelMetric(PM_FocusFrameHMargin, nullptr, widget) + 1;
            const QRect text = subElementRect(SE_ItemViewItemText, item, widget);
            cells.append({ item->index.column(), item->text, item->font, text.width() - 2 * margin });
        }
        QProxyStyle::drawControl(element, option, painter, widget);
    }
};

/// The width the style's own layout gives `text` (it elides on this, not on QFontMetrics).
qreal laidOutWidth(const QString& text, const QFont& font, int room)
{
    QTextLayout layout(text, font);
    QTextOption option;
    option.setWrapMode(QTextOption::ManualWrap);
    layout.setTextOption(option);
    layout.beginLayout();
    QTextLine line = layout.createLine();
    line.setLineWidth(room);
    layout.endLayout();
    return line.naturalTextWidth();
}

const char* const kVisionLanguage = "megatron_legacy_qwen25vl_tp2_pp1/global_step_10/actor";

/// A width measured in characters, so the expectations read plainly.
auto chars(int n)
{
    return [n](const QString& text) { return text.size() <= n; };
}
} // namespace

class TestTensorNames : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void aNameThatFitsIsLeftAlone()
    {
        const QString name = QStringLiteral("model.layers.3.self_attn.q_proj.weight");
        QCOMPARE(compactTensorName(name, chars(100)), name);
    }

    void componentsGoBeforeTheIndexOrTheProjection()
    {
        const QString name = QStringLiteral("model.layers.13.self_attn.q_proj.weight");
        // The shared prefix goes first, the word naming the index last.
        QCOMPARE(compactTensorName(name, chars(34), QStringLiteral("model.layers.")),
                 QStringLiteral("…layers.13.self_attn.q_proj.weight"));
        QCOMPARE(compactTensorName(name, chars(28), QStringLiteral("model.layers.")),
                 QStringLiteral("…13.self_attn.q_proj.weight"));
        QCOMPARE(compactTensorName(name, chars(20), QStringLiteral("model.layers.")), QStringLiteral("…13.…q_proj.weight"));
        // Without a shared prefix the top-level module stays.
        QCOMPARE(compactTensorName(name, chars(30)), QStringLiteral("model.layers.13.…q_proj.weight"));
        QCOMPARE(compactTensorName(name, chars(25)), QStringLiteral("model.…13.…q_proj.weight"));
        // Never shorter than the parts that tell rows apart, however narrow.
        QCOMPARE(compactTensorName(name, chars(3)), QStringLiteral("model.…13.…q_proj.weight"));
    }

    void expertsAndLoraFactorsKeepTheirParts()
    {
        const QString expert = QStringLiteral("decoder.layers.7.mlp.experts.local_experts.11.linear_fc2.weight");
        const QString compact = compactTensorName(expert, chars(10));
        QCOMPARE(compact, QStringLiteral("decoder.…7.…11.linear_fc2.weight"));
        const QString lora = QStringLiteral("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight");
        QCOMPARE(compactTensorName(lora, chars(10)), QStringLiteral("base_model.…0.…q_proj.lora_A.default.weight"));
    }

    void sharedPrefixIsWholeComponents()
    {
        QCOMPARE(sharedNamePrefix({ QStringLiteral("model.layers.0.a.weight"), QStringLiteral("model.layers.1.a.weight") }),
                 QStringLiteral("model.layers."));
        QCOMPARE(sharedNamePrefix({ QStringLiteral("model.norm.weight"), QStringLiteral("model.norms.weight") }),
                 QStringLiteral("model."));
        // Most rows are layers; the embedding and the head do not stop the prefix.
        QCOMPARE(sharedNamePrefix({ QStringLiteral("model.embed_tokens.weight"), QStringLiteral("model.layers.0.a.weight"),
                                    QStringLiteral("model.layers.1.a.weight"), QStringLiteral("model.layers.2.a.weight"),
                                    QStringLiteral("lm_head.weight") }),
                 QStringLiteral("model.layers."));
        QCOMPARE(sharedNamePrefix({ QStringLiteral("lm_head.weight"), QStringLiteral("model.norm.weight"),
                                    QStringLiteral("visual.blocks.0.weight") }),
                 QString());
        // A single name's parameter is never its own prefix.
        QCOMPARE(sharedNamePrefix({ QStringLiteral("model.norm.weight") }), QStringLiteral("model.norm."));
        QCOMPARE(sharedNamePrefix({}), QString());
        // A name without the prefix keeps its first component.
        QCOMPARE(compactTensorName(QStringLiteral("lm_head.proj.extra.weight"), chars(5), QStringLiteral("model.layers.")),
                 QStringLiteral("lm_head.…extra.weight"));
    }

    void distinctRowsStayDistinctWhenNarrow_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::newRow("legacy") << QString::fromLatin1(tessera::test::kLegacy);
        QTest::newRow("dist") << QString::fromLatin1(tessera::test::kDist);
        QTest::newRow("lora") << QStringLiteral("lora_llama_w2_fp32/global_step_10/actor");
    }

    void distinctRowsStayDistinctWhenNarrow()
    {
        QFETCH(QString, fixture);
        MappingModel model;
        model.setOutcome(MappingJob::evaluate(tessera::test::scanFixture(fixture.toStdString()), {}));
        QVERIFY(model.rowCount() > 0);
        for (const int column : { int(MappingModel::SourceColumn), int(MappingModel::TargetColumn) }) {
            QStringList names;
            for (int r = 0; r < model.rowCount(); ++r) {
                const QString name = model.index(r, column).data().toString();
                if (name != QStringLiteral("—"))
                    names << name;
            }
            const QString shared = sharedNamePrefix(names);
            QSet<QString> full;
            QSet<QString> compact;
            for (const QString& name : names) {
                full.insert(name);
                compact.insert(compactTensorName(name, chars(12), shared));
            }
            QCOMPARE(compact.size(), full.size());
        }
    }

    void expertNamesStayDistinctWhenNarrow()
    {
        QStringList megatron, hf;
        for (int layer = 0; layer < 12; ++layer)
            for (int e = 0; e < 16; ++e)
                for (const char* fc : { "linear_fc1", "linear_fc2" }) {
                    megatron << QStringLiteral("decoder.layers.%1.mlp.experts.%2.weight%3").arg(layer).arg(QLatin1String(fc)).arg(e);
                    megatron << QStringLiteral("decoder.layers.%1.mlp.experts.local_experts.%3.%2.weight").arg(layer).arg(QLatin1String(fc)).arg(e);
                    hf << QStringLiteral("model.layers.%1.mlp.experts.%2.%3.weight").arg(layer).arg(e).arg(QLatin1String(fc));
                }
        for (const QStringList* names : { &megatron, &hf }) {
            const QString shared = sharedNamePrefix(*names);
            QSet<QString> compact;
            for (const QString& name : *names)
                compact.insert(compactTensorName(name, chars(8), shared));
            QCOMPARE(compact.size(), int(names->size()));
        }
    }

    void towersKeepTheirNames()
    {
        // A vision-language checkpoint: two towers of layers, neither the "shared" one, each row keeps its tower.
        MappingModel model;
        model.setOutcome(MappingJob::evaluate(tessera::test::scanFixture(kVisionLanguage), {}));
        QVERIFY(model.rowCount() > 0);
        int vision = 0;
        for (const int column : { int(MappingModel::SourceColumn), int(MappingModel::TargetColumn) }) {
            QStringList names;
            for (int r = 0; r < model.rowCount(); ++r)
                if (const QString name = model.index(r, column).data().toString(); name != QStringLiteral("—"))
                    names << name;
            const QString shared = sharedNamePrefix(names);
            for (const QString& name : names) {
                const QString tower = name.section(QLatin1Char('.'), 0, 0) + QLatin1Char('.');
                if (!tower.startsWith(QStringLiteral("vision_model.")) && !tower.startsWith(QStringLiteral("visual.")))
                    continue;
                ++vision;
                const QString compact = compactTensorName(name, chars(12), shared);
                QVERIFY2(compact.startsWith(tower), qPrintable(name + QStringLiteral(" → ") + compact));
            }
        }
        QVERIFY(vision > 10);
    }

    void narrowNamesAreCutBetweenComponents()
    {
        // Too narrow even for the parts that tell rows apart: whole components go, never part of a word.
        const QString name = QStringLiteral("model.layers.0.post_attention_layernorm.weight");
        for (int width = 1; width < name.size(); ++width) {
            const QString compact = compactTensorName(name, chars(width), QStringLiteral("model.layers."));
            QString cut = cutTensorName(compact, chars(width));
            // Each dotted part is a whole component of the name, after the "…" that stands for dropped ones.
            for (QString part : cut.split(QLatin1Char('.')))
                QVERIFY2(part.remove(QStringLiteral("…")).isEmpty() || name.split(QLatin1Char('.')).contains(part),
                         qPrintable(QStringLiteral("%1 at %2 characters").arg(cut).arg(width)));
            if (width >= 4)
                QVERIFY2(cut.size() <= width, qPrintable(cut));
            QVERIFY2(cut.remove(QStringLiteral("…")).split(QLatin1Char('.')).contains(QStringLiteral("0")) || width < 4,
                     qPrintable(cut)); // the layer stays
        }
        QCOMPARE(cutTensorName(QStringLiteral("…0.…post_attention_layernorm.weight"), chars(12)), QStringLiteral("…0.…"));
        QCOMPARE(cutTensorName(QStringLiteral("…0.…q_proj.weight"), chars(14)), QStringLiteral("…0.…q_proj.…"));
    }

    void nameColumnsAreWideEnoughForTheKeptParts()
    {
        // At 1280×720 the Mapping table is about 700 pixels wide: each name column still shows every name's kept
        // parts whole (the other columns go a scroll away), and the tree's does too.
        const auto nothingFits = [](const QString&) { return false; };
        MappingPage mapping;
        mapping.resize(700, 500);
        mapping.show();
        mapping.setCheckpoint(tessera::test::scanFixture(tessera::test::kLegacy));
        QTRY_VERIFY(!mapping.job()->isBusy());
        auto* table = mapping.findChild<QTableView*>();
        const QFontMetrics metrics(table->font());
        const int margins = 2 * (table->style()->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, table) + 1);
        for (const int column : { int(MappingModel::SourceColumn), int(MappingModel::TargetColumn) }) {
            const auto* delegate = qobject_cast<TensorNameDelegate*>(table->itemDelegateForColumn(column));
            const int room = table->horizontalHeader()->sectionSize(column) - margins;
            for (int r = 0; r < mapping.model()->rowCount(); ++r) {
                const QString shortest = compactTensorName(mapping.model()->index(r, column).data().toString(), nothingFits,
                                                           delegate->sharedPrefix());
                QVERIFY2(metrics.horizontalAdvance(shortest) <= room,
                         qPrintable(QStringLiteral("%1 in %2 px").arg(shortest).arg(room)));
            }
        }
        TreePage tree;
        tree.resize(480, 500);
        tree.show();
        const auto checkpoint = tessera::test::scanFixture(tessera::test::kLegacy);
        tree.setCheckpoint(checkpoint);
        const auto* delegate = qobject_cast<TensorNameDelegate*>(tree.view()->itemDelegateForColumn(0));
        const QModelIndex row = tree.proxy()->mapFromSource(tree.model()->indexForTensor(0));
        const int indent = tree.view()->visualRect(row).left() + tree.view()->header()->sectionViewportPosition(0);
        const int room = tree.view()->header()->sectionSize(0) - indent - margins;
        for (const auto& tensor : checkpoint->tensors) {
            const QString shortest = compactTensorName(QString::fromStdString(tensor.name), nothingFits, delegate->sharedPrefix());
            QVERIFY2(metrics.horizontalAdvance(shortest) <= room, qPrintable(QStringLiteral("%1 in %2 px").arg(shortest).arg(room)));
        }
    }

    void drawnNamesAreNeverElidedByTheStyle_data()
    {
        QTest::addColumn<int>("width");
        for (const int width : { 560, 640, 700, 760, 820, 900, 1000 })
            QTest::newRow(qPrintable(QString::number(width))) << width;
    }

    void drawnNamesAreNeverElidedByTheStyle()
    {
        // What the delegate hands the style fits the style's own measure, so the style never cuts a word of it.
        QFETCH(int, width);
        RecordingStyle style;
        MappingPage mapping;
        auto* table = mapping.findChild<QTableView*>();
        table->setStyle(&style);
        mapping.resize(width, 500);
        mapping.show();
        mapping.setCheckpoint(tessera::test::scanFixture(tessera::test::kLegacy));
        QTRY_VERIFY(!mapping.job()->isBusy());
        style.cells.clear();
        table->grab();
        int names = 0;
        for (const auto& cell : style.cells) {
            if (cell.column != MappingModel::SourceColumn && cell.column != MappingModel::TargetColumn)
                continue;
            ++names;
            QVERIFY2(laidOutWidth(cell.text, cell.font, cell.room) <= cell.room,
                     qPrintable(QStringLiteral("%1 in %2 px").arg(cell.text).arg(cell.room)));
        }
        QVERIFY(names > 10);
    }

    void sharedAndRoutedExpertsReadApart()
    {
        const auto checkpoint = tessera::test::scanFixture("megatron_dist_deepseekv3_tp2_pp1/global_step_10/actor");
        QStringList names;
        for (const auto& tensor : checkpoint->tensors)
            names << QString::fromStdString(tensor.name);
        const QString shared = sharedNamePrefix(names);
        QSet<QString> compact;
        for (const QString& name : names)
            compact.insert(compactTensorName(name, chars(8), shared));
        QCOMPARE(compact.size(), int(names.size()));
        const QString sharedFc1 = compactTensorName(QStringLiteral("decoder.layers.1.mlp.shared_experts.linear_fc1.weight"), chars(8), shared);
        const QString routedFc1 = compactTensorName(QStringLiteral("decoder.layers.1.mlp.experts.experts.linear_fc1.weight"), chars(8), shared);
        QVERIFY2(sharedFc1.contains(QStringLiteral("shared_experts")), qPrintable(sharedFc1));
        QVERIFY2(routedFc1.contains(QStringLiteral("experts")), qPrintable(routedFc1));
        QVERIFY(sharedFc1 != routedFc1);
    }

    void layerColumnKeepsTheTowersApart()
    {
        QVERIFY(MappingModel::layerText(QStringLiteral("vision_model.decoder.layers.3.mlp.linear_fc1.weight"))
                != MappingModel::layerText(QStringLiteral("language_model.decoder.layers.3.mlp.linear_fc1.weight")));
        QVERIFY(MappingModel::layerText(QStringLiteral("visual.blocks.3.mlp.up_proj.weight"))
                != MappingModel::layerText(QStringLiteral("model.layers.3.mlp.up_proj.weight")));
        MappingModel model;
        model.setOutcome(MappingJob::evaluate(tessera::test::scanFixture(kVisionLanguage), {}));
        MappingFilterProxy proxy;
        proxy.setSourceModel(&model);
        proxy.sort(MappingModel::LayerColumn, Qt::AscendingOrder);
        // Sorted by layer, each tower's rows come together: the tower changes once among the rows with a layer.
        QStringList towers;
        for (int r = 0; r < proxy.rowCount(); ++r) {
            const QString layer = proxy.index(r, MappingModel::LayerColumn).data().toString();
            if (layer.isEmpty())
                continue;
            const QString source = proxy.index(r, MappingModel::SourceColumn).data().toString();
            const QString tower = source.startsWith(QStringLiteral("vision_model.")) ? QStringLiteral("vision") : QStringLiteral("language");
            if (towers.isEmpty() || towers.last() != tower)
                towers << tower;
        }
        QCOMPARE(towers.size(), 2);
    }

    void layerColumnGroupsRowsByLayer()
    {
        qulonglong three = 0, ten = 0, expert = 0, none = 0;
        QCOMPARE(MappingModel::layerText(QStringLiteral("model.layers.3.mlp.up_proj.weight"), &three), QStringLiteral("3"));
        QCOMPARE(MappingModel::layerText(QStringLiteral("decoder.layers.10.self_attention.linear_qkv.weight"), &ten),
                 QStringLiteral("10"));
        QCOMPARE(MappingModel::layerText(QStringLiteral("decoder.layers.3.mlp.experts.linear_fc1.weight5"), &expert),
                 QStringLiteral("3 · expert 5"));
        QCOMPARE(MappingModel::layerText(QStringLiteral("model.layers.3.mlp.experts.5.up_proj.weight")),
                 QStringLiteral("3 · expert 5"));
        QCOMPARE(MappingModel::layerText(QStringLiteral("lm_head.weight"), &none), QString());
        QVERIFY(three < expert && expert < ten && ten < none); // numeric, experts within their layer, the rest last

        MappingModel model;
        model.setOutcome(MappingJob::evaluate(tessera::test::scanFixture(tessera::test::kLegacy), {}));
        MappingFilterProxy proxy;
        proxy.setSourceModel(&model);
        proxy.sort(MappingModel::LayerColumn, Qt::AscendingOrder);
        qulonglong previous = 0;
        QSet<QString> layers;
        for (int r = 0; r < proxy.rowCount(); ++r) {
            const qulonglong key = proxy.index(r, MappingModel::LayerColumn).data(tessera::ui::SortRole).toULongLong();
            QVERIFY(key >= previous);
            previous = key;
            layers.insert(proxy.index(r, MappingModel::LayerColumn).data().toString());
        }
        QVERIFY(layers.contains(QStringLiteral("0")) && layers.contains(QStringLiteral("1")));
    }

    void viewsDrawNamesThroughTheDelegate()
    {
        MappingPage mapping;
        auto* table = mapping.findChild<QTableView*>();
        QVERIFY(table);
        QVERIFY(qobject_cast<TensorNameDelegate*>(table->itemDelegateForColumn(MappingModel::SourceColumn)));
        QVERIFY(qobject_cast<TensorNameDelegate*>(table->itemDelegateForColumn(MappingModel::TargetColumn)));
        TreePage tree;
        QVERIFY(qobject_cast<TensorNameDelegate*>(tree.view()->itemDelegateForColumn(0)));
    }

    void nameColumnsShareTheWidthUntilTheUserWidensOne()
    {
        MappingPage page;
        page.resize(1000, 600);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        page.setCheckpoint(tessera::test::scanFixture(tessera::test::kLegacy));
        QTRY_VERIFY(!page.job()->isBusy());
        auto* table = page.findChild<QTableView*>();
        auto* header = table->horizontalHeader();
        QTRY_VERIFY(header->sectionSize(MappingModel::SourceColumn) > 100);
        QCOMPARE(header->sectionSize(MappingModel::SourceColumn), header->sectionSize(MappingModel::TargetColumn));
        QCOMPARE(header->sectionResizeMode(MappingModel::SourceColumn), QHeaderView::Interactive);
        // The user widens the Hugging Face names; a window resize keeps that width.
        header->resizeSection(MappingModel::TargetColumn, 900);
        page.resize(1100, 600);
        QTest::qWait(20);
        QCOMPARE(header->sectionSize(MappingModel::TargetColumn), 900);
    }
};

QTEST_MAIN(TestTensorNames)
#include "tst_tensornames.moc"
