// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A tensor's values as the statistics kernel reads them (value_kernel.h). Where its files hold it as it is
// compared — plain pieces stored in that dtype, each one run of the tensor (a Hugging Face file's tensors, FSDP's
// row shards) — it is read in place, block by block, into a small buffer of the thread comparing the block: nothing
// the size of the tensor is held, and no fresh memory is touched page by page. Anything else (gathered columns,
// conversions, LoRA fusing, quantized pieces) is assembled into memory of its own, as readWholeTensor() does.
// A piece that is a whole storage record of a ZIP archive (torch.save: a rank's shard) has its CRC-32 summed from
// the very bytes read for the comparison, block by block, and checked by verify() once they are all read: no
// second pass over the files, and no statistic of a record that fails it is ever reported.

#include "compare/value_kernel.h"
#include "merge/merge_engine.h"
#include "merge/source_files.h"
#include "model/checkpoint.h"
#include "result.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

class TensorValues {
public:
    /// True when tensor `index` of `info`, read in `dtype` (nullopt: its own), is read in place.
    static bool readsInPlace(const CheckpointInfo& info, int index, std::optional<DType> dtype = std::nullopt);

    /// Tensor `index` of `info` in `dtype` (nullopt: its own): in place when readsInPlace() and `inPlace` say so
    /// (its storage records' checksums checked first, as a merge checks them), else assembled by readWholeTensor().
    /// `files` must outlive the values.
    static Result<TensorValues> open(SourceFiles& files, const CheckpointInfo& info, int index,
                                     const std::function<bool()>& canceled, std::optional<DType> dtype = std::nullopt,
                                     bool inPlace = true);
    /// Values already in memory.
    static TensorValues inMemory(PageBuffer buffer, DType dtype);

    /// The values for valueSums(), with `missing` as their gaps; valid while this object lives, not across a move.
    ValueSpan span(const std::uint8_t* missing = nullptr) const;
    /// After the span was read whole: the checksums of the records read in place (a record read only in part, as
    /// by a comparison canceled halfway, is read again and checked on its own).
    Status verify(const std::function<bool()>& canceled = {}) const;
    DType dtype() const { return m_dtype; }
    /// The values in memory; null when they are read in place.
    const std::uint8_t* data() const { return m_buffer.data(); }
    /// Bytes held in memory for the values: 0 in place.
    std::uint64_t heldBytes() const { return m_buffer.size(); }

private:
    /// One piece: elements [first, first + count) of the tensor at byte `offset` of `file`.
    struct Run {
        std::uint64_t first = 0;
        std::uint64_t count = 0;
        std::uint64_t offset = 0;
        std::string file;
        std::size_t piece = 0; ///< index into TensorInfo::pieces
        int fd = -1;
        bool summed = false;   ///< the run is its whole storage record: its CRC-32 is summed as it is read
    };
    /// A CRC-32 of part of a run, as load() read it.
    struct Part {
        std::size_t run = 0;
        std::uint64_t first = 0; ///< element
        std::uint64_t count = 0;
        std::uint32_t crc = 0;
    };
    struct Parts {
        std::mutex mutex;
        std::vector<Part> parts;
    };
    static std::optional<std::vector<Run>> inPlaceRuns(const CheckpointInfo& info, int index,
                                                       std::optional<DType> dtype, DType& read);
    Status load(std::uint64_t first, std::uint64_t count, std::uint8_t* dst) const;

    DType m_dtype = DType::Unknown;
    PageBuffer m_buffer;
    std::vector<Run> m_runs;       ///< in place: by `first`, not overlapping
    const TensorInfo* m_tensor = nullptr;
    SourceFiles* m_files = nullptr;
    std::unique_ptr<Parts> m_parts = std::make_unique<Parts>();
};

} // namespace tessera
