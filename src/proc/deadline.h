// Deadline: a point on the monotonic clock (or "never") that blocking calls honour.
#pragma once

#include <chrono>
#include <climits>
#include <optional>

namespace kda::proc {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline never() { return Deadline(); }
  static Deadline at(Clock::time_point t) { return Deadline(t); }
  template <typename Rep, typename Period>
  static Deadline after(std::chrono::duration<Rep, Period> d) {
    return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(d));
  }
  // Non-positive seconds mean "never" (no timeout), matching the CLI's "0 = unlimited".
  static Deadline after_seconds(double seconds) {
    if (!(seconds > 0)) return never();
    return after(std::chrono::duration<double>(seconds));
  }

  bool is_never() const { return !at_.has_value(); }
  bool expired() const { return at_.has_value() && Clock::now() >= *at_; }

  // Milliseconds left, rounded up, for poll(2): -1 for never, 0 when expired.
  int poll_timeout_ms() const {
    if (!at_) return -1;
    auto left = *at_ - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
  }

  // The earlier of the two.
  Deadline min(const Deadline& other) const {
    if (is_never()) return other;
    if (other.is_never()) return *this;
    return *at_ < *other.at_ ? *this : other;
  }

 private:
  Deadline() = default;
  explicit Deadline(Clock::time_point t) : at_(t) {}
  std::optional<Clock::time_point> at_;
};

}  // namespace kda::proc
