// Result<T>: a value or an error message a user can act on.
//
// Functions below the CLI return Result instead of throwing, so the CLI can
// turn any failure into one clear line and a documented exit code. The error
// carries a kind so callers can keep "usage", "data", "transport" and
// "timeout" apart without parsing the message.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace diffeval::util {

// What went wrong, coarse enough for the CLI to choose an exit code.
// `no_match` is a usage error a caller may pass over: a selection (of
// groups) that matches nothing stored, where the caller tries several.
// other_questions: two groups to pair ran different questions (a data
// error that a report passes over, leaving the pair out, as no_match).
enum class ErrorKind { usage, no_match, data, other_questions, io, transport, timeout, internal };

struct Error {
    ErrorKind kind = ErrorKind::internal;
    std::string message;
};

// Build an Error of `kind` with `message`.
inline Error make_error(ErrorKind kind, std::string message) {
    return Error{kind, std::move(message)};
}

template <typename T> class [[nodiscard]] Result {
public:
    Result(T value) : m_v(std::move(value)) {}
    Result(Error error) : m_v(std::move(error)) {}

    bool ok() const { return m_v.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(m_v); }
    const T& value() const& { return std::get<0>(m_v); }
    T&& value() && { return std::get<0>(std::move(m_v)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const { return std::get<1>(m_v); }

private:
    std::variant<T, Error> m_v;
};

// Result of an operation with no value.
template <> class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : m_error(std::move(error)), m_ok(false) {}

    bool ok() const { return m_ok; }
    explicit operator bool() const { return ok(); }
    const Error& error() const { return m_error; }

private:
    Error m_error;
    bool m_ok = true;
};

} // namespace diffeval::util
