#include "diffattn/problem.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace diffattn {

std::string_view mask_kind_name(MaskKind kind) {
  switch (kind) {
    case MaskKind::kNone: return "none";
    case MaskKind::kKeyPadding: return "key_padding";
    case MaskKind::kDense: return "dense";
  }
  return "unknown";
}

float AttentionProblem::softmax_scale() const {
  if (scale) return *scale;
  const auto d = q.ndim == 4 ? q.size(3) : 0;
  return d > 0 ? 1.0f / std::sqrt(static_cast<float>(d)) : 1.0f;
}

MaskKind AttentionProblem::mask_kind() const {
  if (!mask) return MaskKind::kNone;
  return mask->ndim == 2 ? MaskKind::kKeyPadding : MaskKind::kDense;
}

std::optional<TensorView> repeated_row_as_key_padding(const AttentionProblem& problem) {
  if (!problem.mask || problem.mask->ndim != 4 || problem.q.ndim != 4 || problem.is_varlen()) return std::nullopt;
  const TensorView& m = *problem.mask;
  const bool one_row = (m.size(1) == 1 || m.stride(1) == 0) && (m.size(2) == 1 || m.stride(2) == 0);
  if (!one_row || m.size(0) != problem.q.size(0)) return std::nullopt;
  TensorView keys = m;
  keys.ndim = 2;
  keys.shape = {};
  keys.strides = {};
  keys.shape[0] = m.size(0), keys.shape[1] = m.size(3);
  keys.strides[0] = m.stride(0), keys.strides[1] = m.stride(3);
  return keys;
}

std::int64_t AttentionProblem::num_batches() const {
  if (cu_seqlens_q && cu_seqlens_q->ndim == 1) return cu_seqlens_q->size(0) - 1;
  return q.ndim == 4 ? q.size(0) : 0;
}

ProblemShape AttentionProblem::shape() const {
  ProblemShape s;
  s.dtype = q.dtype;
  s.device = q.device.kind;
  s.batch = num_batches();
  if (q.ndim == 4) {
    s.seqlen_q = q.size(1);
    s.heads_q = q.size(2);
    s.head_size = q.size(3);
  }
  if (k.ndim == 4) {
    s.seqlen_kv = k.size(1);
    s.heads_kv = k.size(2);
  }
  if (v.ndim == 4) s.head_size_v = v.size(3);
  if (is_varlen()) {
    s.varlen = true;
    if (max_seqlen_q > 0) s.seqlen_q = max_seqlen_q;
    if (max_seqlen_k > 0) s.seqlen_kv = max_seqlen_k;
  }
  s.causal = causal;
  s.mask = mask_kind();
  s.wants_lse = lse.has_value();
  s.video_geometry = video.has_value();
  s.gate = gate.has_value();
  return s;
}

namespace {

using Shape = std::vector<std::int64_t>;
using Named = std::initializer_list<std::pair<const TensorView*, const char*>>;

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

bool has_shape(const TensorView& t, const Shape& shape) {
  if (t.ndim != static_cast<int>(shape.size())) return false;
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] != shape[i]) return false;
  return true;
}

Status check_rank(const TensorView& t, std::string_view name, int rank, std::string_view layout) {
  if (t.ndim == rank) return Status::Ok();
  return InvalidInput(std::string(name) + " must have rank " + std::to_string(rank) + " " + std::string(layout) +
                      ", got rank " + std::to_string(t.ndim) + " with shape " + t.shape_string() +
                      "; reshape it to " + std::string(layout));
}

Status check_shape(const TensorView& t, std::string_view name, const Shape& expected, std::string_view layout) {
  if (has_shape(t, expected)) return Status::Ok();
  return InvalidInput(std::string(name) + " must have shape " + std::string(layout) + " = " + shape_text(expected) +
                      ", got " + t.shape_string() + "; pass a " + std::string(name) + " that matches q");
}

