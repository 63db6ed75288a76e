// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QStyledItemDelegate>

#include <functional>

class QFontMetrics;

namespace tessera::ui {

/// Shortens a dotted tensor name until `fits` accepts it, by whole components and never by the parts that tell
/// rows apart: a numeric component (layer, expert, stage index), the last two components (projection and
/// parameter), a LoRA component (lora_A, lora_B, base_layer…) and the module before it, an experts module
/// (shared_experts, experts) not followed by an index, and the first component (model, visual, lm_head…) stay.
/// Droppable components go in this order: those of `sharedPrefix` when the name starts with them (the leading
/// components most rows have, so dropping them loses nothing), then the others left to right, the word naming an
/// index ("layers", "experts") last.
/// Each run of dropped components shows as one "…". When even the kept parts do not fit, the result is the
/// shortest form (the caller elides it further, on the right so the index stays).
QString compactTensorName(const QString& name, const std::function<bool(const QString&)>& fits,
                          const QString& sharedPrefix = {});

/// `compact` (a compactTensorName() result) cut on the right at a component boundary until `fits` accepts it:
/// "…0.…post_attention_layernorm.weight" becomes "…0.…", never "…0.…post_attention_layern…". "…" when nothing fits.
QString cutTensorName(const QString& compact, const std::function<bool(const QString&)>& fits);

/// The leading dotted components most of `names` share ("model.layers." for a model's weights, though
/// the embedding and the head do not), empty if none. A name without them is never shortened by them, and a
/// dropped prefix shows as "…", so distinct names stay distinct. A prefix stops before it would set one stack of
/// layers apart from another (language_model.… beside vision_model.…): each keeps its tower's name.
QString sharedNamePrefix(const QStringList& names);

/// The width the widest of `names` needs in a view's cell once shortened as far as compactTensorName() goes (its
/// kept parts, `sharedPrefix` dropped), with the cell's text margins: a name column that wide cuts no name.
int compactNamesWidth(const QStringList& names, const QString& sharedPrefix, const QFontMetrics& metrics);

/// Draws tensor names with compactTensorName instead of Qt's character elision, which cut the layer index or the
/// projection out of the middle. Install on the name columns of a view; the full name stays in the tooltip.
class TensorNameDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    explicit TensorNameDelegate(QObject* parent = nullptr);
    /// Components every row shares, dropped first (see sharedNamePrefix).
    void setSharedPrefix(const QString& prefix) { m_sharedPrefix = prefix; }
    const QString& sharedPrefix() const { return m_sharedPrefix; }

    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;

private:
    QString m_sharedPrefix;
};

} // namespace tessera::ui
