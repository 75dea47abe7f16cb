#include "parallel/head_rows.h"

#include "parallel/device_memory.h"

namespace diffattn::parallel {

Rows rows_of(const TensorView& t) {
  return {static_cast<char*>(t.data), t.size(1), t.size(2), static_cast<std::size_t>(t.size(3)) * dtype_size(t.dtype)};
}

Status copy_heads(const Rows& dst, std::int64_t dst_s, std::int64_t dst_h, const Rows& src, std::int64_t src_s,
                  std::int64_t src_h, std::int64_t batch, std::int64_t n_seq, std::int64_t n_heads, DeviceKind device,
                  void* stream) {
  for (std::int64_t b = 0; b < batch; ++b) {
    DIFFATTN_RETURN_IF_ERROR(copy_rows(dst.at(b, dst_s, dst_h), dst.heads * dst.row_bytes, src.at(b, src_s, src_h),
                                       src.heads * src.row_bytes, n_heads * src.row_bytes, n_seq, device, stream));
  }
  return Status::Ok();
}

TensorView contiguous_view(void* data, DType dtype, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d,
                           Device device) {
  return TensorView::Contiguous(data, dtype, {b, s, h, d}, device);
}

}  // namespace diffattn::parallel