Status check_view_memory(const TensorView& t, std::string_view name) {
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      return InvalidInput(std::string(name) + " has a negative size in shape " + t.shape_string());
    if (t.strides[i] < 0)
      return InvalidInput(std::string(name) + " has a negative stride (" + std::to_string(t.strides[i]) +
                          " in dimension " + std::to_string(i) +
                          "); pass a view with non-negative strides, e.g. a contiguous copy");
  }
  if (t.data == nullptr && t.numel() > 0)
    return InvalidInput(std::string(name) + " " + t.shape_string() + " has no data pointer; pass allocated memory");
  return Status::Ok();
}

// Outputs written through a zero stride would have several elements land on one address.
Status check_writable(const TensorView& t, std::string_view name) {
  for (int i = 0; i < t.ndim; ++i)
    if (t.strides[i] == 0 && t.shape[i] > 1)
      return InvalidInput(std::string(name) + " has stride 0 in dimension " + std::to_string(i) +
                          " of size " + std::to_string(t.shape[i]) +
                          ", so several results would share one element; pass a dense output view");
  return Status::Ok();
}

Status check_attention_dtype(const TensorView& t, std::string_view name) {
  if (t.dtype == DType::kFloat32 || t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16)
    return Status::Ok();
  return InvalidInput(std::string(name) + " has dtype " + std::string(dtype_name(t.dtype)) +
                      "; attention takes float32, float16 or bfloat16");
}

Status check_same_dtype(const TensorView& t, std::string_view name, DType q_dtype) {
  if (t.dtype == q_dtype) return Status::Ok();
  return InvalidInput(std::string(name) + " has dtype " + std::string(dtype_name(t.dtype)) + " but q has " +
                      std::string(dtype_name(q_dtype)) + "; convert " + std::string(name) + " to " +
                      std::string(dtype_name(q_dtype)));
}

Status check_same_device(const TensorView& t, std::string_view name, const Device& device) {
  if (t.device == device) return Status::Ok();
  auto text = [](const Device& d) {
    return std::string(d.kind == DeviceKind::kCuda ? "cuda:" : "cpu:") + std::to_string(d.index);
  };
  return InvalidInput(std::string(name) + " lives on " + text(t.device) + " but q lives on " + text(device) +
                      "; move every tensor of the call to one device");
}

Status check_head_size(std::int64_t size, std::string_view what) {
  if (size >= kMinHeadSize && size <= kMaxHeadSize) return Status::Ok();
  return InvalidInput(std::string(what) + " " + std::to_string(size) + " is outside " +
                      std::to_string(kMinHeadSize) + ".." + std::to_string(kMaxHeadSize) +
                      "; split or pad heads to a supported size");
}

Status check_gqa(std::int64_t heads_q, std::int64_t heads_kv) {
  if (heads_q < 1 || heads_kv < 1)
    return InvalidInput("head counts must be >= 1, got q_heads=" + std::to_string(heads_q) + " and kv_heads=" +
                        std::to_string(heads_kv) + " (dimension 2 of q [B, Sq, Hq, D] and k [B, Skv, Hkv, D])");
  if (heads_q % heads_kv == 0) return Status::Ok();
  return InvalidInput("GQA requires query heads to be a multiple of KV heads, got q_heads=" + std::to_string(heads_q) +
                      " and kv_heads=" + std::to_string(heads_kv) + "; repeat or regroup the KV heads");
}

struct ByteRange {
  std::uintptr_t begin = 0, end = 0;
};

ByteRange byte_range(const TensorView& t) {
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data);
  return {begin, begin + static_cast<std::uintptr_t>(t.span_bytes())};
}

bool overlaps(const TensorView& a, const TensorView& b) {
  if (!(a.device == b.device) || a.numel() == 0 || b.numel() == 0) return false;
  const auto ra = byte_range(a), rb = byte_range(b);
  return ra.begin < rb.end && rb.begin < ra.end;
}

Status check_no_overlap(const TensorView& out, std::string_view out_name, const TensorView& in,
                        std::string_view in_name) {
  if (!overlaps(out, in)) return Status::Ok();
  return InvalidInput(std::string(out_name) + " overlaps " + std::string(in_name) +
                      " in memory; write the result to a separate buffer");
}

