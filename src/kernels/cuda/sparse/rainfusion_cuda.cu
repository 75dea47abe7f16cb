// RAINFUSION_ATTN on CUDA tensors: checks, the GPU's scores, the plan on the host, the fine pass
// and the copy back, in that order; out is written by the last step only.

#include "kernels/cuda/sparse/rainfusion_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/pinned_staging.h"
#include "kernels/cuda/scoped_device.h"
#include "kernels/cuda/sparse/rainfusion_kernels.cuh"

namespace diffattn {
namespace {

using rainfusion::Strides;

// The fine pass runs the block-sparse kernel's large tiling: one kernel tile per RainFusion tile.
constexpr bool fine_tiles_are_rain_tiles() {
  for (int d : flash::kBlockSparseHeadSizes) {
    const flash::HopperTile tile = flash::block_sparse_tile(d);
    if (tile.block_m != kRainTileTokens || tile.block_n != kRainTileTokens) return false;
  }
  return true;
}
static_assert(fine_tiles_are_rain_tiles(), "kRainTileTokens must be the block-sparse kernel's large tile");

// Device memory of one call, taken and given back on the call's stream.
class StreamBuffers {
 public:
  explicit StreamBuffers(cudaStream_t stream) : stream_(stream) {}
  StreamBuffers(const StreamBuffers&) = delete;
  StreamBuffers& operator=(const StreamBuffers&) = delete;
  ~StreamBuffers() {
    for (void* p : held_) (void)cudaFreeAsync(p, stream_);
  }

  template <typename T>
  Result<T*> take(std::int64_t count, const char* what) {
    void* p = nullptr;
    const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(count) * sizeof(T), 1);
    const cudaError_t err = cudaMallocAsync(&p, bytes, stream_);
    if (err != cudaSuccess)
      return CudaError("RAINFUSION_ATTN: cannot allocate " + std::to_string(bytes) + " bytes on the GPU for " +
                       std::string(what) + ": " + cudaGetErrorString(err));
    held_.push_back(p);
    return static_cast<T*>(p);
  }

 private:
  cudaStream_t stream_;
  std::vector<void*> held_;
};

constexpr std::int64_t kMaxGridY = 65535;

Status check_cuda_call(const AttentionProblem& p) {
  if (p.q.device.kind != DeviceKind::kCuda)
    return InvalidInput("RAINFUSION_ATTN's CUDA path runs on CUDA tensors, but q lives on the CPU; run the call on "
                        "CPU tensors through its CPU path");
  if (p.q.dtype != DType::kFloat16 && p.q.dtype != DType::kBFloat16)
    return Unsupported("RAINFUSION_ATTN on CUDA tensors takes float16 or bfloat16, got " +
                       std::string(dtype_name(p.q.dtype)) + "; convert q, k, v and out, or run it on CPU tensors");
  const std::int64_t d = p.q.size(3), dv = p.v.size(3);
  if (!flash::is_block_sparse_head_size(static_cast<int>(d)) || dv != d)
    return Unsupported("RAINFUSION_ATTN on CUDA tensors has kernels for head sizes " +
                       flash::block_sparse_head_sizes_text() + " with equal query and value head sizes, got " +
                       std::to_string(d) + " and " + std::to_string(dv) +
                       "; run it on CPU tensors, or select FLASH_ATTN for dense attention");
  if (!(p.softmax_scale() > 0.f))
    return Unsupported("RAINFUSION_ATTN on CUDA tensors needs a positive softmax scale, got " +
                       std::to_string(p.softmax_scale()) + "; run it on CPU tensors");
  if (p.q.size(0) * p.q.size(2) > kMaxGridY)
    return Unsupported("RAINFUSION_ATTN on CUDA tensors takes at most " + std::to_string(kMaxGridY) +
                       " (batch entry, query head) pairs per call; split the call's batch");
  return Status::Ok();
}

// The copies run one block per padded row of the batch.
Status check_padded_rows(std::int64_t batch, const RainTiles& tiles) {
  if (batch * tiles.padded_length() <= std::numeric_limits<std::int32_t>::max()) return Status::Ok();
  return Unsupported("RAINFUSION_ATTN on CUDA tensors takes at most 2^31 - 1 padded tokens over the batch, got " +
                     std::to_string(batch * tiles.padded_length()) + "; split the call's batch");
}

Status check_hopper(int device) {
  int major = 0, minor = 0;
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0) return Status::Ok();
  return Unsupported("RAINFUSION_ATTN on CUDA tensors runs on sm_90 (Hopper) only, its fine pass being FLASH_ATTN's "
                     "block-sparse Hopper kernel, but this device is sm_" + std::to_string(major * 10 + minor) +
                     "; run it on CPU tensors, or select FLASH_ATTN for dense attention");
}

