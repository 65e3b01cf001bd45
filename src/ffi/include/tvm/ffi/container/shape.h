// tvm::ffi::ShapeView (kda's subset): a non-owning array of int64 extents or strides.
#ifndef KDA_TVM_FFI_CONTAINER_SHAPE_H_
#define KDA_TVM_FFI_CONTAINER_SHAPE_H_

#include <tvm/ffi/error.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tvm {
namespace ffi {

class ShapeView {
 public:
  ShapeView() = default;
  ShapeView(const int64_t* data, size_t size) : data_(data), size_(size) {}
  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  int64_t at(int64_t i) const {
    if (i < 0 || static_cast<size_t>(i) >= size_)
      TVM_FFI_THROW(IndexError) << "index " << i << " out of range " << size_;
    return data_[i];
  }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t front() const { return data_[0]; }
  int64_t back() const { return data_[size_ - 1]; }
  int64_t Product() const {
    int64_t p = 1;
    for (size_t i = 0; i < size_; ++i) p *= data_[i];
    return p;
  }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ffi
}  // namespace tvm

#endif  // KDA_TVM_FFI_CONTAINER_SHAPE_H_