Status check_mask(const AttentionProblem& p, std::int64_t batch, std::int64_t sq, std::int64_t hq,
                  std::int64_t skv) {
  const TensorView& m = *p.mask;
  DIFFATTN_RETURN_IF_ERROR(check_view_memory(m, "mask"));
  if (m.dtype != DType::kBool)
    return InvalidInput("mask has dtype " + std::string(dtype_name(m.dtype)) +
                        "; pass a bool keep-mask (true keeps the key)");
  DIFFATTN_RETURN_IF_ERROR(check_same_device(m, "mask", p.q.device));
  if (p.is_varlen())
    return InvalidInput("mask cannot be combined with cu_seqlens; describe padding through cu_seqlens instead");
  if (m.ndim == 2) {
    if (has_shape(m, {batch, skv})) return Status::Ok();
    return InvalidInput("key-padding mask must have shape [B, Skv] = " + shape_text({batch, skv}) + ", got " +
                        m.shape_string() + "; or pass a dense mask [B|1, H|1, Sq, Skv]");
  }
  const bool dense_ok = m.ndim == 4 && (m.size(0) == batch || m.size(0) == 1) &&
                        (m.size(1) == hq || m.size(1) == 1) && m.size(2) == sq && m.size(3) == skv;
  if (dense_ok) return Status::Ok();
  return InvalidInput("mask must be a key-padding mask [B, Skv] = " + shape_text({batch, skv}) +
                      " or a dense mask [B|1, H|1, Sq, Skv] = [" + std::to_string(batch) + "|1, " +
                      std::to_string(hq) + "|1, " + std::to_string(sq) + ", " + std::to_string(skv) + "], got " +
                      m.shape_string());
}

Status check_lse(const AttentionProblem& p, std::int64_t batch, std::int64_t hq, std::int64_t sq) {
  const TensorView& l = *p.lse;
  DIFFATTN_RETURN_IF_ERROR(check_view_memory(l, "lse"));
  if (l.dtype != DType::kFloat32)
    return InvalidInput("lse has dtype " + std::string(dtype_name(l.dtype)) + "; pass a float32 lse buffer");
  DIFFATTN_RETURN_IF_ERROR(check_same_device(l, "lse", p.q.device));
  DIFFATTN_RETURN_IF_ERROR(check_rank(l, "lse", 3, "[B, Hq, Sq]"));
  DIFFATTN_RETURN_IF_ERROR(check_shape(l, "lse", {batch, hq, sq}, "[B, Hq, Sq]"));
  DIFFATTN_RETURN_IF_ERROR(check_writable(l, "lse"));
  for (const auto& [in, name] : Named{{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}, {&p.out, "out"}})
    DIFFATTN_RETURN_IF_ERROR(check_no_overlap(l, "lse", *in, name));
  return Status::Ok();
}

// Offsets of one packed-batch boundary array; host values are checked only for CPU views.
Status check_cu_seqlens(const std::optional<TensorView>& cu, std::string_view name, std::int64_t batches,
                        std::int64_t total) {
  if (!cu)
    return InvalidInput(std::string(name) + " is missing; packed batches need both cu_seqlens_q and cu_seqlens_k");
  DIFFATTN_RETURN_IF_ERROR(check_view_memory(*cu, name));
  if (cu->dtype != DType::kInt32 || cu->ndim != 1 || cu->size(0) < 1)
    return InvalidInput(std::string(name) + " must be int32 [B+1], got " + std::string(dtype_name(cu->dtype)) + " " +
                        cu->shape_string());
  if (cu->size(0) != batches + 1)
    return InvalidInput(std::string(name) + " has " + std::to_string(cu->size(0)) + " entries but cu_seqlens_q has " +
                        std::to_string(batches + 1) + "; both describe the same batches");
  if (cu->device.kind != DeviceKind::kCpu) return Status::Ok();
  const auto* values = static_cast<const std::int32_t*>(cu->data);
  std::int32_t previous = 0;
  for (std::int64_t i = 0; i < cu->size(0); ++i) {
    const std::int32_t value = values[i * cu->stride(0)];
    if ((i == 0 && value != 0) || value < previous || value > total)
      return InvalidInput(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(value) +
                          " is invalid; offsets start at 0, never decrease and stay within the packed length " +
                          std::to_string(total));
    previous = value;
  }
  return Status::Ok();
}

