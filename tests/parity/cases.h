#pragma once
// The parity harness's problems, in the manner of ggml's test-backend-ops: a generated list that
// covers dtypes, head sizes, GQA ratios, masks, causal, cross-attention, odd and tiny lengths,
// strided and non-contiguous layouts, LSE and packed batches, each filled with fresh random data.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "diffattn/problem.h"
#include "parity/host_tensors.h"

namespace diffattn::testing {

enum class Layout {
  kContiguous,  // [B, S, H, D] row-major
  kHeadMajor,   // stored [B, H, S, D], viewed as [B, S, H, D]
  kPackedQkv,   // q, k, v are slices of one [B, S, 3, H, D] buffer
  kPaddedRows,  // [B, S, H, D] with every token row padded by 8 spare elements
};

// Dense masks: kDense [B, H, Sq, Skv], kDenseBroadcast [1, 1, Sq, Skv], kDensePerBatch [B, 1, Sq, Skv],
// kDensePerHead [1, H, Sq, Skv].
enum class MaskShape { kNone, kKeyPadding, kDense, kDenseBroadcast, kDensePerBatch, kDensePerHead };

struct ParityCase {
  DType dtype = DType::kFloat32;
  std::int64_t batch = 1, seq_q = 7, seq_kv = 7, heads_q = 2, heads_kv = 2, head_size = 64, head_size_v = 64;
  bool causal = false;
  MaskShape mask = MaskShape::kNone;
  Layout layout = Layout::kContiguous;
  bool lse = false;
  bool varlen = false;
  std::optional<float> scale;
  bool fully_masked_rows = false;  // the mask hides every key of some rows
  bool prefix_padding = false;     // key-padding masks keep a prefix of the keys (sequence lengths)
  // Key-padding masks of a padded prompt placed first in a joint sequence (FLUX.1): the first
  // text_keys keys are text, of which the first prompt_keep are kept; every key after them is kept.
  std::int64_t text_keys = 0, prompt_keep = 0;
  // Self-attention over a latent video of these frames x height x width tokens (seq_q = seq_kv =
  // their product), carried by the call for sparse video backends; dense backends ignore it.
  std::optional<VideoGeometry> video;
  // Dense masks keep or hide whole blocks of kMaskBlock queries x kMaskBlock keys (block-diagonal
  // plus random blocks, random keys inside kept blocks), so that kernels meet key tiles a mask empties.
  bool block_mask = false;
  static constexpr std::int64_t kMaskBlock = 64;

