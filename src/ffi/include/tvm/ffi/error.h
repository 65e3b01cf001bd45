// Errors of tvm-ffi functions (kda's subset): tvm::ffi::Error carries a kind ("ValueError",
// "TypeError", "RuntimeError", "InternalError", ...) and a message; TVM_FFI_THROW(Kind) << ... and the
// TVM_FFI_ICHECK family build one and throw it when the statement ends. The exported wrapper
// (function.h) catches it and reports it to kda, whose verdict is RUNTIME_ERROR with the kind and
// message.
#ifndef KDA_TVM_FFI_ERROR_H_
#define KDA_TVM_FFI_ERROR_H_

#include <tvm/ffi/c_api.h>

#include <exception>
#include <sstream>
#include <string>
#include <utility>

namespace tvm {
namespace ffi {

class Error : public std::exception {
 public:
  Error(std::string kind, std::string message) : kind_(std::move(kind)), message_(std::move(message)) {}
  const std::string& kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string kind_, message_;
};

namespace details {

// Collects `<< ...` and throws the Error when the full expression ends.
class ErrorBuilder {
 public:
  // file: kda compiles a solution's sources as src/<path>; the message names <path>.
  ErrorBuilder(const char* kind, const char* file, int line) : kind_(kind) {
    if (file != nullptr && file[0] == 's' && file[1] == 'r' && file[2] == 'c' && file[3] == '/') file += 4;
    if (file != nullptr) stream_ << file << ":" << line << ": ";
  }
  ErrorBuilder(const ErrorBuilder&) = delete;
  ErrorBuilder& operator=(const ErrorBuilder&) = delete;
  template <typename T>
  ErrorBuilder& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  ~ErrorBuilder() noexcept(false) { throw Error(kind_, stream_.str()); }

 private:
  std::string kind_;
  std::ostringstream stream_;
};

// Lets `TVM_FFI_ICHECK(c) << "why"` be one statement that builds nothing when c holds.
struct Voidify {
  void operator&(ErrorBuilder&) {}
};

}  // namespace details
}  // namespace ffi
}  // namespace tvm

#define TVM_FFI_THROW(ErrorKind) ::tvm::ffi::details::ErrorBuilder(#ErrorKind, __FILE__, __LINE__)

#define TVM_FFI_CHECK(cond, ErrorKind)                                                                        \
  (cond) ? (void)0                                                                                            \
         : ::tvm::ffi::details::Voidify() & ::tvm::ffi::details::ErrorBuilder(#ErrorKind, __FILE__, __LINE__) \
                                                << "Check failed: (" #cond ") is false: "

#define TVM_FFI_ICHECK(cond) TVM_FFI_CHECK(cond, InternalError)

#define KDA_TVM_FFI_ICHECK_OP(x, y, op)                                                                                \
  ((x)op(y)) ? (void)0                                                                                                 \
             : ::tvm::ffi::details::Voidify() & ::tvm::ffi::details::ErrorBuilder("InternalError", __FILE__, __LINE__) \
                                                    << "Check failed: (" #x " " #op " " #y ") (" << (x) << " vs. "     \
                                                    << (y) << "): "

#define TVM_FFI_ICHECK_EQ(x, y) KDA_TVM_FFI_ICHECK_OP(x, y, ==)
#define TVM_FFI_ICHECK_NE(x, y) KDA_TVM_FFI_ICHECK_OP(x, y, !=)
#define TVM_FFI_ICHECK_LT(x, y) KDA_TVM_FFI_ICHECK_OP(x, y, <)
#define TVM_FFI_ICHECK_LE(x, y) KDA_TVM_FFI_ICHECK_OP(x, y, <=)
#define TVM_FFI_ICHECK_GT(x, y) KDA_TVM_FFI_ICHECK_OP(x, y, >)
#define TVM_FFI_ICHECK_GE(x, y) KDA_TVM_FFI_ICHECK_OP(x, y, >=)
#define TVM_FFI_ICHECK_NOTNULL(x) TVM_FFI_ICHECK((x) != nullptr)

#endif  // KDA_TVM_FFI_ERROR_H_