Status check_varlen(const AttentionProblem& p) {
  if (p.q.size(0) != 1)
    return InvalidInput("packed batches (cu_seqlens) need q/k/v/out of shape [1, total, H, D], got q " +
                        p.q.shape_string() + "; flatten the batch into the sequence dimension");
  if (!p.cu_seqlens_q)
    return InvalidInput("cu_seqlens_q is missing; packed batches need both cu_seqlens_q and cu_seqlens_k");
  if (p.cu_seqlens_q->ndim != 1)
    return InvalidInput("cu_seqlens_q must be int32 [B+1], got " + p.cu_seqlens_q->shape_string());
  const std::int64_t batches = p.cu_seqlens_q->size(0) - 1;
  DIFFATTN_RETURN_IF_ERROR(check_cu_seqlens(p.cu_seqlens_q, "cu_seqlens_q", batches, p.q.size(1)));
  DIFFATTN_RETURN_IF_ERROR(check_cu_seqlens(p.cu_seqlens_k, "cu_seqlens_k", batches, p.k.size(1)));
  if (p.max_seqlen_q < 0 || p.max_seqlen_k < 0)
    return InvalidInput("max_seqlen_q and max_seqlen_k must not be negative");
  for (const auto* cu : {&*p.cu_seqlens_q, &*p.cu_seqlens_k})
    DIFFATTN_RETURN_IF_ERROR(check_no_overlap(p.out, "out", *cu, "cu_seqlens"));
  return Status::Ok();
}

// The geometry describes q's and k's tokens alike (self-attention over one latent video).
Status check_video_geometry(const AttentionProblem& p, std::int64_t sq, std::int64_t skv) {
  const VideoGeometry& g = *p.video;
  const std::string given = std::to_string(g.frames) + " x " + std::to_string(g.height) + " x " + std::to_string(g.width);
  constexpr std::int64_t kMaxExtent = std::int64_t{1} << 20;  // keeps frames*height*width far inside int64
  for (std::int64_t extent : {g.frames, g.height, g.width})
    if (extent < 1 || extent > kMaxExtent)
      return InvalidInput("video geometry (frames x height x width) " + given +
                          " must have every extent in 1.." + std::to_string(kMaxExtent) +
                          "; pass the latent video's frames, height and width in tokens");
  if (g.text_before < 0 || g.text_after < 0 || g.text_before > kMaxExtent || g.text_after > kMaxExtent)
    return InvalidInput("video geometry: text_before " + std::to_string(g.text_before) + " and text_after " +
                        std::to_string(g.text_after) + " must be in 0.." + std::to_string(kMaxExtent) +
                        "; pass the count of non-video tokens before and after the video");
  if (p.is_varlen())
    return InvalidInput("video geometry cannot be combined with cu_seqlens; pass one video per batch entry instead");
  if (g.sequence_length() != sq || g.sequence_length() != skv) {
    const std::string text = g.text_before + g.text_after > 0
                                 ? " tokens with " + std::to_string(g.text_before) + " + " + std::to_string(g.text_after) +
                                       " text tokens"
                                 : " tokens";
    return InvalidInput("video geometry " + given + " holds " + std::to_string(g.sequence_length()) + text +
                        " but q has " + std::to_string(sq) + " and k has " + std::to_string(skv) +
                        "; pass the geometry of this call's latent video (after patchifying), whose tokens (and the "
                        "text_before/text_after ones) are the whole sequence");
  }
  return Status::Ok();
}