Status check_not_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
  if (capture == cudaStreamCaptureStatusNone) return Status::Ok();
  return Unsupported("RAINFUSION_ATTN's sparse pass builds its block lists on the host between GPU steps, so it "
                     "cannot be captured in a CUDA graph; run the call outside the capture, or set "
                     "block_sparse.sparsity to 0 (dense attention) for captured calls");
}

Strides strides_of(const TensorView& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

// Whether every (token, head) row of `t` can move in 16-byte pieces.
bool rows_of_16_bytes(const TensorView& t) {
  return t.stride(3) == 1 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 && t.stride(2) % 8 == 0 &&
         t.size(3) % 8 == 0 && reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0;
}

constexpr int kCopyThreads = 128;

void gather(const TensorView& t, std::uint16_t* dst, const std::int32_t* token_of_slot, std::int64_t padded,
            cudaStream_t stream) {
  const auto* src = static_cast<const std::uint16_t*>(t.data);
  const dim3 grid(static_cast<unsigned>(t.size(0) * padded));
  const int heads = static_cast<int>(t.size(2)), dim = static_cast<int>(t.size(3));
  if (rows_of_16_bytes(t))
    rainfusion::gather_into_tiles<8><<<grid, kCopyThreads, 0, stream>>>(src, strides_of(t), dst, token_of_slot, padded,
                                                                        heads, dim);
  else
    rainfusion::gather_into_tiles<1><<<grid, kCopyThreads, 0, stream>>>(src, strides_of(t), dst, token_of_slot, padded,
                                                                        heads, dim);
}

void scatter(const std::uint16_t* src, const TensorView& out, const std::int32_t* slot_of_token, std::int64_t padded,
             cudaStream_t stream) {
  auto* dst = static_cast<std::uint16_t*>(out.data);
  const std::int64_t tokens = out.size(1);
  const dim3 grid(static_cast<unsigned>(out.size(0) * tokens));
  const int heads = static_cast<int>(out.size(2)), dim = static_cast<int>(out.size(3));
  if (rows_of_16_bytes(out))
    rainfusion::scatter_from_tiles<8><<<grid, kCopyThreads, 0, stream>>>(src, dst, strides_of(out), slot_of_token,
                                                                         tokens, padded, heads, dim);
  else
    rainfusion::scatter_from_tiles<1><<<grid, kCopyThreads, 0, stream>>>(src, dst, strides_of(out), slot_of_token,
                                                                         tokens, padded, heads, dim);
}

// Where the score kernels read and write, and the sizes they run over.
struct ScoreArgs {
  const void* qp;
  const void* kp;
  const std::int32_t* valid;
  const std::int32_t* sample_slots;
  float* mean_q;
  float* mean_k;
  float* scores;
  float2* stats;
  float* mass;
  std::int64_t batch, count;
  int video, heads_q, heads_kv, samples;
  float scale;
};

constexpr int kMeanThreads = 256;

template <typename T, int kDim>
void launch_scores(const ScoreArgs& a, cudaStream_t stream) {
  const auto* qp = static_cast<const T*>(a.qp);
  const auto* kp = static_cast<const T*>(a.kp);
  const int width_q = a.heads_q * kDim, width_k = a.heads_kv * kDim, batch = static_cast<int>(a.batch);
  rainfusion::video_tile_means<T>
      <<<dim3(a.video, batch, (width_q + kMeanThreads - 1) / kMeanThreads), kMeanThreads, 0, stream>>>(
          qp, a.valid, a.count, width_q, a.video, a.mean_q);
  rainfusion::video_tile_means<T>
      <<<dim3(a.video, batch, (width_k + kMeanThreads - 1) / kMeanThreads), kMeanThreads, 0, stream>>>(
          kp, a.valid, a.count, width_k, a.video, a.mean_k);
  const int score_tiles = (a.video + rainfusion::kScoreTile - 1) / rainfusion::kScoreTile;
  rainfusion::block_scores<<<dim3(score_tiles, score_tiles, batch * a.heads_q), dim3(16, 16), 0, stream>>>(
      a.mean_q, a.mean_k, a.scores, a.video, a.heads_q, a.heads_kv, kDim, a.scale);
  rainfusion::sampled_tile_stats<T, kDim><<<dim3(a.video, batch * a.heads_q), rainfusion::kStatsThreads, 0, stream>>>(
      qp, kp, a.sample_slots, a.samples, a.valid, a.count, a.video, a.heads_q, a.heads_kv, a.scale, a.stats);
  rainfusion::sampled_mass<<<static_cast<unsigned>(batch * a.heads_q * a.samples), rainfusion::kMassThreads, 0,
                             stream>>>(a.stats, a.video, a.mass);
}

// The one dispatch ladder from the call's dtype and head size to the compiled score kernels.
Status enqueue_scores(DType dtype, std::int64_t head_size, const ScoreArgs& a, cudaStream_t stream) {
  const bool half = dtype == DType::kFloat16;
  switch (head_size) {
    case 64: half ? launch_scores<__half, 64>(a, stream) : launch_scores<__nv_bfloat16, 64>(a, stream); break;
    case 128: half ? launch_scores<__half, 128>(a, stream) : launch_scores<__nv_bfloat16, 128>(a, stream); break;
    default:
      return Unsupported("RAINFUSION_ATTN's score kernels are not compiled for head size " + std::to_string(head_size) +
                         "; compiled: 64, 128");
  }
  return cuda::check_launch("RAINFUSION_ATTN's score kernels");
}

// The tiling as the GPU reads it, int32, at offsets into one upload: each token's slot (at 0), each
// slot's token (-1: padding), each tile's valid rows, and the sampled queries' slots.
struct TileLists {
  std::size_t token_of_slot = 0, valid = 0, sample_slots = 0, size = 0;

  TileLists(const RainTiles& tiles, std::size_t samples)
      : token_of_slot(tiles.slot.size()),
        valid(token_of_slot + static_cast<std::size_t>(tiles.padded_length())),
        sample_slots(valid + tiles.valid.size()),
        size(sample_slots + samples) {}

  void write(const RainTiles& tiles, const std::vector<std::int64_t>& samples, std::int32_t* out) const {
    std::fill(out + token_of_slot, out + valid, -1);
    for (std::size_t i = 0; i < tiles.slot.size(); ++i) {
      out[i] = static_cast<std::int32_t>(tiles.slot[i]);
      out[token_of_slot + static_cast<std::size_t>(tiles.slot[i])] = static_cast<std::int32_t>(i);
    }
    std::copy(tiles.valid.begin(), tiles.valid.end(), out + valid);
    for (std::size_t s = 0; s < samples.size(); ++s) out[sample_slots + s] = static_cast<std::int32_t>(samples[s]);
  }
};

// Puts the plan's lists (offsets, indices, tile rows) on the device for the fine pass: from
// page-locked memory, asynchronously, on the stream; `staging` is held until the copy is done.
Result<flash::DeviceBlockSparseLists> upload_block_lists(const BlockSparseLayout& layout, StreamBuffers& mem,
                                                         cuda::PinnedStaging& staging, cudaStream_t stream) {
  const std::size_t offsets = layout.offsets.size(), indices = layout.indices.size(), rows = layout.tile_rows.size();
  const std::size_t entries = offsets + indices + rows;
  DIFFATTN_RETURN_IF_ERROR(staging.acquire(entries * sizeof(std::int32_t)));
  auto* host = staging.as<std::int32_t>();
  std::copy(layout.offsets.begin(), layout.offsets.end(), host);
  std::copy(layout.indices.begin(), layout.indices.end(), host + offsets);
  std::copy(layout.tile_rows.begin(), layout.tile_rows.end(), host + offsets + indices);
  DIFFATTN_ASSIGN_OR_RETURN(std::int32_t* device, mem.take<std::int32_t>(static_cast<std::int64_t>(entries),
                                                                          "the block lists"));
  const cudaError_t copied =
      cudaMemcpyAsync(device, host, entries * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream);
  DIFFATTN_RETURN_IF_ERROR(staging.hold_until(stream));
  DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(copied, "copying RAINFUSION_ATTN's block lists to the GPU"));
  return flash::DeviceBlockSparseLists{layout.q_tile, layout.k_tile, device, device + offsets,
                                       rows > 0 ? device + offsets + indices : nullptr};
}

}  // namespace

