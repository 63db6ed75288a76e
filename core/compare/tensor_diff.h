// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera diff A B` and the workbench's diff view: two checkpoints of any layout compared tensor by tensor.

#include "compare/config_compare.h"
#include "mapping/lora.h"
#include "merge/lora_plan.h"
#include "model/checkpoint.h"
#include "progress.h"
#include "result.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// How to compare, and how much detail to compute for one tensor.
struct DiffOptions {
    double atol = 0;           ///< absolute tolerance; allclose semantics |a − b| ≤ atol + rtol·|b|
    double rtol = 0;           ///< relative tolerance (to B, the reference); 0/0 means values must be equal
    unsigned threads = 0;      ///< tensors compared in parallel, and blocks of each; 0 = one per core
    int histogramBins = 64;    ///< bins of the value and difference histograms (detail only)
    int worstCount = 10;       ///< elements listed with the largest |a − b| (detail only)
    int heatmapMax = 128;      ///< the 2-D slice is reduced to at most this many rows and columns (detail only)
    std::optional<DType> dtypeA; ///< A's floating tensors read as a merge with this --dtype writes them
    bool atNarrowerDtype = false; ///< floating pairs of different widths compared at the narrower dtype, the wider
                                  ///< side rounded to it, as `tessera test` compares (else a dtype mismatch)
};

/// The verdict on one tensor name.
enum class DiffStatus {
    Pending,         ///< not compared yet (rows streamed before their statistics)
    Identical,       ///< same dtype, shape and bytes
    WithinTolerance, ///< values equal within atol/rtol, bytes not (also −0 vs +0 or other NaN bit patterns)
    Different,       ///< at least one element outside the tolerance (integer and bool tensors: any difference)
    MissingInA,      ///< only B has it
    MissingInB,      ///< only A has it
    ShapeMismatch,
    DtypeMismatch,   ///< values are still compared when both dtypes are floating point
    Failed,          ///< a tensor could not be read; `detail` says why
    Incomplete,      ///< a side lacks elements (no piece holds them: a rank is missing or truncated); the
                     ///< elements both sides hold are compared, the rest counted in missingA/missingB
};

/// "identical", "within tolerance", "different", "missing in A", "missing in B", "shape mismatch",
/// "dtype mismatch", "failed", "incomplete", "pending".
const char* diffStatusName(DiffStatus status);
/// Every final status (not Pending), in the order summaries and counts list them.
const std::vector<DiffStatus>& reportedDiffStatuses();

/// True for Identical and WithinTolerance.
bool diffStatusOk(DiffStatus status);

/// Statistics of one side's values. Floating tensors: min/max/mean/std over finite elements only.
struct SideStats {
    std::uint64_t finite = 0;  ///< elements counted in min/max/mean/std
    std::uint64_t nan = 0;
    std::uint64_t inf = 0;     ///< +inf and −inf
    std::uint64_t zeros = 0;
    double min = 0;
    double max = 0;
    double mean = 0;
    double std = 0;            ///< population standard deviation
};

/// The comparison of one tensor name.
struct TensorDiff {
    std::string name;
    DiffStatus status = DiffStatus::Pending;
    std::string detail;            ///< why, for anything but Identical ("3 of 4096 outside atol 0, rtol 0")
    int indexA = -1;               ///< index into A's CheckpointInfo::tensors, -1 when missing
    int indexB = -1;
    DType dtypeA = DType::Unknown;
    DType dtypeB = DType::Unknown;
    std::optional<DType> comparedAs; ///< both sides rounded to this dtype first (DiffOptions::atNarrowerDtype)
    Shape shapeA;
    Shape shapeB;
    std::uint64_t elements = 0;    ///< when the shapes match
    bool compared = false;         ///< values were read: bitEqual and differing are set
    bool numeric = false;          ///< values were compared as numbers: every statistic below is set (false for
                                   ///< float8 and complex, compared by their bytes only)
    bool bitEqual = false;         ///< the bytes are identical (memcmp)
    double maxAbsDiff = 0;         ///< max |a − b|; +inf when a NaN or an infinity sits opposite anything else
    double meanAbsDiff = 0;        ///< mean |a − b| over elements finite on both sides
    double maxRelDiff = 0;         ///< max |a − b| / |b| over finite elements that differ (+inf when b is 0)
    double cosine = 1;             ///< cosine similarity over elements finite on both sides (1 when both are 0)
    std::uint64_t differing = 0;   ///< elements with a ≠ b (NaN opposite NaN counts as equal)
    std::uint64_t outsideTolerance = 0; ///< elements failing |a − b| ≤ atol + rtol·|b|
    std::uint64_t nanOpposite = 0; ///< elements where one side is NaN and the other is not (maxAbsDiff is then +inf)
    std::int64_t worstIndex = -1;  ///< flat (row-major) index of the first element with the largest |a − b|
    std::uint64_t missingA = 0;    ///< elements no piece of A holds (a gap, never read as zeros): not compared,
    std::uint64_t missingB = 0;    ///< in no statistic; the status is then Incomplete
    std::uint64_t gaps = 0;        ///< elements either side lacks: not compared (the pair statistics leave them out)
    SideStats a;
    SideStats b;
    /// The elements both sides hold: what `differing` and `outsideTolerance` are counted of.
    std::uint64_t comparedElements() const { return elements - gaps; }
};

