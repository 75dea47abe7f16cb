#pragma once
// Contiguous [B, seq, heads, D] buffers addressed by rows of one head: the Ulysses exchange moves
// blocks of heads and tokens between such buffers with strided row copies.

#include <cstddef>
#include <cstdint>

#include "diffattn/status.h"
#include "diffattn/tensor.h"

namespace diffattn::parallel {

struct Rows {
  char* base = nullptr;
  std::int64_t seq = 0, heads = 0;
  std::size_t row_bytes = 0;  // one head's D elements
  char* at(std::int64_t b, std::int64_t s, std::int64_t h) const {
    return base + ((b * seq + s) * heads + h) * static_cast<std::int64_t>(row_bytes);
  }
};

Rows rows_of(const TensorView& t);

// dst[b, dst_s + i, dst_h + j] = src[b, src_s + i, src_h + j] for b < batch, i < n_seq, j < n_heads.
Status copy_heads(const Rows& dst, std::int64_t dst_s, std::int64_t dst_h, const Rows& src, std::int64_t src_s,
                  std::int64_t src_h, std::int64_t batch, std::int64_t n_seq, std::int64_t n_heads, DeviceKind device,
                  void* stream);

TensorView contiguous_view(void* data, DType dtype, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d,
                           Device device);

}  // namespace diffattn::parallel
