// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/whole_tensor.h"

#include "io/printable.h"
#include "merge/lora_fuse.h"
#include "merge/merge_plan.h"

namespace tessera {

/// Reads the whole tensor into fresh anonymous memory, in `dtype` as a merge converts (nullopt: its own dtype).
Result<PageBuffer> readWholeTensor(SourceFiles& files, const CheckpointInfo& info, int index,
                                   const std::function<bool()>& canceled, std::optional<DType> dtype)
{
    const TensorInfo& t = info.tensors[static_cast<std::size_t>(index)];
    auto planned = planTensorCopy(t, static_cast<std::size_t>(index), dtype);
    TESSERA_TRY(planned);
    if (const LoraDelta* d = info.loraDeltaFor(t.name)) {
        // A LoRA checkpoint's fused view: the weight is compared as the merge writes it, W + (B·A)·scale.
        auto indexOf = [&](const std::string& name) {
            for (std::size_t i = 0; i < info.tensors.size(); ++i)
                if (info.tensors[i].name == name)
                    return i;
            return info.tensors.size();
        };
        const std::size_t ia = indexOf(d->a), ib = indexOf(d->b);
        if (ia == info.tensors.size() || ib == info.tensors.size())
            return makeError(printableText(t.name) + ": its LoRA factors are not in the checkpoint");
        auto delta = planLoraDelta(*planned, t, info.tensors[ia], ia, info.tensors[ib], ib, d->scale, d->transposed);
        TESSERA_TRY(delta);
        planned->delta = std::make_shared<const PlannedDelta>(std::move(*delta));
    }
    auto buffer = PageBuffer::allocate(std::max<std::uint64_t>(planned->bytes, 1));
    TESSERA_TRY(buffer);
    TESSERA_TRY(materializeTensor(files, t, *planned, buffer->data(), canceled));
    return std::move(*buffer);
}

} // namespace tessera
