#include "parallel/parallel_attention.h"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "parallel/head_rows.h"
#include "parallel/parallel_workspace.h"

namespace diffattn::parallel {
namespace {

std::string shape_text(std::initializer_list<std::int64_t> dims) {
  std::string s = "[";
  for (std::int64_t d : dims) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

Status check_view(const TensorView& t, const std::string& name, std::initializer_list<std::int64_t> dims, DType dtype,
                  DeviceKind device) {
  const std::string expected = shape_text(dims);
  if (t.ndim != static_cast<int>(dims.size()) || t.shape_string() != expected)
    return InvalidInput(name + " is " + t.shape_string() + "; this rank's part must be " + expected);
  if (t.dtype != dtype)
    return InvalidInput(name + " has dtype " + std::string(dtype_name(t.dtype)) + "; pass " + std::string(dtype_name(dtype)));
  if (t.device.kind != device)
    return InvalidInput(name + " is on the " + (t.device.kind == DeviceKind::kCpu ? "host" : "GPU") +
                        " but the communicator exchanges " + (device == DeviceKind::kCpu ? "host" : "GPU") + " memory");
  if (!t.is_contiguous()) return InvalidInput(name + " must be contiguous; pass a contiguous copy");
  if (!t.data && t.numel() > 0) return InvalidInput(name + " has no data");
  return Status::Ok();
}

}  // namespace

Status ParallelAttention::check_call(const ParallelCall& c) const {
  const DeviceKind device = world_->device();
  const DType dt = c.q.dtype;
  if (c.image_tokens < 1) return InvalidInput("image_tokens must be at least 1, got " + std::to_string(c.image_tokens));
  const std::int64_t len = image_shard(c.image_tokens, degrees_.world(), world_->rank()).length;
  const std::int64_t b = c.q.ndim == 4 ? c.q.size(0) : 0, h = desc_.num_heads, hkv = desc_.num_kv_heads,
                     d = desc_.head_size;
  const std::int64_t dv = c.v.ndim == 4 ? c.v.size(3) : d;
  if (b < 1) return InvalidInput("q must be [B, tokens, heads, head size] with B >= 1, got " + c.q.shape_string());
  const std::string who = "rank " + std::to_string(world_->rank()) + "'s ";
  DIFFATTN_RETURN_IF_ERROR(check_view(c.q, who + "q", {b, len, h, d}, dt, device));
  DIFFATTN_RETURN_IF_ERROR(check_view(c.k, who + "k", {b, len, hkv, d}, dt, device));
  DIFFATTN_RETURN_IF_ERROR(check_view(c.v, who + "v", {b, len, hkv, dv}, dt, device));
  DIFFATTN_RETURN_IF_ERROR(check_view(c.out, who + "out", {b, len, h, dv}, dt, device));
  const int joint = c.joint_q.has_value() + c.joint_k.has_value() + c.joint_v.has_value() + c.joint_out.has_value();
  if (joint != 0 && joint != 4)
    return InvalidInput("joint text tokens need joint_q, joint_k, joint_v and joint_out together; pass all four or none");
  if (joint == 0 && c.joint_key_mask) return InvalidInput("joint_key_mask masks text keys, but the call has no text tokens");
  if (joint == 4) {
    const std::int64_t t = c.joint_q->ndim == 4 ? c.joint_q->size(1) : 0;
    if (t < 1) return InvalidInput("joint_q must be [B, text tokens, heads, head size], got " + c.joint_q->shape_string());
    DIFFATTN_RETURN_IF_ERROR(check_view(*c.joint_q, "joint_q", {b, t, h, d}, dt, device));
    DIFFATTN_RETURN_IF_ERROR(check_view(*c.joint_k, "joint_k", {b, t, hkv, d}, dt, device));
    DIFFATTN_RETURN_IF_ERROR(check_view(*c.joint_v, "joint_v", {b, t, hkv, dv}, dt, device));
    DIFFATTN_RETURN_IF_ERROR(check_view(*c.joint_out, "joint_out", {b, t, h, dv}, dt, device));
    if (c.joint_key_mask) {
      const TensorView& m = *c.joint_key_mask;
      if (m.ndim != 2 || m.size(0) != b || m.size(1) != t || m.dtype != DType::kBool || !m.is_contiguous() ||
          m.device.kind != device)
        return InvalidInput("joint_key_mask must be a contiguous bool [" + std::to_string(b) + ", " + std::to_string(t) +
                            "] on the communicator's device, got " + std::string(dtype_name(m.dtype)) + " " +
                            m.shape_string());
    }
  }
  return Status::Ok();
}

Status ParallelAttention::forward(const ParallelCall& call, void* stream) {
  Status s = run(call, stream);
  if (!s.ok()) {
    // The other ranks may be waiting for this one at a collective: they return this reason instead.
    ulysses_->abort(s.message());
    ring_->abort(s.message());
    world_->abort(s.message());
  }
  return s;
}

Status ParallelAttention::prepare(const ParallelCall& c, void* stream) {
  ParallelCallShape shape;
  shape.dtype = c.q.dtype;
  shape.device = world_->device();
  shape.batch = c.q.size(0);
  shape.image_tokens = c.image_tokens;
  shape.joint_tokens = c.joint_q ? c.joint_q->size(1) : 0;
  shape.head_size_v = c.v.size(3);
  shape.joint_key_mask = c.joint_key_mask.has_value();
  DIFFATTN_RETURN_IF_ERROR(preflight(shape));
  if (ws_ && ws_->shape.dtype == shape.dtype && ws_->shape.batch == shape.batch &&
      ws_->shape.image_tokens == shape.image_tokens && ws_->shape.joint_tokens == shape.joint_tokens &&
      ws_->shape.head_size_v == shape.head_size_v && ws_->shape.joint_key_mask == shape.joint_key_mask)
    return Status::Ok();
  auto w = std::make_shared<Workspace>();
  w->shape = shape;
  w->plan = plan_sequence(shape.image_tokens, degrees_);
  const int u = degrees_.ulysses;
  w->hq = desc_.num_heads / u;
  w->hkv = desc_.num_kv_heads / u;
  w->d = desc_.head_size;
  w->dv = shape.head_size_v;
  w->text = shape.joint_tokens;
  w->seq_q = w->text + w->plan.chunk;
  const bool front = c.joint_placement == JointPlacement::kFront;
  w->img0 = front ? w->text : 0;
  w->text0 = front ? 0 : w->plan.chunk;
  const Device dev{shape.device, c.q.device.index};
  const std::size_t es = dtype_size(shape.dtype);
  const std::int64_t b = shape.batch, L = w->plan.local, C = w->plan.chunk, T = w->text;
  auto alloc = [&](DeviceBuffer& buf, std::int64_t elements, std::size_t esize) -> Status {
    DIFFATTN_ASSIGN_OR_RETURN(buf, DeviceBuffer::Zeros(dev, static_cast<std::size_t>(elements) * esize));
    return Status::Ok();
  };
  if (u > 1) {
    DIFFATTN_RETURN_IF_ERROR(alloc(w->send_q, u * b * L * w->hq * w->d, es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->send_k, u * b * L * w->hkv * w->d, es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->send_v, u * b * L * w->hkv * w->dv, es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->send_o, u * b * L * w->hq * w->dv, es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->recv, u * b * L * std::max(w->hq, w->hkv) * std::max(w->d, w->dv), es));
    if (T > 0) {
      DIFFATTN_RETURN_IF_ERROR(alloc(w->send_t, b * T * w->hq * w->dv, es));
      DIFFATTN_RETURN_IF_ERROR(alloc(w->recv_t, u * b * T * w->hq * w->dv, es));
    }
  }
  DIFFATTN_RETURN_IF_ERROR(alloc(w->q_attn, b * w->seq_q * w->hq * w->d, es));
  DIFFATTN_RETURN_IF_ERROR(alloc(w->out_attn, b * w->seq_q * w->hq * w->dv, es));
  if (degrees_.ring == 1) {
    DIFFATTN_RETURN_IF_ERROR(alloc(w->k_attn, b * (T + C) * w->hkv * w->d, es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->v_attn, b * (T + C) * w->hkv * w->dv, es));
    w->needs_mask = w->plan.padding() || shape.joint_key_mask;
    if (w->needs_mask) {
      // Image keys past the real tokens are padding; text keys come from the call's mask each time.
      std::vector<unsigned char> host(static_cast<std::size_t>(b * (T + C)), 1);
      for (std::int64_t bi = 0; bi < b; ++bi)
        for (std::int64_t i = w->plan.tokens; i < C; ++i) host[bi * (T + C) + w->img0 + i] = 0;
      DIFFATTN_RETURN_IF_ERROR(alloc(w->mask, b * (T + C), 1));
      DIFFATTN_RETURN_IF_ERROR(copy_to_device(w->mask.data(), host.data(), host.size(), dev.kind, stream));
    }
  } else {
    const std::int64_t kv_elems = b * C * w->hkv * (w->d + w->dv);
    DIFFATTN_RETURN_IF_ERROR(alloc(w->kv[0], kv_elems, es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->kv[1], kv_elems, es));
    if (T > 0) DIFFATTN_RETURN_IF_ERROR(alloc(w->text_kv, b * T * w->hkv * (w->d + w->dv), es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->acc, b * w->seq_q * w->hq * w->dv, sizeof(float)));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->acc_lse, b * w->hq * w->seq_q, sizeof(float)));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->part, b * w->seq_q * w->hq * w->dv, es));
    DIFFATTN_RETURN_IF_ERROR(alloc(w->part_lse, b * w->hq * w->seq_q, sizeof(float)));
    std::vector<float> neg(static_cast<std::size_t>(b * w->hq * w->seq_q), -std::numeric_limits<float>::infinity());
    DIFFATTN_RETURN_IF_ERROR(alloc(w->neg_inf, static_cast<std::int64_t>(neg.size()), sizeof(float)));
    DIFFATTN_RETURN_IF_ERROR(copy_to_device(w->neg_inf.data(), neg.data(), neg.size() * sizeof(float), dev.kind, stream));
    const int r = degrees_.ring;
    std::vector<unsigned char> host(static_cast<std::size_t>(r * b * C), 1);
    for (int block = 0; block < r; ++block) {
      const std::int64_t valid = w->plan.valid_in_block(block);
      w->block_masked.push_back(valid < C);
      for (std::int64_t bi = 0; bi < b; ++bi)
        for (std::int64_t i = valid; i < C; ++i) host[(block * b + bi) * C + i] = 0;
    }
    if (w->plan.padding()) {
      DIFFATTN_RETURN_IF_ERROR(alloc(w->block_masks, static_cast<std::int64_t>(host.size()), 1));
      DIFFATTN_RETURN_IF_ERROR(copy_to_device(w->block_masks.data(), host.data(), host.size(), dev.kind, stream));
    }
  }
  ws_ = std::move(w);
  return Status::Ok();
}

