// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

/// Why an operation stopped: a failure, or the caller asked it to stop (Progress::isCanceled(), a cancel flag).
/// Callers tell a cancel by its kind, never by its words: context added on the way up changes the words only.
enum class ErrorKind { Failure, Canceled };

/// A failure the user can act on: the message names the file, key or rule involved.
struct Error {
    std::string message;
    ErrorKind kind = ErrorKind::Failure;

    bool isCanceled() const { return kind == ErrorKind::Canceled; }
    /// Returns a copy of the same kind whose message is prefixed with `context: ` (e.g. a file name).
    Error withContext(const std::string& context) const { return Error { context + ": " + message, kind }; }
};

/// A value or an Error. The core returns these instead of throwing.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : m_data(std::move(value)) { }
    Result(Error error) : m_data(std::move(error)) { }

    bool ok() const { return std::holds_alternative<T>(m_data); }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<T>(m_data); }
    const T& value() const& { return std::get<T>(m_data); }
    T&& value() && { return std::get<T>(std::move(m_data)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const { return std::get<Error>(m_data); }

private:
    std::variant<T, Error> m_data;
};

/// Result of an operation that yields nothing but may fail.
class [[nodiscard]] Status {
public:
    Status() = default;
    Status(Error error) : m_error(std::move(error)) { }
    static Status success() { return Status(); }

    bool ok() const { return !m_error.has_value(); }
    explicit operator bool() const { return ok(); }
    const Error& error() const { return *m_error; }

private:
    std::optional<Error> m_error;
};

inline Error makeError(std::string message) { return Error { std::move(message) }; }

/// The error of an operation stopped because its caller asked it to: "canceled", of kind Canceled.
inline Error canceledError() { return Error { "canceled", ErrorKind::Canceled }; }

} // namespace tessera

/// Propagates the error of a Result/Status expression out of the current function.
#define TESSERA_TRY(expr)                                                                                            \
    do {                                                                                                             \
        auto&& tesseraTryResult_ = (expr);                                                                           \
        if (!tesseraTryResult_)                                                                                      \
            return tesseraTryResult_.error();                                                                        \
    } while (0)
