#pragma once
// Turns a boolean key-padding keep-mask into the per-batch sequence lengths cuDNN's padding mask
// takes, and flags masks that are not a kept prefix (those cannot be expressed as lengths).

#include <cstdint>

#include "diffattn/status.h"

namespace diffattn::cudnn_attn {

struct KeyPaddingLengths {
  std::int32_t* seq_len_q = nullptr;   // [batch], every entry seqlen_q
  std::int32_t* seq_len_kv = nullptr;  // [batch], kept keys of each batch
  // [2]: 1 + the first batch whose kept keys are not a prefix, 1 + the first batch that keeps no
  // key; 0 when there is none.
  std::int32_t* flags = nullptr;
};

// `mask` is bool [batch, seqlen_kv] with the given element strides; `stream` is a cudaStream_t.
Status launch_key_padding_lengths(const std::uint8_t* mask, std::int64_t batch_stride, std::int64_t col_stride,
                                  int batch, int seqlen_q, int seqlen_kv, const KeyPaddingLengths& out,
                                  void* stream);

}  // namespace diffattn::cudnn_attn
