#pragma once
// Turns a boolean key-padding keep-mask into the per-batch lengths of cuDNN's padding mask: every
// batch's query length, and its keys up to and including the last kept one (at least one), so that
// cuDNN skips the padding after it. Keys dropped before it are the additive bias's to hide
// (mask_bias.h), which the same graph takes.

#include <cstdint>

#include "diffattn/status.h"

namespace diffattn::cudnn_attn {

struct KeyPaddingLengths {
  std::int32_t* seq_len_q = nullptr;   // [batch], every entry seqlen_q
  std::int32_t* seq_len_kv = nullptr;  // [batch], 1 + the last kept key (1 when no key is kept)
};

// `mask` is bool [batch, seqlen_kv] with the given element strides; `stream` is a cudaStream_t.
Status launch_key_padding_lengths(const std::uint8_t* mask, std::int64_t batch_stride, std::int64_t col_stride,
                                  int batch, int seqlen_q, int seqlen_kv, const KeyPaddingLengths& out,
                                  void* stream);

}  // namespace diffattn::cudnn_attn
