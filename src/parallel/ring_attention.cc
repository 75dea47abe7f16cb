// Ring attention: each ring rank holds one K/V block of the gathered sequence; the blocks travel
// around the ring while each rank attends to the block it holds, and the partial outputs are merged
// by their LSE. The next block's exchange runs while the current block's attention does (its own
// thread in-process, its own stream over NCCL).

#include <string>
#include <utility>

#include "kernels/merge/partial_merge.h"
#include "parallel/head_rows.h"
#include "parallel/parallel_workspace.h"

namespace diffattn::parallel {

Status ParallelAttention::merge_partial(void* stream) {
  Workspace& w = *ws_;
  merge::PartialMergeParams m;
  m.acc_out = static_cast<float*>(w.acc.data());
  m.acc_lse = static_cast<float*>(w.acc_lse.data());
  m.part_out = w.part.data();
  m.part_dtype = w.shape.dtype;
  m.part_lse = static_cast<const float*>(w.part_lse.data());
  m.batch = w.shape.batch;
  m.seqlen = w.seq_q;
  m.heads = w.hq;
  m.head_size_v = w.dv;
  return world_->device() == DeviceKind::kCpu ? merge::merge_partial_cpu(m) : merge::merge_partial_cuda(m, stream);
}

Status ParallelAttention::run_ring(const ParallelCall& c, void* stream) {
  Workspace& w = *ws_;
  const DeviceKind kind = world_->device();
  const Device dev = c.q.device;
  const DType dt = w.shape.dtype;
  const std::size_t es = dtype_size(dt);
  const std::int64_t b = w.shape.batch, C = w.plan.chunk, T = w.text;
  const int r = degrees_.ring, me = ring_->rank();
  const std::size_t k_bytes = static_cast<std::size_t>(b * C * w.hkv * w.d) * es;
  const std::size_t kv_bytes = k_bytes + static_cast<std::size_t>(b * C * w.hkv * w.dv) * es;
  auto k_of = [&](DeviceBuffer& buf) { return static_cast<char*>(buf.data()); };
  auto v_of = [&](DeviceBuffer& buf) { return static_cast<char*>(buf.data()) + k_bytes; };
  // This rank's block: the Ulysses group's chunk of the sequence, its heads; K and V in one buffer
  // so that one exchange per step carries both.
  DIFFATTN_RETURN_IF_ERROR(gather_heads(c.k, desc_.num_kv_heads, w.send_k, k_of(w.kv[0]), C, 0, stream));
  DIFFATTN_RETURN_IF_ERROR(gather_heads(c.v, desc_.num_kv_heads, w.send_v, v_of(w.kv[0]), C, 0, stream));
  const std::size_t acc_lse_bytes = static_cast<std::size_t>(b * w.hq * w.seq_q) * sizeof(float);
  DIFFATTN_RETURN_IF_ERROR(fill_bytes(w.acc.data(), 0, w.acc.bytes(), kind, stream));
  DIFFATTN_RETURN_IF_ERROR(copy_rows(w.acc_lse.data(), acc_lse_bytes, w.neg_inf.data(), acc_lse_bytes, acc_lse_bytes, 1,
                                     kind, stream));
  AttentionProblem p;
  p.q = contiguous_view(w.q_attn.data(), dt, b, w.seq_q, w.hq, w.d, dev);
  p.out = contiguous_view(w.part.data(), dt, b, w.seq_q, w.hq, w.dv, dev);
  p.lse = TensorView::Contiguous(w.part_lse.data(), DType::kFloat32, {b, w.hq, w.seq_q}, dev);
  p.scale = c.scale;
  int cur = 0;
  for (int step = 0; step < r; ++step) {
    const int block = (me - step + r) % r;  // whose K/V this rank holds now
    std::unique_ptr<PendingExchange> next;
    if (step + 1 < r) {
      DIFFATTN_ASSIGN_OR_RETURN(next, ring_->start_send_recv(w.kv[cur].data(), (me + 1) % r, w.kv[1 - cur].data(),
                                                             (me - 1 + r) % r, kv_bytes, stream));
    }
    // A block of padding only adds nothing: skip its call.
    if (w.plan.valid_in_block(block) > 0) {
      p.k = contiguous_view(k_of(w.kv[cur]), dt, b, C, w.hkv, w.d, dev);
      p.v = contiguous_view(v_of(w.kv[cur]), dt, b, C, w.hkv, w.dv, dev);
      p.mask.reset();
      if (w.block_masked[block])
        p.mask = TensorView::Contiguous(static_cast<char*>(w.block_masks.data()) + block * b * C, DType::kBool, {b, C}, dev);
      Status attended = inner_.forward(p, stream);
      if (attended.ok()) attended = merge_partial(stream);
      if (!attended.ok()) {
        if (next) (void)next->wait(stream);  // the peers' exchange completes before the buffers go
        return attended;
      }
    }
    if (next) {
      DIFFATTN_RETURN_IF_ERROR(next->wait(stream));
      cur = 1 - cur;
    }
  }
  if (T > 0) {
    // The text keys, replicated on every rank, count once: one more partial, merged like the blocks.
    const std::int64_t urank = ulysses_->rank();
    const std::size_t tk_bytes = static_cast<std::size_t>(b * T * w.hkv * w.d) * es;
    char* tk = static_cast<char*>(w.text_kv.data());
    const Rows text_k{tk, T, w.hkv, static_cast<std::size_t>(w.d) * es};
    const Rows text_v{tk + tk_bytes, T, w.hkv, static_cast<std::size_t>(w.dv) * es};
    DIFFATTN_RETURN_IF_ERROR(copy_heads(text_k, 0, 0, rows_of(*c.joint_k), 0, urank * w.hkv, b, T, w.hkv, kind, stream));
    DIFFATTN_RETURN_IF_ERROR(copy_heads(text_v, 0, 0, rows_of(*c.joint_v), 0, urank * w.hkv, b, T, w.hkv, kind, stream));
    p.k = contiguous_view(tk, dt, b, T, w.hkv, w.d, dev);
    p.v = contiguous_view(tk + tk_bytes, dt, b, T, w.hkv, w.dv, dev);
    p.mask.reset();
    if (c.joint_key_mask) p.mask = *c.joint_key_mask;
    DIFFATTN_RETURN_IF_ERROR(inner_.forward(p, stream));
    DIFFATTN_RETURN_IF_ERROR(merge_partial(stream));
  }
  const std::int64_t count = b * w.seq_q * w.hq * w.dv;
  const auto* acc = static_cast<const float*>(w.acc.data());
  return kind == DeviceKind::kCpu ? merge::store_merged_cpu(acc, w.out_attn.data(), dt, count)
                                  : merge::store_merged_cuda(acc, w.out_attn.data(), dt, count, stream);
}

}  // namespace diffattn::parallel