Status run_rainfusion_cuda(const AttentionProblem& p, const RainFusionParams& params, void* stream_arg,
                           RainFusionPlan* plan_out) {
  DIFFATTN_RETURN_IF_ERROR(check_rainfusion_call(p, params));
  DIFFATTN_RETURN_IF_ERROR(check_cuda_call(p));
  cuda::ScopedDevice device;
  DIFFATTN_RETURN_IF_ERROR(device.enter(p.q.device.index));
  DIFFATTN_RETURN_IF_ERROR(check_hopper(p.q.device.index));
  const auto stream = static_cast<cudaStream_t>(stream_arg);
  DIFFATTN_RETURN_IF_ERROR(check_not_capturing(stream));

  const VideoGeometry& g = *p.video;
  RainFusionPlan plan;
  plan.tiles = tile_sequence_for_rainfusion(g);
  const RainTiles& tiles = plan.tiles;
  const std::int64_t batch = p.q.size(0), heads_q = p.q.size(2), heads_kv = p.k.size(2), d = p.q.size(3);
  const std::int64_t count = tiles.count(), padded = tiles.padded_length(), video = tiles.video_tiles;
  const std::int64_t heads_total = batch * heads_q;
  DIFFATTN_RETURN_IF_ERROR(check_padded_rows(batch, tiles));
  if (batch == 0) {  // nothing to attend
    if (plan_out != nullptr) *plan_out = std::move(plan);
    return Status::Ok();
  }
  const std::vector<std::int64_t> sample_slots = rain_sampled_slots(tiles, g, params.sampled_queries);
  const auto samples = static_cast<std::int64_t>(sample_slots.size());
  const TileLists lists(tiles, sample_slots.size());

  // One page-locked buffer carries the tile lists up and the scores down: [tile lists | scores | mass].
  const std::size_t list_bytes = lists.size * sizeof(std::int32_t);
  const std::size_t score_bytes = static_cast<std::size_t>(heads_total * video * video) * sizeof(float);
  const std::size_t mass_bytes = static_cast<std::size_t>(heads_total * samples * video) * sizeof(float);
  cuda::PinnedStaging host;
  DIFFATTN_RETURN_IF_ERROR(host.acquire(list_bytes + score_bytes + mass_bytes));
  lists.write(tiles, sample_slots, host.as<std::int32_t>());

  StreamBuffers mem(stream);
  DIFFATTN_ASSIGN_OR_RETURN(std::int32_t* dev_lists,
                            mem.take<std::int32_t>(static_cast<std::int64_t>(lists.size), "the tile lists"));
  const std::int64_t elems_q = batch * padded * heads_q * d, elems_kv = batch * padded * heads_kv * d;
  DIFFATTN_ASSIGN_OR_RETURN(std::uint16_t* qp, mem.take<std::uint16_t>(elems_q, "q in tile order"));
  DIFFATTN_ASSIGN_OR_RETURN(std::uint16_t* kp, mem.take<std::uint16_t>(elems_kv, "k in tile order"));
  DIFFATTN_ASSIGN_OR_RETURN(std::uint16_t* vp, mem.take<std::uint16_t>(elems_kv, "v in tile order"));
  DIFFATTN_ASSIGN_OR_RETURN(std::uint16_t* op, mem.take<std::uint16_t>(elems_q, "the fine pass's out"));
  DIFFATTN_ASSIGN_OR_RETURN(float* mean_q, mem.take<float>(batch * video * heads_q * d, "the tiles' mean q"));
  DIFFATTN_ASSIGN_OR_RETURN(float* mean_k, mem.take<float>(batch * video * heads_kv * d, "the tiles' mean k"));
  DIFFATTN_ASSIGN_OR_RETURN(float* scores, mem.take<float>(heads_total * video * video, "the block scores"));
  DIFFATTN_ASSIGN_OR_RETURN(float2* stats, mem.take<float2>(heads_total * samples * video, "the sampled scores"));
  DIFFATTN_ASSIGN_OR_RETURN(float* mass, mem.take<float>(heads_total * samples * video, "the sampled mass"));
  const std::int32_t* slot_of_token = dev_lists;
  const std::int32_t* token_of_slot = dev_lists + lists.token_of_slot;
  const cudaError_t uploaded =
      cudaMemcpyAsync(dev_lists, host.as<std::int32_t>(), list_bytes, cudaMemcpyHostToDevice, stream);
  // Held past the upload should a step below fail before the stream is waited for.
  DIFFATTN_RETURN_IF_ERROR(host.hold_until(stream));
  DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(uploaded, "copying RAINFUSION_ATTN's tile lists to the GPU"));

  gather(p.q, qp, token_of_slot, padded, stream);
  gather(p.k, kp, token_of_slot, padded, stream);
  gather(p.v, vp, token_of_slot, padded, stream);
  DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("RAINFUSION_ATTN's copy into tile order"));
  ScoreArgs args{qp,
                 kp,
                 dev_lists + lists.valid,
                 dev_lists + lists.sample_slots,
                 mean_q,
                 mean_k,
                 scores,
                 stats,
                 mass,
                 batch,
                 count,
                 static_cast<int>(video),
                 static_cast<int>(heads_q),
                 static_cast<int>(heads_kv),
                 static_cast<int>(samples),
                 p.softmax_scale()};
  DIFFATTN_RETURN_IF_ERROR(enqueue_scores(p.q.dtype, d, args, stream));

  // The scores come to the host in one trip; the stream is waited for once, here.
  float* host_scores = host.as<float>(list_bytes);
  float* host_mass = host.as<float>(list_bytes + score_bytes);
  cudaError_t copied = cudaMemcpyAsync(host_scores, scores, score_bytes, cudaMemcpyDeviceToHost, stream);
  if (copied == cudaSuccess) copied = cudaMemcpyAsync(host_mass, mass, mass_bytes, cudaMemcpyDeviceToHost, stream);
  const cudaError_t synced = cudaStreamSynchronize(stream);
  DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(copied, "copying RAINFUSION_ATTN's scores to the host"));
  DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(synced, "RAINFUSION_ATTN's score kernels"));

  RainScoreSource<float> source;
  source.block_scores = [host_scores, video](std::int64_t bh, std::int64_t first, std::int64_t, std::vector<float>&) {
    return host_scores + (bh * video + first) * video;
  };
  source.sampled_mass = [host_mass, video, samples](std::int64_t bh, std::int64_t sample, std::int64_t,
                                                    std::vector<double>& out) {
    const float* m = host_mass + (bh * samples + sample) * video;
    out.assign(m, m + video);
  };
  DIFFATTN_RETURN_IF_ERROR(build_rainfusion_plan(g, params, batch, heads_q, source, plan));

  // The plan is this file's own, built by build_rainfusion_plan: the lists go up without the host
  // overload's re-check of every entry.
  cuda::PinnedStaging staged_lists;
  DIFFATTN_ASSIGN_OR_RETURN(flash::DeviceBlockSparseLists block_lists,
                            upload_block_lists(plan.layout, mem, staged_lists, stream));
  AttentionProblem fine;
  fine.q = TensorView::Contiguous(qp, p.q.dtype, {batch, padded, heads_q, d}, p.q.device);
  fine.k = TensorView::Contiguous(kp, p.q.dtype, {batch, padded, heads_kv, d}, p.q.device);
  fine.v = TensorView::Contiguous(vp, p.q.dtype, {batch, padded, heads_kv, d}, p.q.device);
  fine.out = TensorView::Contiguous(op, p.q.dtype, {batch, padded, heads_q, d}, p.q.device);
  fine.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(flash::run_block_sparse_cuda(fine, block_lists, stream));

  scatter(op, p.out, slot_of_token, padded, stream);
  DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("RAINFUSION_ATTN's copy back into token order"));
  if (plan_out != nullptr) *plan_out = std::move(plan);
  return Status::Ok();
}

}  // namespace diffattn
