// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A file mapped into memory raises SIGBUS when a page past its end is read: another process (a training job
// rewriting its checkpoint, a cleanup script) truncated it after it was mapped. Without a handler the process
// dies there, leaving its temporary folder behind. A guarded read turns that signal, on the thread that raised it
// and only inside the read, into a false return, so the caller can fail with an error naming the file.
//
// The handler is installed once, the first time a read is guarded; outside guarded reads (and for a SIGBUS sent
// by kill) it hands the signal to the handler that was there before, so everything else behaves as without it.

#include "result.h"

#include <cstdint>
#include <string>
#include <type_traits>

namespace tessera {

namespace detail {
/// Calls fn(context); false when a bus error raised on this thread inside it left it.
bool runGuarded(void (*fn)(void*), void* context) noexcept;
} // namespace detail

/// Runs `read()` on this thread with a bus error turned into a false return (true when it completed). A bus
/// error leaves `read` at once, without destroying what it made: it should read and write memory and no more
/// (no locks, no files; what it allocates is lost). The cost is one sigsetjmp, so guard a slab, not an element.
template <typename Read>
bool runGuardedRead(Read&& read) noexcept
{
    using Fn = std::remove_reference_t<Read>;
    return detail::runGuarded([](void* context) { (*static_cast<Fn*>(context))(); }, &read);
}

/// The error for a file that changed while it was being read: `path`, the size it had when it was opened and the
/// size it has now (a file that did not shrink could not be read: a disk error).
Error fileChangedError(const std::string& path, std::uint64_t sizeWhenOpened);

/// The error for data (`what`: "record 'data/3'", "model.norm.weight") found past the end of `path`, of
/// `fileSize` bytes, when it is about to be read: the scan found it inside the file, so the file changed since.
Error pastEndError(const std::string& path, const std::string& what, std::uint64_t fileSize);

} // namespace tessera