  std::string name() const {
    static const char* layouts[] = {"contig", "headmajor", "packedqkv", "paddedrows"};
    static const char* masks[] = {"nomask", "keypad", "dense", "densebcast", "denseperbatch", "denseperhead"};
    std::string n = std::string(dtype_name(dtype)) + "_b" + std::to_string(batch) + "_sq" + std::to_string(seq_q) +
                    "_skv" + std::to_string(seq_kv) + "_h" + std::to_string(heads_q) + "x" +
                    std::to_string(heads_kv) + "_d" + std::to_string(head_size);
    if (head_size_v != head_size) n += "_dv" + std::to_string(head_size_v);
    n += std::string("_") + masks[static_cast<int>(mask)] + "_" + layouts[static_cast<int>(layout)];
    if (causal) n += "_causal";
    if (lse) n += "_lse";
    if (varlen) n += "_varlen";
    if (scale) n += "_scale";
    if (fully_masked_rows) n += "_fullymasked";
    if (prefix_padding) n += "_prefix";
    if (text_keys > 0) n += "_text" + std::to_string(prompt_keep) + "of" + std::to_string(text_keys);
    if (video)
      n += "_video" + std::to_string(video->frames) + "x" + std::to_string(video->height) + "x" +
           std::to_string(video->width);
    if (block_mask) n += "_blocks";
    return n;
  }
};

// Self-attention over a video geometry (text tokens included): Sq = Skv = its sequence length.
inline ParityCase video_case(DType dtype, const VideoGeometry& g, std::int64_t heads_q = 2, std::int64_t heads_kv = 2,
                             std::int64_t head_size = 64) {
  ParityCase c;
  c.dtype = dtype;
  c.video = g;
  c.seq_q = c.seq_kv = g.sequence_length();
  c.heads_q = heads_q, c.heads_kv = heads_kv;
  c.head_size = c.head_size_v = head_size;
  return c;
}

inline std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> cases;
  const std::int64_t head_sizes[] = {8, 64, 72, 80, 96, 128, 192, 256, 512};
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  const std::array<std::int64_t, 2> lengths[] = {{7, 7}, {129, 129}, {1, 129}, {129, 7}, {7, 129}, {129, 1}};
  const MaskShape masks[] = {MaskShape::kNone, MaskShape::kKeyPadding, MaskShape::kDense, MaskShape::kDenseBroadcast};
  const Layout layouts[] = {Layout::kContiguous, Layout::kHeadMajor, Layout::kPackedQkv, Layout::kPaddedRows};
  int idx = 0;
  for (DType dtype : dtypes)
    for (std::int64_t d : head_sizes) {
      ParityCase c;
      c.dtype = dtype;
      c.head_size = c.head_size_v = d;
      c.seq_q = lengths[idx % 6][0];
      c.seq_kv = lengths[idx % 6][1];
      const std::int64_t gqa = std::int64_t{1} << (idx % 3);
      c.heads_kv = d >= 256 ? 1 : 2;  // large heads keep the float64 oracle quick
      c.heads_q = c.heads_kv * gqa;
      c.mask = masks[idx % 4];
      c.layout = layouts[(idx / 4 + idx) % 4];
      if (c.layout == Layout::kPackedQkv && (c.heads_q != c.heads_kv || c.seq_q != c.seq_kv))
        c.layout = Layout::kHeadMajor;
      c.causal = idx % 5 == 1 || idx % 5 == 3;
      c.prefix_padding = (idx / 4) % 2 == 1;
      c.lse = idx % 2 == 0;
      c.batch = 1 + idx % 2;
      cases.push_back(c);
      ++idx;
    }
  for (DType dtype : dtypes) {
    ParityCase c;
    c.dtype = dtype;
    c.batch = 2, c.seq_q = 33, c.seq_kv = 70, c.heads_q = 4, c.heads_kv = 2, c.head_size = 64;
    c.head_size_v = 128;  // Dv != D
    c.mask = MaskShape::kKeyPadding;
    c.fully_masked_rows = true;
    c.lse = true;
    cases.push_back(c);

    ParityCase dense = c;
    dense.head_size = 128;
    dense.head_size_v = 72;
    dense.mask = MaskShape::kDense;
    dense.causal = true;
    dense.layout = Layout::kPaddedRows;
    cases.push_back(dense);

    ParityCase packed;
    packed.dtype = dtype;
    packed.varlen = true;
    packed.seq_q = 140;  // total packed rows, split into several sequences
    packed.seq_kv = 150;
    packed.heads_q = 4, packed.heads_kv = 1, packed.head_size = packed.head_size_v = 80;
    packed.lse = true;
    cases.push_back(packed);
    packed.causal = true;
    packed.layout = Layout::kHeadMajor;
    cases.push_back(packed);

    ParityCase scaled;
    scaled.dtype = dtype;
    scaled.seq_q = 257, scaled.seq_kv = 200, scaled.head_size = scaled.head_size_v = 64;
    scaled.scale = 0.3f;
    scaled.causal = true;
    scaled.lse = true;
    cases.push_back(scaled);
  }
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (std::int64_t d : {64, 128}) {
      ParityCase lengths;  // padding as fused kernels take it: per-batch key lengths
      lengths.dtype = dtype;
      lengths.batch = 2, lengths.seq_q = 100, lengths.seq_kv = 77, lengths.heads_q = 4, lengths.heads_kv = 2;
      lengths.head_size = lengths.head_size_v = d;
      lengths.mask = MaskShape::kKeyPadding;
      lengths.prefix_padding = true;
      lengths.lse = d == 128;
      cases.push_back(lengths);
    }
  // Latent videos with partial 4x4x4 cubes at the edges, and one of whole cubes.
  const std::array<VideoGeometry, 3> videos = {VideoGeometry{5, 6, 7}, VideoGeometry{4, 8, 8}, VideoGeometry{3, 5, 9}};
  for (std::size_t i = 0; i < videos.size(); ++i) {
    ParityCase video;
    video.dtype = dtypes[i];
    video.video = videos[i];
    video.seq_q = video.seq_kv = videos[i].tokens();
    video.batch = i == 2 ? 2 : 1;
    video.heads_q = i == 0 ? 4 : 2;
    video.heads_kv = 2;
    video.head_size = video.head_size_v = i == 1 ? 128 : 64;
    video.layout = i == 2 ? Layout::kHeadMajor : Layout::kContiguous;
    cases.push_back(video);
  }
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {  // ragged batches at the head sizes fused kernels take
    ParityCase ragged;
    ragged.dtype = dtype;
    ragged.varlen = true;
    ragged.seq_q = 300, ragged.seq_kv = 260;
    ragged.heads_q = 4, ragged.heads_kv = 2, ragged.head_size = ragged.head_size_v = dtype == DType::kFloat16 ? 64 : 128;
    ragged.lse = true;
    ragged.causal = dtype == DType::kBFloat16;
    cases.push_back(ragged);
  }
  // Dense masks of every broadcast form, over several query blocks and key tiles, some tiles empty.
  for (MaskShape mask : {MaskShape::kDense, MaskShape::kDenseBroadcast, MaskShape::kDensePerBatch,
                         MaskShape::kDensePerHead}) {
    ParityCase blocks;
    blocks.dtype = mask == MaskShape::kDensePerHead ? DType::kFloat16 : DType::kBFloat16;
    blocks.batch = 2, blocks.seq_q = 200, blocks.seq_kv = 330, blocks.heads_q = 4, blocks.heads_kv = 2;
    blocks.head_size = blocks.head_size_v = mask == MaskShape::kDensePerBatch ? 128 : 64;
    blocks.mask = mask;
    blocks.block_mask = true;
    blocks.lse = mask != MaskShape::kDenseBroadcast;
    blocks.fully_masked_rows = mask == MaskShape::kDensePerHead;
    cases.push_back(blocks);
  }
  ParityCase per_batch;  // random per-batch mask, no blocks
  per_batch.dtype = DType::kFloat16;
  per_batch.batch = 3, per_batch.seq_q = 40, per_batch.seq_kv = 90, per_batch.heads_q = 2, per_batch.heads_kv = 1;
  per_batch.head_size = per_batch.head_size_v = 64;
  per_batch.mask = MaskShape::kDensePerBatch;
  per_batch.lse = true;
  cases.push_back(per_batch);
  ParityCase no_keys;
  no_keys.seq_kv = 0;
  no_keys.lse = true;
  cases.push_back(no_keys);
  ParityCase no_batch;
  no_batch.batch = 0;
  cases.push_back(no_batch);
  return cases;
}