/// Every tensor of A and B, paired by name.
struct DiffReport {
    std::string pathA;
    std::string pathB;
    double atol = 0;
    double rtol = 0;
    /// A's tensors in A's order, then the tensors only B has, in B's order. The order never depends on threads.
    std::vector<TensorDiff> tensors;
    /// Where the two config.json files disagree on what the model is (compareModelConfigs); not a failure by
    /// itself, but the first thing to read when tensors are missing or differ in shape.
    std::vector<ConfigDifference> configDifferences;

    std::size_t count(DiffStatus status) const;
    /// Tensors that are neither identical nor within tolerance (missing ones included).
    std::size_t failures() const;
    bool ok() const { return failures() == 0; }
    /// "51 tensors: 48 identical, 2 within tolerance, 1 different; max |a−b| 0.0039"
    std::string summary() const;
};

/// Pairs the tensors of `a` and `b` by name, in report order, with their dtypes, shapes and the statuses known
/// without reading values (missing, shape mismatch); everything else is Pending. The rows the workbench shows
/// before any statistic is computed.
std::vector<TensorDiff> pairTensors(const CheckpointInfo& a, const CheckpointInfo& b, const DiffOptions& options = {});

/// Called (serialised, from worker threads) when the row at `index` of DiffReport::tensors is finished.
using DiffRowSink = std::function<void(std::size_t index, const TensorDiff& row)>;

/// Compares every tensor of `a` with the tensor of the same name in `b`, with the statistics kernel
/// (value_kernel.h): the blocks of each tensor on every thread. A side its files hold as it is compared is read
/// there, block by block (TensorValues); any other is assembled from its pieces (any layout), so memory stays within
/// the largest pair assembled at once whatever the thread count. Floating values are compared in float64 after a
/// bit-exact conversion; integer and bool tensors exactly; other dtypes (float8, complex) by their bytes. Progress
/// counts tensors; cancel is checked between blocks and returns canceledError(). Unreadable tensors become Failed
/// rows, not an Error.
Result<DiffReport> diffCheckpoints(const CheckpointInfo& a, const CheckpointInfo& b, const DiffOptions& options,
                                   Progress& progress = silentProgress(), const DiffRowSink& onRow = {});

/// An equal-width histogram.
struct Histogram {
    double lo = 0;                 ///< left edge of the first bin
    double hi = 0;                 ///< right edge of the last bin
    std::vector<double> counts;    ///< values counted per bin (non-finite values are left out)
    double binWidth() const { return counts.empty() ? 0 : (hi - lo) / static_cast<double>(counts.size()); }
    double binCenter(std::size_t i) const { return lo + (static_cast<double>(i) + 0.5) * binWidth(); }
};

