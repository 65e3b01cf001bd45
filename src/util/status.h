// Status and Result: expected failures as values (no exceptions below main).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace kda {

// What went wrong, coarse enough to map onto exit codes (see cli/exit_code.h).
enum class ErrorKind {
  kBadInput,  // the user's input is malformed or inconsistent (exit 2)
  kNotFound,  // a named file, task or workload does not exist (exit 2)
  kFailed,    // the evaluated thing failed (exit 1)
  kIo,        // the environment failed: disk, process, pipe (exit 3)
  kInternal,  // a bug or an impossible state (exit 3)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)), ok_(false) {}

  static Status ok_status() { return {}; }
  static Status bad_input(std::string m) { return {ErrorKind::kBadInput, std::move(m)}; }
  static Status not_found(std::string m) { return {ErrorKind::kNotFound, std::move(m)}; }
  static Status failed(std::string m) { return {ErrorKind::kFailed, std::move(m)}; }
  static Status io(std::string m) { return {ErrorKind::kIo, std::move(m)}; }
  static Status internal(std::string m) { return {ErrorKind::kInternal, std::move(m)}; }

  bool ok() const { return ok_; }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context ("reading x.json: ..."), keeping the kind.
  Status with_context(const std::string& context) const {
    if (ok_) return *this;
    return {kind_, context + ": " + message_};
  }

 private:
  ErrorKind kind_ = ErrorKind::kInternal;
  std::string message_;
  bool ok_ = true;
};

// Result<T>: a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  // On a temporary (`*f()`), the value itself, moved out: a reference into the dying Result would
  // dangle past the full expression (`for (auto& x : *f())` read freed memory once).
  T operator*() && { return std::move(value()); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kda

// Early return of a non-ok Status (works for Status and Result<T> returning functions).
#define KDA_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::kda::Status kda_status_ = (expr);        \
    if (!kda_status_.ok()) return kda_status_; \
  } while (0)

#define KDA_CONCAT_INNER(a, b) a##b
#define KDA_CONCAT(a, b) KDA_CONCAT_INNER(a, b)
// KDA_ASSIGN_OR_RETURN(auto x, f()); binds x to the value or returns the error.
#define KDA_ASSIGN_OR_RETURN(decl, expr) KDA_ASSIGN_OR_RETURN_IMPL(KDA_CONCAT(kda_result_, __LINE__), decl, expr)
#define KDA_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  decl = std::move(tmp).value()