Status check_gate(const AttentionProblem& p, const Shape& out_shape) {
  const TensorView& g = *p.gate;
  DIFFATTN_RETURN_IF_ERROR(check_view_memory(g, "gate"));
  DIFFATTN_RETURN_IF_ERROR(check_same_dtype(g, "gate", p.q.dtype));
  DIFFATTN_RETURN_IF_ERROR(check_same_device(g, "gate", p.q.device));
  DIFFATTN_RETURN_IF_ERROR(check_rank(g, "gate", 4, "[B, Sq, Hq, Dv]"));
  DIFFATTN_RETURN_IF_ERROR(check_shape(g, "gate", out_shape, "[B, Sq, Hq, Dv]"));
  return check_no_overlap(p.out, "out", g, "gate");
}

}  // namespace

Status validate_problem(const AttentionProblem& p) {
  DIFFATTN_RETURN_IF_ERROR(check_rank(p.q, "q", 4, "[B, Sq, Hq, D]"));
  DIFFATTN_RETURN_IF_ERROR(check_rank(p.k, "k", 4, "[B, Skv, Hkv, D]"));
  DIFFATTN_RETURN_IF_ERROR(check_rank(p.v, "v", 4, "[B, Skv, Hkv, Dv]"));
  DIFFATTN_RETURN_IF_ERROR(check_rank(p.out, "out", 4, "[B, Sq, Hq, Dv]"));
  for (const auto& [t, name] : Named{{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}, {&p.out, "out"}})
    DIFFATTN_RETURN_IF_ERROR(check_view_memory(*t, name));

  const std::int64_t batch = p.q.size(0), sq = p.q.size(1), hq = p.q.size(2), d = p.q.size(3);
  const std::int64_t skv = p.k.size(1), hkv = p.k.size(2), dv = p.v.size(3);
  DIFFATTN_RETURN_IF_ERROR(check_shape(p.k, "k", {batch, skv, hkv, d}, "[B, Skv, Hkv, D]"));
  DIFFATTN_RETURN_IF_ERROR(check_shape(p.v, "v", {batch, skv, hkv, dv}, "[B, Skv, Hkv, Dv]"));
  DIFFATTN_RETURN_IF_ERROR(check_shape(p.out, "out", {batch, sq, hq, dv}, "[B, Sq, Hq, Dv]"));
  DIFFATTN_RETURN_IF_ERROR(check_gqa(hq, hkv));
  DIFFATTN_RETURN_IF_ERROR(check_head_size(d, "head size D of q and k"));
  DIFFATTN_RETURN_IF_ERROR(check_head_size(dv, "head size Dv of v"));

  DIFFATTN_RETURN_IF_ERROR(check_attention_dtype(p.q, "q"));
  for (const auto& [t, name] : Named{{&p.k, "k"}, {&p.v, "v"}, {&p.out, "out"}}) {
    DIFFATTN_RETURN_IF_ERROR(check_same_dtype(*t, name, p.q.dtype));
    DIFFATTN_RETURN_IF_ERROR(check_same_device(*t, name, p.q.device));
  }
  DIFFATTN_RETURN_IF_ERROR(check_writable(p.out, "out"));
  for (const auto& [t, name] : Named{{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}})
    DIFFATTN_RETURN_IF_ERROR(check_no_overlap(p.out, "out", *t, name));

  if (p.scale && !std::isfinite(*p.scale))
    return InvalidInput("scale " + std::to_string(*p.scale) + " is not finite; pass a finite softmax scale");

  std::int64_t lse_batch = batch;
  if (p.is_varlen()) {
    DIFFATTN_RETURN_IF_ERROR(check_varlen(p));
    lse_batch = 1;
  }
  if (p.mask) {
    DIFFATTN_RETURN_IF_ERROR(check_mask(p, batch, sq, hq, skv));
    DIFFATTN_RETURN_IF_ERROR(check_no_overlap(p.out, "out", *p.mask, "mask"));
  }
  if (p.lse) DIFFATTN_RETURN_IF_ERROR(check_lse(p, lse_batch, hq, sq));
  if (p.video) DIFFATTN_RETURN_IF_ERROR(check_video_geometry(p, sq, skv));
  if (p.gate) DIFFATTN_RETURN_IF_ERROR(check_gate(p, {batch, sq, hq, dv}));
  return Status::Ok();
}

}  // namespace diffattn