/// A 2-D view of a tensor: the last dimension is the columns, all leading dimensions are folded into the rows
/// (a 1-D tensor is one row). Reduced to at most DiffOptions::heatmapMax rows and columns by blocks: A and B show
/// the mean of the finite values in each block, |A − B| the maximum, so a single differing element stays visible.
struct Heatmap {
    int rows = 0;                  ///< cells shown
    int cols = 0;
    std::int64_t sourceRows = 0;   ///< rows and columns of the folded tensor
    std::int64_t sourceCols = 0;
    std::vector<double> a;         ///< rows × cols, row-major; NaN where a block holds no finite value
    std::vector<double> b;
    std::vector<double> absDiff;
    /// rows × cols, each empty when both sides are complete: 1 where A (missingA) or B (missingB) holds none of the
    /// block's elements, or where none of them is held by both and so compared (missingDiff).
    std::vector<std::uint8_t> missingA;
    std::vector<std::uint8_t> missingB;
    std::vector<std::uint8_t> missingDiff;
    /// The source rows [rowBegin(r), rowBegin(r + 1)) make up cell row r.
    std::int64_t rowBegin(int r) const { return rows == 0 ? 0 : sourceRows * r / rows; }
    std::int64_t colBegin(int c) const { return cols == 0 ? 0 : sourceCols * c / cols; }
};

/// One element with a large |a − b|.
struct WorstElement {
    std::uint64_t flat = 0;        ///< row-major index
    Shape index;                   ///< the same as a multi-dimensional index
    double a = 0;
    double b = 0;
    double absDiff = 0;
    double relDiff = 0;            ///< |a − b| / |b|, +inf when b is 0
};

/// What the workbench shows for the selected tensor.
struct TensorDiffDetail {
    TensorDiff summary;            ///< the same row diffCheckpoints() computes
    Histogram valuesA;             ///< A's and B's values over one shared range
    Histogram valuesB;
    Histogram differences;         ///< a − b over elements finite on both sides
    Heatmap heatmap;
    std::vector<WorstElement> worst; ///< largest |a − b| first; ties by lowest index; only differing elements
};

/// Computes the detail of the tensor `name` (present in both, same shape). Reads only that tensor of each side.
/// An Error when the name is missing on a side, the shapes differ, or the values cannot be read or compared.
Result<TensorDiffDetail> diffTensorDetail(const CheckpointInfo& a, const CheckpointInfo& b, const std::string& name,
                                          const DiffOptions& options, Progress& progress = silentProgress());

/// One tensor on its own: what the workbench's Statistics window shows, with no B to compare against.
struct TensorStatistics {
    std::string name;
    DType dtype = DType::Unknown;
    Shape shape;
    std::uint64_t elements = 0;
    std::uint64_t missing = 0;     ///< elements no piece holds (a missing or truncated rank): in no statistic
    bool numeric = false;          ///< values were read as numbers (false for float8 and complex)
    SideStats stats;               ///< over the elements present; floating tensors: min/max/mean/std over finite ones
    Histogram values;              ///< the finite values present
};

/// Computes the statistics of tensor `name` of `checkpoint` (a LoRA weight as its fused value), reading only
/// that tensor, in two passes over its values (range, then histogram of `bins` bins). Progress counts the passes;
/// cancel is checked between chunks.
Result<TensorStatistics> tensorStatistics(const CheckpointInfo& checkpoint, const std::string& name, int bins = 64,
                                          Progress& progress = silentProgress());

/// How a LoRA checkpoint is read as a model, as `tessera merge` and `tessera test` read it with the same flags.
struct LoraReading {
    LoraSettings settings;                 ///< --lora_alpha, --use_rslora
    LoraOutput output = LoraOutput::Both;  ///< --lora: the fused model, the adapter, or the fused model when it can
    const CheckpointInfo* base = nullptr;  ///< --base_model, for an adapter-only checkpoint
};

/// `checkpoint` as the Hugging Face model its merge writes, so it pairs with one: Megatron names mapped, a LoRA
/// checkpoint as its fused model (the adapter alone when it has no base weights, or when `lora` asks for it),
/// anything else a copy. `configDir` overrides where config.json is looked for; mapping warnings and LoRA notes go
/// to `warnings`.
Result<CheckpointInfo> withHfNames(const CheckpointInfo& checkpoint, const std::string& configDir,
                                   std::vector<std::string>* warnings = nullptr, const LoraReading& lora = {});

/// The multi-dimensional index of the row-major `flat` index in `shape`.
Shape unflattenIndex(std::uint64_t flat, const Shape& shape);

} // namespace tessera
