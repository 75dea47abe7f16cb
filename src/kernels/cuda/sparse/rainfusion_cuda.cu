// RAINFUSION_ATTN on CUDA tensors: checks, then on the stream the copy into tile order, the scores,
// the plan, the fine pass and the copy back, in that order; out is written by the last step only.

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
#include "kernels/cuda/scoped_device.h"
#include "kernels/cuda/stream_workspace.h"
#include "kernels/cuda/sage/run_sage_attn.h"
#include "kernels/cuda/sparse/rainfusion_kernels.cuh"
#include "kernels/cuda/sparse/rainfusion_plan_kernels.cuh"
#include "kernels/sparse/rainfusion_mask.h"

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
Status check_padded_rows(std::int64_t batch, const RainTileMap& map) {
  if (batch * map.padded_length() <= std::numeric_limits<std::int32_t>::max()) return Status::Ok();
  return Unsupported("RAINFUSION_ATTN on CUDA tensors takes at most 2^31 - 1 padded tokens over the batch, got " +
                     std::to_string(batch * map.padded_length()) + "; split the call's batch");
}

// The fine pass's kernel, checked before anything runs: the 8-bit one (precision fp8 or mix) is
// SAGE_ATTN's block-sparse Hopper kernel.
Status check_fine_kernel(int device, flash::BlockSparseKernel kernel, RainPrecision precision) {
  if (precision != RainPrecision::kBf16) {
    int major = 0, minor = 0;
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (kernel == flash::BlockSparseKernel::kForDevice && major == 9 && minor == 0) return Status::Ok();
    return Unsupported(std::string("RAINFUSION_ATTN's 8-bit fine pass (block_sparse.precision '") +
                       rain_precision_name(precision) + "') runs on sm_90 (Hopper), but this device is sm_" +
                       std::to_string(major * 10 + minor) + "; set block_sparse.precision to 'bf16' here");
  }
  const Status s = flash::check_block_sparse_device(device, kernel);
  if (s.ok()) return s;
  return Status(s.code(), "RAINFUSION_ATTN's fine pass: " + s.message());
}

