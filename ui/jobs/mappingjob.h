// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QThreadPool>
#include <QVector>

#include <memory>

namespace tessera {
struct MappingResult;
}

namespace tessera::ui {

/// What the user asked of the name mapping: the flags of `tessera merge` that change it, and the text of the
/// user rules file (`--param_mapping`) as the rules editor holds it.
struct MappingSettings {
    QString rulesText;          ///< user rules layered over the built-in family; blank = built-in rules only
    QString rulesName;          ///< the file the rules came from (or were saved to); empty while only in the editor
    QString hfConfigDir;        ///< --hf_model_path; empty = found next to the checkpoint
    QString ignoreMissing;      ///< --ignore_missing_params
    bool strict = true;         ///< --strict (default) / --no_strict
    bool valueModel = false;    ///< --is-value-model; false = detected from the output layer's shape
    bool tieWordEmbeddings = false; ///< --tie-word-embedding

    bool hasRules() const { return !rulesText.trimmed().isEmpty(); }
    /// How messages and the table name the user rules: the file, or "rules editor".
    QString rulesOrigin() const;
    bool operator==(const MappingSettings& other) const;
    bool operator!=(const MappingSettings& other) const { return !(*this == other); }
};

/// One evaluation of the mapping, immutable once published.
struct MappingOutcome {
    quint64 generation = 0;
    CheckpointPtr source;                               ///< the checkpoint it was computed for
    bool megatron = false;                              ///< names went through mapMegatronToHf
    std::shared_ptr<const tessera::MappingResult> result; ///< the table; null when no mapping could be tried
    QVector<int> tensorIndex;                           ///< per row: index into source->tensors, -1 if none
    /// What a merge writes: the Hugging Face-named checkpoint (Megatron) or the source itself. Null on error.
    CheckpointPtr mapped;
    QString error;                                      ///< why no mapping could be tried (config, rules file)
    int errorLine = 0;                                  ///< 1-based line of the error in the rules text, 0 if unknown
    int errorColumn = 0;
    qint64 milliseconds = 0;                            ///< time the evaluation took
};

/// Evaluates the name mapping of the loaded checkpoint on a worker whenever the checkpoint or the settings
/// change. The Mapping page (table, rules editor) and the Merge panel (flags, plan) share one instance, so the
/// plan always merges the table the user sees. Requests made while a worker runs are coalesced into one more
/// run with the latest settings; results of superseded generations are dropped. The destructor waits.
class MappingJob : public QObject {
    Q_OBJECT
public:
    explicit MappingJob(QObject* parent = nullptr);
    ~MappingJob() override;

    /// Re-evaluates unless `checkpoint` is the one already loaded.
    void setCheckpoint(CheckpointPtr checkpoint);
    CheckpointPtr checkpoint() const { return m_checkpoint; }
    /// Re-evaluates unless nothing changed.
    void setSettings(const MappingSettings& settings);
    const MappingSettings& settings() const { return m_settings; }
    /// The latest delivered outcome (generation 0 before the first one).
    const MappingOutcome& outcome() const { return m_outcome; }
    /// True while the outcome does not yet reflect the current checkpoint and settings.
    bool isBusy() const { return m_outcome.generation != m_generation; }

    /// The evaluation itself, synchronous: Megatron layouts through mapMegatronToHf (the same call
    /// `tessera merge` makes, with the editor text as the --param_mapping file), other layouts as identity rows
    /// with PEFT/LoRA names and tied heads flagged. Thread-safe; used by the worker and by tests.
    static MappingOutcome evaluate(const CheckpointPtr& checkpoint, const MappingSettings& settings);

Q_SIGNALS:
    void settingsChanged(const tessera::ui::MappingSettings& settings);
    void started();
    void finished(const tessera::ui::MappingOutcome& outcome);

private:
    void schedule();
    void launch();

    CheckpointPtr m_checkpoint;
    MappingSettings m_settings;
    MappingOutcome m_outcome;
    quint64 m_generation = 0;
    bool m_running = false;
    QThreadPool m_pool;
    QFutureWatcher<MappingOutcome>* m_watcher;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::MappingSettings)
Q_DECLARE_METATYPE(tessera::ui::MappingOutcome)
