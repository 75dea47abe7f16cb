#include "diffattn/tensor.h"

#include <dlpack/dlpack.h>

#include <sstream>

namespace diffattn {

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  std::int64_t expected = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::int64_t TensorView::span_bytes() const {
  if (numel() == 0) return 0;
  std::int64_t last = 0;
  for (int i = 0; i < ndim; ++i) last += (shape[i] - 1) * strides[i];
  return (last + 1) * static_cast<std::int64_t>(dtype_size(dtype));
}

std::string TensorView::shape_string() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

TensorView TensorView::Contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                                  Device device) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (auto s : shape) v.shape[i++] = s;
  std::int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.strides[d] = stride;
    stride *= v.shape[d];
  }
  return v;
}

namespace {

// kDLBool, which DLPack 0.8 added (NumPy exports bool arrays with it); the 0.6 header lacks the name.
constexpr std::uint8_t kDLBoolCode = 6;

Result<DType> dtype_from_dlpack(DLDataType t) {
  if (t.lanes != 1) return InvalidInput("DLPack tensors with vector lanes are not supported; pass lanes=1");
  if (t.code == kDLFloat && t.bits == 32) return DType::kFloat32;
  if (t.code == kDLFloat && t.bits == 16) return DType::kFloat16;
  if (t.code == kDLFloat && t.bits == 64) return DType::kFloat64;
  if (t.code == kDLBfloat && t.bits == 16) return DType::kBFloat16;
  if (t.code == kDLInt && t.bits == 8) return DType::kInt8;
  if (t.code == kDLInt && t.bits == 32) return DType::kInt32;
  if (t.code == kDLUInt && t.bits == 1) return DType::kBool;
  if (t.code == kDLUInt && t.bits == 8) return DType::kBool;  // torch.bool exports as uint8 in DLPack 0.6
  if (t.code == kDLBoolCode && t.bits == 8) return DType::kBool;
  return InvalidInput("DLPack dtype (code " + std::to_string(t.code) + ", bits " + std::to_string(t.bits) +
                      ") is not supported; use float32, float16, bfloat16, int8, int32 or bool");
}

DLDataType dtype_to_dlpack(DType d) {
  switch (d) {
    case DType::kFloat32: return {kDLFloat, 32, 1};
    case DType::kFloat16: return {kDLFloat, 16, 1};
    case DType::kFloat64: return {kDLFloat, 64, 1};
    case DType::kBFloat16: return {kDLBfloat, 16, 1};
    case DType::kInt8: return {kDLInt, 8, 1};
    case DType::kInt32: return {kDLInt, 32, 1};
    case DType::kBool: return {kDLUInt, 8, 1};
    case DType::kFloat8E4M3: return {kDLUInt, 8, 1};  // DLPack 0.6 has no fp8 code
  }
  return {kDLFloat, 32, 1};
}

}  // namespace

Result<TensorView> from_dlpack(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > kMaxDims)
    return InvalidInput("DLPack tensor has " + std::to_string(t.ndim) + " dimensions; diffattn views hold at most " +
                        std::to_string(kMaxDims));
  TensorView v;
  DIFFATTN_ASSIGN_OR_RETURN(v.dtype, dtype_from_dlpack(t.dtype));
  if (t.device.device_type == kDLCPU) {
    v.device = {DeviceKind::kCpu, 0};
  } else if (t.device.device_type == kDLCUDA) {
    v.device = {DeviceKind::kCuda, t.device.device_id};
  } else {
    return InvalidInput("DLPack device type " + std::to_string(t.device.device_type) +
                        " is not supported; pass a CPU or CUDA tensor");
  }
  const auto elem = static_cast<std::uint64_t>(dtype_size(v.dtype));
  if (t.byte_offset % elem != 0)
    return InvalidInput("DLPack byte_offset " + std::to_string(t.byte_offset) + " is not a multiple of the element size");
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  v.ndim = t.ndim;
  for (int i = 0; i < t.ndim; ++i) v.shape[i] = t.shape[i];
  if (t.strides == nullptr) {
    std::int64_t stride = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      v.strides[i] = stride;
      stride *= v.shape[i];
    }
  } else {
    for (int i = 0; i < t.ndim; ++i) v.strides[i] = t.strides[i];
  }
  return v;
}

DLTensor to_dlpack(TensorView& view) {
  DLTensor t{};
  t.data = view.data;
  t.device = {view.device.kind == DeviceKind::kCuda ? kDLCUDA : kDLCPU, view.device.index};
  t.ndim = view.ndim;
  t.dtype = dtype_to_dlpack(view.dtype);
  t.shape = view.shape.data();
  t.strides = view.strides.data();
  t.byte_offset = 0;
  return t;
}

}  // namespace diffattn