inline ProblemShape case_shape(const ParityCase& c) {
  ProblemShape s;
  s.dtype = c.dtype;
  s.batch = c.varlen ? 3 : c.batch;
  s.seqlen_q = c.seq_q;
  s.seqlen_kv = c.seq_kv;
  s.heads_q = c.heads_q;
  s.heads_kv = c.heads_kv;
  s.head_size = c.head_size;
  s.head_size_v = c.head_size_v;
  s.causal = c.causal;
  s.mask = c.mask == MaskShape::kNone         ? MaskKind::kNone
           : c.mask == MaskShape::kKeyPadding ? MaskKind::kKeyPadding
                                              : MaskKind::kDense;
  s.wants_lse = c.lse;
  s.varlen = c.varlen;
  s.video_geometry = c.video.has_value();
  return s;
}

// The buffers of one case and the problem that views them.
struct CaseData {
  ParityCase c;
  std::vector<std::unique_ptr<HostBuffer>> buffers;
  AttentionProblem problem;

  HostBuffer& add(DType dtype, std::int64_t elements) {
    buffers.push_back(std::make_unique<HostBuffer>(dtype, elements));
    return *buffers.back();
  }
};

inline TensorView input_view(CaseData& data, const ParityCase& c, std::int64_t seq, std::int64_t heads,
                             std::int64_t dim) {
  const std::int64_t b = c.varlen ? 1 : c.batch;
  if (c.layout == Layout::kHeadMajor) {
    HostBuffer& buf = data.add(c.dtype, b * seq * heads * dim);
    return permuted_view(buf.data(), c.dtype, {b, seq, heads, dim}, {0, 2, 1, 3});
  }
  const std::int64_t pad = c.layout == Layout::kPaddedRows ? 8 : 0;
  HostBuffer& buf = data.add(c.dtype, b * seq * (heads * dim + pad));
  TensorView v = TensorView::Contiguous(buf.data(), c.dtype, {b, seq, heads, dim});
  v.strides[1] = heads * dim + pad;
  v.strides[0] = seq * v.strides[1];
  return v;
}

