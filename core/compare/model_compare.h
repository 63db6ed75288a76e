// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "merge/merge_plan.h"
#include "progress.h"
#include "result.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace tessera {

/// How strictly merged tensors must match the reference.
struct CompareOptions {
    double atol = 0;                 ///< absolute tolerance; with rtol 0 too, values must be bit-identical
    double rtol = 0;                 ///< relative tolerance: |a − b| ≤ atol + rtol·|b| (NaN equals NaN)
    unsigned threads = 0;            ///< 0 = one per core
    std::set<std::string> ignore;    ///< names not compared when absent on one side (verl's value-model lm_head)
    /// LoRA-fused weights: the fp32 matmul's rounding depends on the order it sums in, so they match within this
    /// fraction of the reference tensor's largest |value| (or atol + rtol·|b| when that is wider).
    double fusedTolerance = 1e-5;
};

/// The verdict on one tensor.
struct TensorComparison {
    enum class Verdict { Equal, Different, ShapeMismatch, DtypeMismatch, MissingInReference, OnlyInReference, Failed };
    std::string name;
    Verdict verdict = Verdict::Equal;
    std::string detail;              ///< human explanation for anything but Equal
    std::uint64_t mismatches = 0;    ///< elements outside the tolerance
    std::uint64_t elements = 0;
    double maxAbsDiff = 0;           ///< over mismatching floating-point elements
    std::string note;                ///< how it was compared when not bit for bit ("LoRA-fused: within …")
};

/// The per-tensor report of `tessera test`.
struct CompareReport {
    std::string reference;
    std::vector<TensorComparison> tensors; ///< merged tensors in plan order, then reference-only ones
    std::size_t failures() const;
    bool ok() const { return failures() == 0; }
    /// One line per tensor ("ok" or what differs) and a summary line.
    std::string text(bool onlyFailures = false) const;
};

/// Merges `plan` in memory tensor by tensor and compares each with the Hugging Face model at `referencePath`
/// (a folder, a .safetensors file or an index): names, shapes, dtypes and values. Nothing is written. Memory is
/// bounded by the largest tensor (the reference is read through its mapping, released as it goes).
/// An Error only when the reference cannot be read at all; differences are in the report.
Result<CompareReport> compareWithReference(const CheckpointInfo& info, const MergePlan& plan,
                                           const std::string& referencePath, const CompareOptions& options,
                                           Progress& progress = silentProgress());

} // namespace tessera
