// The Ulysses exchange: all-to-all from sequence shards with every head to the group's whole chunk
// of the sequence with this rank's heads, and back; the text output gathered over heads. With a
// batch of one, the all-to-all writes straight into the attention buffers.

#include "parallel/head_rows.h"
#include "parallel/parallel_workspace.h"

namespace diffattn::parallel {

// local [B, len, heads, D] (sequence shard, all heads) -> dst rows [dst_seq0, dst_seq0 + C) of a
// [B, dst_seq, heads / ulysses, D] buffer: the Ulysses group's chunk of the sequence, this rank's heads.
Status ParallelAttention::gather_heads(const TensorView& local, std::int64_t heads, DeviceBuffer& send, void* dst,
                                       std::int64_t dst_seq, std::int64_t dst_seq0, void* stream) {
  const Workspace& w = *ws_;
  const int u = degrees_.ulysses;
  const DeviceKind kind = world_->device();
  const std::int64_t b = local.size(0), len = local.size(1), L = w.plan.local, hl = heads / u;
  const Rows src = rows_of(local);
  const Rows out{static_cast<char*>(dst), dst_seq, hl, src.row_bytes};
  if (u == 1) return copy_heads(out, dst_seq0, 0, src, 0, 0, b, len, heads, kind, stream);
  const std::size_t block = static_cast<std::size_t>(b * L * hl) * src.row_bytes;
  for (int j = 0; j < u; ++j) {
    const Rows to{static_cast<char*>(send.data()) + j * block, L, hl, src.row_bytes};
    DIFFATTN_RETURN_IF_ERROR(copy_heads(to, 0, 0, src, 0, j * hl, b, len, hl, kind, stream));
  }
  if (b == 1)  // rank j's block lands where its tokens belong: no copy after the exchange
    return ulysses_->all_to_all(send.data(), out.at(0, dst_seq0, 0), block, stream);
  DIFFATTN_RETURN_IF_ERROR(ulysses_->all_to_all(send.data(), w.recv.data(), block, stream));
  for (int j = 0; j < u; ++j) {
    const Rows from{static_cast<char*>(w.recv.data()) + j * block, L, hl, src.row_bytes};
    DIFFATTN_RETURN_IF_ERROR(copy_heads(out, dst_seq0 + j * L, 0, from, 0, 0, b, L, hl, kind, stream));
  }
  return Status::Ok();
}

// The inverse: rows [src_seq0, src_seq0 + C) of [B, src_seq, H / ulysses, Dv] -> out [B, len, H, Dv].
Status ParallelAttention::scatter_heads(const void* src, std::int64_t src_seq, std::int64_t src_seq0,
                                        const TensorView& out, void* stream) {
  const Workspace& w = *ws_;
  const int u = degrees_.ulysses;
  const DeviceKind kind = world_->device();
  const Rows dst = rows_of(out);
  const std::int64_t b = out.size(0), len = out.size(1), L = w.plan.local, hl = w.hq;
  const Rows in{static_cast<char*>(const_cast<void*>(src)), src_seq, hl, dst.row_bytes};
  if (u == 1) return copy_heads(dst, 0, 0, in, src_seq0, 0, b, len, hl, kind, stream);
  const std::size_t block = static_cast<std::size_t>(b * L * hl) * dst.row_bytes;
  const void* send = in.at(0, src_seq0, 0);
  if (b > 1) {
    for (int j = 0; j < u; ++j) {
      const Rows to{static_cast<char*>(ws_->send_o.data()) + j * block, L, hl, dst.row_bytes};
      DIFFATTN_RETURN_IF_ERROR(copy_heads(to, 0, 0, in, src_seq0 + j * L, 0, b, L, hl, kind, stream));
    }
    send = ws_->send_o.data();
  }
  DIFFATTN_RETURN_IF_ERROR(ulysses_->all_to_all(send, w.recv.data(), block, stream));
  for (int j = 0; j < u; ++j) {
    const Rows from{static_cast<char*>(w.recv.data()) + j * block, L, hl, dst.row_bytes};
    DIFFATTN_RETURN_IF_ERROR(copy_heads(dst, 0, j * hl, from, 0, 0, b, len, hl, kind, stream));
  }
  return Status::Ok();
}

// Text rows of [B, src_seq, H / ulysses, Dv] -> out [B, T, H, Dv]: every Ulysses rank's heads.
Status ParallelAttention::gather_text_output(const void* src, std::int64_t src_seq, std::int64_t src_seq0,
                                             const TensorView& out, void* stream) {
  const int u = degrees_.ulysses;
  const DeviceKind kind = world_->device();
  const Rows dst = rows_of(out);
  const std::int64_t b = out.size(0), t = out.size(1), hl = ws_->hq;
  const Rows in{static_cast<char*>(const_cast<void*>(src)), src_seq, hl, dst.row_bytes};
  if (u == 1) return copy_heads(dst, 0, 0, in, src_seq0, 0, b, t, hl, kind, stream);
  const Rows packed{static_cast<char*>(ws_->send_t.data()), t, hl, dst.row_bytes};
  DIFFATTN_RETURN_IF_ERROR(copy_heads(packed, 0, 0, in, src_seq0, 0, b, t, hl, kind, stream));
  const std::size_t block = static_cast<std::size_t>(b * t * hl) * dst.row_bytes;
  DIFFATTN_RETURN_IF_ERROR(ulysses_->all_gather(ws_->send_t.data(), ws_->recv_t.data(), block, stream));
  for (int j = 0; j < u; ++j) {
    const Rows from{static_cast<char*>(ws_->recv_t.data()) + j * block, t, hl, dst.row_bytes};
    DIFFATTN_RETURN_IF_ERROR(copy_heads(dst, 0, j * hl, from, 0, 0, b, t, hl, kind, stream));
  }
  return Status::Ok();
}

}  // namespace diffattn::parallel