// Splits `total` rows into three sequences; the middle one is empty when `with_empty`.
inline std::vector<std::int32_t> split_offsets(std::int64_t total, bool with_empty) {
  const auto t = static_cast<std::int32_t>(total);
  const std::int32_t first = t / 2 + 3;
  return {0, first, with_empty ? first : first + (t - first) / 3, t};
}

// A contiguous [B, S, H, D] copy of `view`, held by `data`, whose data starts one element into its
// buffer: for kernels' paths that cannot take 16-byte-aligned accesses.
inline TensorView misaligned_copy(CaseData& data, const TensorView& view) {
  HostBuffer& buf = data.add(view.dtype, view.numel() + 1);
  TensorView copy = TensorView::Contiguous(static_cast<char*>(buf.data()) + dtype_size(view.dtype), view.dtype,
                                           {view.size(0), view.size(1), view.size(2), view.size(3)});
  for (std::int64_t b = 0; b < view.size(0); ++b)
    for (std::int64_t s = 0; s < view.size(1); ++s)
      for (std::int64_t h = 0; h < view.size(2); ++h)
        for (std::int64_t e = 0; e < view.size(3); ++e)
          write_element(copy, element_offset(copy, {b, s, h, e}), read_element(view, element_offset(view, {b, s, h, e})));
  return copy;
}