Status ParallelAttention::run(const ParallelCall& c, void* stream) {
  DIFFATTN_RETURN_IF_ERROR(check_call(c));
  DIFFATTN_RETURN_IF_ERROR(prepare(c, stream));
  Workspace& w = *ws_;
  const DeviceKind kind = world_->device();
  const DType dt = c.q.dtype;
  const std::int64_t b = w.shape.batch, T = w.text, C = w.plan.chunk;
  const int urank = ulysses_->rank();
  const std::size_t es = dtype_size(dt);
  // Queries: [text heads of this rank; the gathered image chunk], or rear.
  DIFFATTN_RETURN_IF_ERROR(gather_heads(c.q, desc_.num_heads, w.send_q, w.q_attn.data(), w.seq_q, w.img0, stream));
  const Rows q_attn{static_cast<char*>(w.q_attn.data()), w.seq_q, w.hq, static_cast<std::size_t>(w.d) * es};
  if (T > 0)
    DIFFATTN_RETURN_IF_ERROR(copy_heads(q_attn, w.text0, 0, rows_of(*c.joint_q), 0, urank * w.hq, b, T, w.hq, kind, stream));
  if (degrees_.ring == 1) {
    DIFFATTN_RETURN_IF_ERROR(gather_heads(c.k, desc_.num_kv_heads, w.send_k, w.k_attn.data(), T + C, w.img0, stream));
    DIFFATTN_RETURN_IF_ERROR(gather_heads(c.v, desc_.num_kv_heads, w.send_v, w.v_attn.data(), T + C, w.img0, stream));
    if (T > 0) {
      const Rows k_attn{static_cast<char*>(w.k_attn.data()), T + C, w.hkv, static_cast<std::size_t>(w.d) * es};
      const Rows v_attn{static_cast<char*>(w.v_attn.data()), T + C, w.hkv, static_cast<std::size_t>(w.dv) * es};
      DIFFATTN_RETURN_IF_ERROR(copy_heads(k_attn, w.text0, 0, rows_of(*c.joint_k), 0, urank * w.hkv, b, T, w.hkv, kind, stream));
      DIFFATTN_RETURN_IF_ERROR(copy_heads(v_attn, w.text0, 0, rows_of(*c.joint_v), 0, urank * w.hkv, b, T, w.hkv, kind, stream));
      if (c.joint_key_mask)
        DIFFATTN_RETURN_IF_ERROR(copy_rows(static_cast<char*>(w.mask.data()) + w.text0, static_cast<std::size_t>(T + C),
                                           c.joint_key_mask->data, static_cast<std::size_t>(T), static_cast<std::size_t>(T),
                                           static_cast<std::size_t>(b), kind, stream));
    }
    AttentionProblem p;
    const Device dev = c.q.device;
    p.q = contiguous_view(w.q_attn.data(), dt, b, w.seq_q, w.hq, w.d, dev);
    p.k = contiguous_view(w.k_attn.data(), dt, b, T + C, w.hkv, w.d, dev);
    p.v = contiguous_view(w.v_attn.data(), dt, b, T + C, w.hkv, w.dv, dev);
    p.out = contiguous_view(w.out_attn.data(), dt, b, w.seq_q, w.hq, w.dv, dev);
    if (w.needs_mask) p.mask = TensorView::Contiguous(w.mask.data(), DType::kBool, {b, T + C}, dev);
    p.scale = c.scale;
    DIFFATTN_RETURN_IF_ERROR(inner_.forward(p, stream));
  } else {
    DIFFATTN_RETURN_IF_ERROR(run_ring(c, stream));
  }
  DIFFATTN_RETURN_IF_ERROR(scatter_heads(w.out_attn.data(), w.seq_q, w.img0, c.out, stream));
  if (T > 0) DIFFATTN_RETURN_IF_ERROR(gather_text_output(w.out_attn.data(), w.seq_q, w.text0, *c.joint_out, stream));
  return synchronize(kind, stream);
}

}  // namespace diffattn::parallel
