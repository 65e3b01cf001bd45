// tvm::ffi::TensorView (kda's subset): a non-owning view of a DLTensor that kda passes to a call.
// Tensor is accepted as a parameter type too and views the same DLTensor (kda owns every buffer;
// allocating tensors inside a call is not part of this subset).
#ifndef KDA_TVM_FFI_CONTAINER_TENSOR_H_
#define KDA_TVM_FFI_CONTAINER_TENSOR_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>

#include <cstddef>
#include <cstdint>

namespace tvm {
namespace ffi {

inline bool IsContiguous(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

inline size_t GetDataSize(size_t numel, DLDataType dtype) { return (numel * dtype.bits * dtype.lanes + 7) / 8; }

class TensorView {
 public:
  TensorView() = default;
  TensorView(const DLTensor* t) : t_(t) {}
  const DLTensor* GetDLTensorPtr() const { return t_; }
  void* data_ptr() const { return t_->data; }
  uint64_t byte_offset() const { return t_->byte_offset; }
  DLDevice device() const { return t_->device; }
  DLDataType dtype() const { return t_->dtype; }
  int32_t ndim() const { return t_->ndim; }
  int32_t dim() const { return t_->ndim; }
  ShapeView shape() const { return ShapeView(t_->shape, static_cast<size_t>(t_->ndim)); }
  ShapeView sizes() const { return shape(); }
  // kda passes compact row-major strides; a DLTensor without strides has an empty ShapeView here
  // and stride(i) computed from the shape.
  ShapeView strides() const {
    return t_->strides != nullptr ? ShapeView(t_->strides, static_cast<size_t>(t_->ndim)) : ShapeView();
  }
  int64_t size(int64_t i) const { return t_->shape[normalise(i)]; }
  int64_t stride(int64_t i) const {
    const int64_t j = normalise(i);
    if (t_->strides != nullptr) return t_->strides[j];
    int64_t s = 1;
    for (int64_t k = j + 1; k < t_->ndim; ++k) s *= t_->shape[k];
    return s;
  }
  int64_t numel() const { return shape().Product(); }
  bool IsContiguous() const { return ffi::IsContiguous(*t_); }
  bool is_contiguous() const { return IsContiguous(); }
  bool IsAligned(size_t alignment) const {
    return reinterpret_cast<uintptr_t>(static_cast<char*>(t_->data) + t_->byte_offset) % alignment == 0;
  }

 private:
  int64_t normalise(int64_t i) const {
    const int64_t n = t_->ndim;
    const int64_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) TVM_FFI_THROW(IndexError) << "dimension " << i << " out of range for a " << n << "-d tensor";
    return j;
  }
  const DLTensor* t_ = nullptr;
};

class Tensor : public TensorView {
 public:
  using TensorView::TensorView;
};

inline size_t GetDataSize(const DLTensor& t) {
  return GetDataSize(static_cast<size_t>(TensorView(&t).numel()), t.dtype);
}
inline size_t GetDataSize(const TensorView& t) { return GetDataSize(static_cast<size_t>(t.numel()), t.dtype()); }

}  // namespace ffi
}  // namespace tvm

#endif  // KDA_TVM_FFI_CONTAINER_TENSOR_H_