Strides strides_of(const TensorView& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

// Whether every (token, head) row of `t` can move in 16-byte pieces.
bool rows_of_16_bytes(const TensorView& t) {
  return t.stride(3) == 1 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 && t.stride(2) % 8 == 0 &&
         t.size(3) % 8 == 0 && reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0;
}

constexpr int kCopyThreads = 128;

// `t` into padded tile order at `dst`, with the video tiles' means where `means` is given.
template <typename T>
void gather_typed(const TensorView& t, std::uint16_t* dst, const RainTileMap& map, float* means, cudaStream_t stream) {
  using rainfusion::kGatherThreads;
  const auto* src = static_cast<const std::uint16_t*>(t.data);
  const int heads = static_cast<int>(t.size(2)), dim = static_cast<int>(t.size(3));
  const bool vec = rows_of_16_bytes(t);
  const int runs = heads * dim / (vec ? 8 : 1);
  const dim3 grid(static_cast<unsigned>(t.size(0) * map.tiles()),
                  static_cast<unsigned>((runs + kGatherThreads - 1) / kGatherThreads));
  if (vec)
    rainfusion::gather_tile<8, T><<<grid, kGatherThreads, 0, stream>>>(src, strides_of(t), dst, map, heads, dim, means);
  else
    rainfusion::gather_tile<1, T><<<grid, kGatherThreads, 0, stream>>>(src, strides_of(t), dst, map, heads, dim, means);
}

void gather(const TensorView& t, std::uint16_t* dst, const RainTileMap& map, float* means, cudaStream_t stream) {
  if (t.dtype == DType::kFloat16) gather_typed<__half>(t, dst, map, means, stream);
  else gather_typed<__nv_bfloat16>(t, dst, map, means, stream);
}

void scatter(const std::uint16_t* src, const TensorView& out, const RainTileMap& map, cudaStream_t stream) {
  auto* dst = static_cast<std::uint16_t*>(out.data);
  const std::int64_t tokens = out.size(1);
  const dim3 grid(static_cast<unsigned>(out.size(0) * tokens));
  const int heads = static_cast<int>(out.size(2)), dim = static_cast<int>(out.size(3));
  if (rows_of_16_bytes(out))
    rainfusion::scatter_from_tiles<8><<<grid, kCopyThreads, 0, stream>>>(src, dst, strides_of(out), map, tokens, heads,
                                                                         dim);
  else
    rainfusion::scatter_from_tiles<1><<<grid, kCopyThreads, 0, stream>>>(src, dst, strides_of(out), map, tokens, heads,
                                                                         dim);
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

template <typename T, int kDim>
void launch_scores(const ScoreArgs& a, cudaStream_t stream) {
  const auto* qp = static_cast<const T*>(a.qp);
  const auto* kp = static_cast<const T*>(a.kp);
  const int batch = static_cast<int>(a.batch);
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


// The GPU's plan, read back for a caller that asked for it (tests, the backend's log line): the
// stream is waited for here.
Status read_back_plan(const RainListShape& shape, std::int64_t heads_total, const std::int32_t* patterns,
                      const double* captured, const std::int32_t* offsets, const std::int32_t* indices,
                      cudaStream_t stream, RainFusionPlan& plan) {
  const std::int64_t rows = heads_total * shape.tiles();
  std::vector<std::int32_t> pattern_codes(static_cast<std::size_t>(heads_total));
  std::vector<double> held(static_cast<std::size_t>(heads_total * rainfusion::kPatternCount));
  BlockSparseLayout& layout = plan.layout;
  layout.offsets.resize(static_cast<std::size_t>(rows + 1));
  layout.indices.resize(static_cast<std::size_t>(heads_total * shape.per_head()));
  const auto copy = [&](void* to, const void* from, std::size_t bytes) {
    return cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream);
  };
  cudaError_t e = copy(pattern_codes.data(), patterns, pattern_codes.size() * sizeof(std::int32_t));
  if (e == cudaSuccess) e = copy(held.data(), captured, held.size() * sizeof(double));
  if (e == cudaSuccess) e = copy(layout.offsets.data(), offsets, layout.offsets.size() * sizeof(std::int32_t));
  if (e == cudaSuccess) e = copy(layout.indices.data(), indices, layout.indices.size() * sizeof(std::int32_t));
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(e, "reading RAINFUSION_ATTN's plan back from the GPU"));
  plan.patterns.resize(static_cast<std::size_t>(heads_total));
  plan.captured.assign(rainfusion::kPatternCount, std::vector<double>(static_cast<std::size_t>(heads_total)));
  for (std::size_t bh = 0; bh < pattern_codes.size(); ++bh) {
    plan.patterns[bh] = kRainPatterns[pattern_codes[bh]];
    for (std::size_t p = 0; p < rainfusion::kPatternCount; ++p)
      plan.captured[p][bh] = held[bh * rainfusion::kPatternCount + p];
  }
  plan.density = block_sparse_density(layout);
  return Status::Ok();
}

static_assert(static_cast<int>(RainPattern::kSpatial) == rainfusion::kSpatial &&
                  static_cast<int>(RainPattern::kTemporal) == rainfusion::kTemporal &&
                  static_cast<int>(RainPattern::kTextural) == rainfusion::kTextural,
              "the plan kernels read RainPattern's values");

unsigned blocks_for(std::int64_t items, int per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

}  // namespace

Status run_rainfusion_cuda(const AttentionProblem& p, const RainFusionParams& params, void* stream_arg,
                           RainFusionPlan* plan_out, flash::BlockSparseKernel kernel) {
  DIFFATTN_RETURN_IF_ERROR(check_rainfusion_call(p, params));
  DIFFATTN_RETURN_IF_ERROR(check_cuda_call(p));
  cuda::ScopedDevice device;
  DIFFATTN_RETURN_IF_ERROR(device.enter(p.q.device.index));
  DIFFATTN_RETURN_IF_ERROR(check_fine_kernel(p.q.device.index, kernel, params.precision));
  const auto stream = static_cast<cudaStream_t>(stream_arg);

  const VideoGeometry& g = *p.video;
  const RainTileMap map = rain_tile_map(g);
  const std::int64_t batch = p.q.size(0), heads_q = p.q.size(2), heads_kv = p.k.size(2), d = p.q.size(3);
  const std::int64_t count = map.tiles(), padded = map.padded_length(), video = map.video_tiles();
  const std::int64_t heads_total = batch * heads_q;
  DIFFATTN_RETURN_IF_ERROR(check_padded_rows(batch, map));
  const RainListShape shape =
      RainListShape::of(video, map.text_tiles(), map.patches_per_frame(), rain_keep_tiles(params.sparsity, video));
  DIFFATTN_RETURN_IF_ERROR(check_rain_list_size(shape, heads_total));
  if (plan_out != nullptr) {
    plan_out->tiles = tile_sequence_for_rainfusion(g);
    plan_out->video_density = rain_video_density(shape);
  }
  if (batch == 0) return Status::Ok();  // nothing to attend
  const std::int64_t samples = std::min<std::int64_t>(params.sampled_queries, map.video_tokens());
  const std::int64_t rows = heads_total * count, entries = heads_total * samples * rainfusion::kPatternCount;

  cuda::StreamWorkspace ws(stream);
  const std::int64_t elems_q = batch * padded * heads_q * d, elems_kv = batch * padded * heads_kv * d;
  const std::size_t qp_at = ws.place(elems_q * sizeof(std::uint16_t));
  const std::size_t kp_at = ws.place(elems_kv * sizeof(std::uint16_t));
  const std::size_t vp_at = ws.place(elems_kv * sizeof(std::uint16_t));
  const std::size_t op_at = ws.place(elems_q * sizeof(std::uint16_t));
  const std::size_t mean_q_at = ws.place(batch * video * heads_q * d * sizeof(float));
  const std::size_t mean_k_at = ws.place(batch * video * heads_kv * d * sizeof(float));
  const std::size_t scores_at = ws.place(heads_total * video * video * sizeof(float));
  const std::size_t stats_at = ws.place(heads_total * samples * video * sizeof(float2));
  const std::size_t mass_at = ws.place(heads_total * samples * video * sizeof(float));
  const std::size_t held_at = ws.place(entries * sizeof(double));
  const std::size_t captured_at = ws.place(heads_total * rainfusion::kPatternCount * sizeof(double));
  const std::size_t patterns_at = ws.place(heads_total * sizeof(std::int32_t));
  const std::size_t valid_at = ws.place(count * sizeof(std::int32_t));
  const std::size_t slots_at = ws.place(samples * sizeof(std::int32_t));
  const std::size_t offsets_at = ws.place((rows + 1) * sizeof(std::int32_t));
  const std::size_t indices_at = ws.place(heads_total * shape.per_head() * sizeof(std::int32_t));
  DIFFATTN_RETURN_IF_ERROR(ws.allocate("RAINFUSION_ATTN", "q, k, v and out in tile order, block scores, lists"));
  auto* qp = ws.at<std::uint16_t>(qp_at);
  auto* kp = ws.at<std::uint16_t>(kp_at);
  auto* vp = ws.at<std::uint16_t>(vp_at);
  auto* op = ws.at<std::uint16_t>(op_at);
  auto* scores = ws.at<float>(scores_at);
  auto* mass = ws.at<float>(mass_at);
  auto* held = ws.at<double>(held_at);
  auto* captured = ws.at<double>(captured_at);
  auto* patterns = ws.at<std::int32_t>(patterns_at);
  auto* valid = ws.at<std::int32_t>(valid_at);
  auto* sample_slots = ws.at<std::int32_t>(slots_at);
  auto* offsets = ws.at<std::int32_t>(offsets_at);
  auto* indices = ws.at<std::int32_t>(indices_at);

  constexpr int kTableThreads = 256;
  rainfusion::tile_tables<<<blocks_for(std::max(count, samples), kTableThreads), kTableThreads, 0, stream>>>(
      map, static_cast<int>(samples), valid, sample_slots);
  gather(p.q, qp, map, ws.at<float>(mean_q_at), stream);
  gather(p.k, kp, map, ws.at<float>(mean_k_at), stream);
  gather(p.v, vp, map, nullptr, stream);
  DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("RAINFUSION_ATTN's copy into tile order"));
  const ScoreArgs args{qp,
                       kp,
                       valid,
                       sample_slots,
                       ws.at<float>(mean_q_at),
                       ws.at<float>(mean_k_at),
                       scores,
                       ws.at<float2>(stats_at),
                       mass,
                       batch,
                       count,
                       static_cast<int>(video),
                       static_cast<int>(heads_q),
                       static_cast<int>(heads_kv),
                       static_cast<int>(samples),
                       p.softmax_scale()};
  DIFFATTN_RETURN_IF_ERROR(enqueue_scores(p.q.dtype, d, args, stream));

  // The plan: each head's pattern from its sampled queries, then every row of the lists.
  rainfusion::SelectGeometry select;
  select.video = static_cast<int>(video);
  select.frames = static_cast<int>(map.frames);
  select.patches_h = static_cast<int>(map.patches_h);
  select.patches_w = static_cast<int>(map.patches_w);
  select.sink = static_cast<int>(shape.sink);
  select.more = static_cast<int>(std::min(shape.keep, video) - shape.sink);
  rainfusion::sampled_pattern_mass<<<blocks_for(entries, rainfusion::kPlanWarps), rainfusion::kPlanThreads, 0,
                                     stream>>>(select, scores, mass, sample_slots, static_cast<int>(samples), entries,
                                               held);
  constexpr int kHeadThreads = 128;
  rainfusion::choose_patterns<<<blocks_for(heads_total, kHeadThreads), kHeadThreads, 0, stream>>>(
      held, static_cast<int>(samples), heads_total, patterns, captured);
  rainfusion::list_offsets<<<blocks_for(rows + 1, kTableThreads), kTableThreads, 0, stream>>>(shape, rows, offsets);
  rainfusion::list_tiles<<<blocks_for(rows, rainfusion::kPlanWarps), rainfusion::kPlanThreads, 0, stream>>>(
      select, shape, scores, patterns, rows, indices);
  DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("RAINFUSION_ATTN's plan kernels"));

  AttentionProblem fine;
  fine.q = TensorView::Contiguous(qp, p.q.dtype, {batch, padded, heads_q, d}, p.q.device);
  fine.k = TensorView::Contiguous(kp, p.q.dtype, {batch, padded, heads_kv, d}, p.q.device);
  fine.v = TensorView::Contiguous(vp, p.q.dtype, {batch, padded, heads_kv, d}, p.q.device);
  fine.out = TensorView::Contiguous(op, p.q.dtype, {batch, padded, heads_q, d}, p.q.device);
  fine.scale = p.softmax_scale();
  const flash::DeviceBlockSparseLists lists{static_cast<int>(kRainTileTokens), static_cast<int>(kRainTileTokens),
                                            offsets, indices, valid};
  if (params.precision == RainPrecision::kBf16) {
    DIFFATTN_RETURN_IF_ERROR(flash::run_block_sparse_cuda(fine, lists, stream, kernel));
  } else {
    const sage::PvMode pv = params.precision == RainPrecision::kFp8 ? sage::PvMode::kFp8 : sage::PvMode::kFp16;
    DIFFATTN_RETURN_IF_ERROR(sage::run_sage_block_sparse_cuda(fine, lists, pv, stream));
  }
  if (plan_out != nullptr) {
    BlockSparseLayout& layout = plan_out->layout;
    layout.q_tile = layout.k_tile = static_cast<int>(kRainTileTokens);
    layout.batch = batch;
    layout.heads = heads_q;
    layout.q_tiles = layout.k_tiles = count;
    layout.tile_rows = plan_out->tiles.valid;
    DIFFATTN_RETURN_IF_ERROR(
        read_back_plan(shape, heads_total, patterns, captured, offsets, indices, stream, *plan_out));
  }

  scatter(op, p.out, map, stream);
  return cuda::check_launch("RAINFUSION_ATTN's copy back into token order");
}

}  // namespace diffattn