inline std::unique_ptr<CaseData> make_case_data(const ParityCase& c, std::mt19937_64& rng) {
  auto data = std::make_unique<CaseData>();
  data->c = c;
  AttentionProblem& p = data->problem;
  const std::int64_t b = c.varlen ? 1 : c.batch;
  if (c.layout == Layout::kPackedQkv) {
    HostBuffer& buf = data->add(c.dtype, b * c.seq_q * 3 * c.heads_q * c.head_size);
    auto slice = [&](int which) {
      TensorView v;
      v.data = static_cast<char*>(buf.data()) + which * c.heads_q * c.head_size * dtype_size(c.dtype);
      v.dtype = c.dtype;
      v.ndim = 4;
      v.shape = {b, c.seq_q, c.heads_q, c.head_size};
      v.strides = {c.seq_q * 3 * c.heads_q * c.head_size, 3 * c.heads_q * c.head_size, c.head_size, 1};
      return v;
    };
    p.q = slice(0);
    p.k = slice(1);
    p.v = slice(2);
  } else {
    p.q = input_view(*data, c, c.seq_q, c.heads_q, c.head_size);
    p.k = input_view(*data, c, c.seq_kv, c.heads_kv, c.head_size);
    p.v = input_view(*data, c, c.seq_kv, c.heads_kv, c.head_size_v);
  }
  fill_normal(p.q, rng);
  fill_normal(p.k, rng, 1.0, 0.5);  // a shared key offset, as DiT keys carry, tests max-subtraction
  fill_normal(p.v, rng);
  p.out = input_view(*data, c, c.seq_q, c.heads_q, c.head_size_v);
  poison(p.out);
  p.causal = c.causal;
  p.scale = c.scale;
  p.video = c.video;

  std::bernoulli_distribution keep(0.75);
  if (c.mask == MaskShape::kKeyPadding) {
    HostBuffer& buf = data->add(DType::kBool, c.batch * c.seq_kv);
    p.mask = TensorView::Contiguous(buf.data(), DType::kBool, {c.batch, c.seq_kv});
    if (c.text_keys > 0) {
      for (std::int64_t b = 0; b < c.batch; ++b)
        for (std::int64_t j = 0; j < c.seq_kv; ++j)
          write_element(*p.mask, b * c.seq_kv + j, j < c.prompt_keep || j >= c.text_keys ? 1.0 : 0.0);
    } else if (c.prefix_padding) {
      std::uniform_int_distribution<std::int64_t> length(c.seq_kv > 1 ? 1 : 0, c.seq_kv);
      for (std::int64_t b = 0; b < c.batch; ++b) {
        const std::int64_t kept = length(rng);
        for (std::int64_t j = 0; j < c.seq_kv; ++j) write_element(*p.mask, b * c.seq_kv + j, j < kept ? 1.0 : 0.0);
      }
    } else {
      for_each_offset(*p.mask, [&](std::int64_t off) { write_element(*p.mask, off, keep(rng)); });
    }
    if (c.fully_masked_rows)  // the last batch keeps no key at all
      for (std::int64_t j = 0; j < c.seq_kv; ++j) write_element(*p.mask, (c.batch - 1) * c.seq_kv + j, 0.0);
  } else if (c.mask != MaskShape::kNone) {
    const bool per_batch = c.mask == MaskShape::kDense || c.mask == MaskShape::kDensePerBatch;
    const bool per_head = c.mask == MaskShape::kDense || c.mask == MaskShape::kDensePerHead;
    const std::int64_t mb = per_batch ? c.batch : 1, mh = per_head ? c.heads_q : 1;
    HostBuffer& buf = data->add(DType::kBool, mb * mh * c.seq_q * c.seq_kv);
    p.mask = TensorView::Contiguous(buf.data(), DType::kBool, {mb, mh, c.seq_q, c.seq_kv});
    if (c.block_mask) {
      std::bernoulli_distribution keep_block(0.3);
      const std::int64_t blk = ParityCase::kMaskBlock;
      const std::int64_t qb = (c.seq_q + blk - 1) / blk, kb = (c.seq_kv + blk - 1) / blk;
      for (std::int64_t x = 0; x < mb * mh; ++x) {
        std::vector<bool> kept(static_cast<std::size_t>(qb * kb));
        for (std::int64_t i = 0; i < qb; ++i)
          for (std::int64_t j = 0; j < kb; ++j) kept[static_cast<std::size_t>(i * kb + j)] = i == j || keep_block(rng);
        for (std::int64_t i = 0; i < c.seq_q; ++i)
          for (std::int64_t j = 0; j < c.seq_kv; ++j)
            write_element(*p.mask, (x * c.seq_q + i) * c.seq_kv + j,
                          kept[static_cast<std::size_t>(i / blk * kb + j / blk)] && keep(rng) ? 1.0 : 0.0);
      }
    } else {
      for_each_offset(*p.mask, [&](std::int64_t off) { write_element(*p.mask, off, keep(rng)); });
    }
    if (c.fully_masked_rows)  // query row 1 of every (batch, head) keeps no key
      for (std::int64_t x = 0; x < mb * mh; ++x)
        for (std::int64_t j = 0; j < c.seq_kv; ++j) write_element(*p.mask, (x * c.seq_q + 1) * c.seq_kv + j, 0.0);
  }
  if (c.varlen) {
    using Boundary = std::tuple<std::optional<TensorView>*, std::int64_t, bool>;
    for (auto [cu, total, with_empty] : std::initializer_list<Boundary>{{&p.cu_seqlens_q, c.seq_q, false},
                                                                        {&p.cu_seqlens_k, c.seq_kv, true}}) {
      const auto offsets = split_offsets(total, with_empty);
      HostBuffer& buf = data->add(DType::kInt32, static_cast<std::int64_t>(offsets.size()));
      *cu = TensorView::Contiguous(buf.data(), DType::kInt32, {static_cast<std::int64_t>(offsets.size())});
      for (std::size_t i = 0; i < offsets.size(); ++i) static_cast<std::int32_t*>(buf.data())[i] = offsets[i];
    }
    p.max_seqlen_q = c.seq_q;
    p.max_seqlen_k = c.seq_kv;
  }
  if (c.lse) {
    HostBuffer& buf = data->add(DType::kFloat32, b * c.heads_q * c.seq_q);
    p.lse = TensorView::Contiguous(buf.data(), DType::kFloat32, {b, c.heads_q, c.seq_q});
    poison(*p.lse);
  }
  return data;
}

}  // namespace diffattn::testing
