// FASTVIDEO_VSA for CUDA views: checks, one workspace, the gather and pooling kernels, the coarse
// branch with top-k, the fine branch on the Hopper block-sparse kernel and the scatter into out,
// all on the caller's stream. Every check runs before anything is launched.

#include "kernels/cuda/sparse/vsa_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/scoped_device.h"
#include "kernels/cuda/stream_workspace.h"
#include "kernels/cuda/sparse/vsa_coarse_kernel.cuh"
#include "kernels/cuda/sparse/vsa_cube_kernels.cuh"
#include "kernels/cuda/sparse/vsa_cuda_config.h"
#include "kernels/sparse/segmented_key_blocks.h"
#include "kernels/sparse/vsa_cubes.h"

namespace diffattn {
namespace {

using vsa::StridedView;

Status check_cuda_problem(const AttentionProblem& p) {
  if (p.q.device.kind != DeviceKind::kCuda)
    return InvalidInput("FASTVIDEO_VSA's CUDA path reads CUDA tensors, but q lives on the CPU; run "
                        "run_fastvideo_vsa_cpu for CPU tensors");
  if (p.q.dtype != DType::kBFloat16 && p.q.dtype != DType::kFloat16)
    return Unsupported("FASTVIDEO_VSA on CUDA takes float16 or bfloat16 tensors, got " +
                       std::string(dtype_name(p.q.dtype)) + "; convert q/k/v, or run float32 on CPU tensors");
  const std::int64_t d = p.q.size(3);
  if (!vsa::is_cuda_head_size(d) || p.v.size(3) != d)
    return Unsupported("FASTVIDEO_VSA on CUDA: head size " + std::to_string(d) + " (values " +
                       std::to_string(p.v.size(3)) + ") is not compiled; compiled: " + vsa::cuda_head_sizes_text() +
                       " with equal query and value head sizes; run on CPU tensors for others");
  const std::int64_t tokens = p.video->tokens();
  if (p.q.size(1) != tokens || p.k.size(1) != tokens)
    return InvalidInput("FASTVIDEO_VSA: q and k must hold the video's " + std::to_string(tokens) +
                        " tokens (frames x height x width), got " + std::to_string(p.q.size(1)) + " and " +
                        std::to_string(p.k.size(1)) + "; pass the geometry of these tokens");
  if (!(p.softmax_scale() > 0.f))
    return Unsupported("FASTVIDEO_VSA on CUDA needs a positive softmax scale (its fine branch's kernel does), got " +
                       std::to_string(p.softmax_scale()) + "; run on CPU tensors for other scales");
  if (p.q.size(0) > 65535)
    return InvalidInput("FASTVIDEO_VSA on CUDA takes at most 65535 sequences per call, got " +
                        std::to_string(p.q.size(0)) + "; split the batch");
  return Status::Ok();
}

// How the coarse branch runs on the device: warps per top-k block, and the device's opt-in shared
// memory per block, which every launch sets as the top-k kernel's limit (one value for all calls,
// so that threads launching other geometries never lower it under each other).
struct CoarseLaunch {
  int top_k_warps = 0;
  int smem_limit = 0;
  bool segmented = false;  // the fine branch runs Hopper's walk, which takes segmented key blocks
  std::int64_t score_bytes = vsa::kCoarseScoreBytes;  // a pass's scores at most
};

// The kernels' limits on the device: a block-sparse kernel for the fine branch, and the top-k's
// row of scores in shared memory.
Result<CoarseLaunch> check_device(int device, std::int64_t cubes, flash::BlockSparseKernel kernel) {
  if (const Status fine = flash::check_block_sparse_device(device, kernel); !fine.ok())
    return Status(fine.code(), "FASTVIDEO_VSA's fine branch: " + fine.message());
  int smem_block = 0;
  DIFFATTN_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&smem_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const int warps = vsa::coarse_top_k_warps(cubes, smem_block);
  if (warps == 0)
    return Unsupported("FASTVIDEO_VSA on CUDA selects each query cube's key cubes from its row of coarse scores in "
                       "shared memory: " + std::to_string(cubes) + " cubes need " +
                       std::to_string(vsa::coarse_top_k_smem_bytes(1, cubes)) + " bytes per block, more than "
                       "this GPU's " + std::to_string(smem_block) + "; run shorter or smaller videos per call, or on "
                       "CPU tensors");
  int major = 0;
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return CoarseLaunch{warps, smem_block, kernel == flash::BlockSparseKernel::kForDevice && major == 9,
                      vsa::kCoarseScoreBytes};
}

StridedView strided(const TensorView& t) {
  return {t.data, t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

// Whether 8-element (16-byte) accesses along the head dimension of `t` are aligned.
bool takes_vectors(const TensorView& t) {
  return t.stride(3) == 1 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 && t.stride(2) % 8 == 0 &&
         reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0;
}

struct Shapes {
  std::int64_t batch, heads_q, heads_kv, dim, cubes, padded, rows, topk;
};

template <typename T, int kVec>
void launch_gather(const TensorView& src, T* padded, float* means, const VsaCubeMap& map, const Shapes& s,
                   std::int64_t heads, cudaStream_t stream) {
  vsa::gather_cubes_kernel<T, kVec><<<dim3(static_cast<unsigned>(s.cubes), static_cast<unsigned>(s.batch)),
                                      vsa::kCubeThreads, 0, stream>>>(strided(src), padded, means, map,
                                                                      static_cast<int>(heads),
                                                                      static_cast<int>(s.dim));
}

template <typename T>
Status gather(const TensorView& src, T* padded, float* means, const VsaCubeMap& map, const Shapes& s,
              std::int64_t heads, cudaStream_t stream) {
  if (takes_vectors(src))
    launch_gather<T, 8>(src, padded, means, map, s, heads, stream);
  else
    launch_gather<T, 1>(src, padded, means, map, s, heads, stream);
  return cuda::check_launch("gather_cubes_kernel");
}

// The coarse branch, a pass per coarse_heads_per_pass heads: scores, top-k (and softmax weights
// with a gate), then with a gate the weighted value means into coarse_out.
Status coarse(const vsa::CoarseParams& p, const Shapes& s, const CoarseLaunch& launch, float* scores,
              cudaStream_t stream) {
  const std::int64_t cubes = s.cubes, ld = vsa::coarse_score_ld(cubes), dim = s.dim;
  const std::int64_t heads = s.batch * s.heads_q, per_pass = vsa::coarse_heads_per_pass(cubes, heads, launch.score_bytes);
  const int group = static_cast<int>(s.heads_q / s.heads_kv);
  const auto tiles = [](std::int64_t n) { return static_cast<unsigned>((n + vsa::kCoarseGemmTile - 1) / vsa::kCoarseGemmTile); };
  const auto top_k_smem = static_cast<int>(vsa::coarse_top_k_smem_bytes(launch.top_k_warps, cubes));
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(vsa::coarse_top_k_kernel,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize, launch.smem_limit));
  for (std::int64_t first = 0; first < heads; first += per_pass) {
    const std::int64_t count = std::min(per_pass, heads - first);
    vsa::CoarseGemm g;
    g.a = {p.q_means, s.heads_q * dim, cubes * s.heads_q * dim, dim, 0, 1};
    g.b = {p.k_means, s.heads_kv * dim, cubes * s.heads_kv * dim, dim, 0, group};
    g.c = {scores, ld, 0, 0, cubes * ld, 1};
    g.m = g.n = static_cast<int>(cubes);
    g.k = static_cast<int>(dim);
    g.alpha = p.scale;
    g.first_head = first;
    g.heads_q = static_cast<int>(s.heads_q);
    vsa::coarse_gemm_kernel<true><<<dim3(tiles(cubes), tiles(cubes), static_cast<unsigned>(count)),
                                    vsa::kCoarseGemmThreads, 0, stream>>>(g);
    DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("coarse_gemm_kernel (scores)"));

    vsa::CoarseTopK t;
    t.scores = scores;
    t.indices = p.indices;
    t.first_head = first;
    t.rows = count * cubes;
    t.cubes = static_cast<int>(cubes);
    t.ld = static_cast<int>(ld);
    t.topk = p.topk;
    t.weights = p.coarse_out != nullptr;
    const std::int64_t warps = launch.top_k_warps;
    vsa::coarse_top_k_kernel<<<static_cast<unsigned>((t.rows + warps - 1) / warps), static_cast<unsigned>(32 * warps),
                               top_k_smem, stream>>>(t);
    DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("coarse_top_k_kernel"));
    if (p.coarse_out == nullptr) continue;

    vsa::CoarseGemm w;
    w.a = {scores, ld, 0, 0, cubes * ld, 1};
    w.b = {p.v_means, s.heads_kv * dim, cubes * s.heads_kv * dim, dim, 0, group};
    w.c = {p.coarse_out, s.heads_q * dim, cubes * s.heads_q * dim, dim, 0, 1};
    w.m = static_cast<int>(cubes);
    w.n = static_cast<int>(dim);
    w.k = static_cast<int>(cubes);
    w.first_head = first;
    w.heads_q = static_cast<int>(s.heads_q);
    vsa::coarse_gemm_kernel<false><<<dim3(tiles(dim), tiles(cubes), static_cast<unsigned>(count)),
                                     vsa::kCoarseGemmThreads, 0, stream>>>(w);
    DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("coarse_gemm_kernel (values)"));
  }
  return Status::Ok();
}

template <typename T>
Status scatter(const T* fine, const float* coarse_out, const AttentionProblem& p, const VsaCubeMap& map,
               const Shapes& s, cudaStream_t stream) {
  const StridedView gate = p.gate ? strided(*p.gate) : StridedView{};
  const bool vectors = takes_vectors(p.out) && (!p.gate || takes_vectors(*p.gate));
  const dim3 grid(static_cast<unsigned>(s.cubes), static_cast<unsigned>(s.batch));
  const int heads = static_cast<int>(s.heads_q), dim = static_cast<int>(s.dim);
  if (vectors)
    vsa::scatter_cubes_kernel<T, 8>
        <<<grid, vsa::kCubeThreads, 0, stream>>>(fine, coarse_out, gate, strided(p.out), map, heads, dim);
  else
    vsa::scatter_cubes_kernel<T, 1>
        <<<grid, vsa::kCubeThreads, 0, stream>>>(fine, coarse_out, gate, strided(p.out), map, heads, dim);
  return cuda::check_launch("scatter_cubes_kernel");
}

// The chosen key cubes and the tile rows the fine branch used, back on the host; waits for the stream.
Status copy_selected(const std::int32_t* offsets, const std::int32_t* indices, const std::int32_t* tile_rows,
                     const Shapes& s, cudaStream_t stream, BlockSparseLayout* selected) {
  BlockSparseLayout layout;
  layout.q_tile = layout.k_tile = static_cast<int>(kVsaCubeTokens);
  layout.batch = s.batch;
  layout.heads = s.heads_q;
  layout.q_tiles = layout.k_tiles = s.cubes;
  layout.offsets.resize(static_cast<std::size_t>(s.rows + 1));
  layout.indices.resize(static_cast<std::size_t>(s.rows * s.topk));
  layout.tile_rows.resize(static_cast<std::size_t>(s.cubes));
  const std::pair<std::vector<std::int32_t>*, const std::int32_t*> parts[] = {
      {&layout.offsets, offsets}, {&layout.indices, indices}, {&layout.tile_rows, tile_rows}};
  for (const auto& [host, device] : parts)
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host->data(), device, host->size() * sizeof(std::int32_t),
                                                  cudaMemcpyDeviceToHost, stream));
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  *selected = std::move(layout);
  return Status::Ok();
}

template <typename T>
Status run_typed(const AttentionProblem& p, const Shapes& s, const CoarseLaunch& launch, cudaStream_t stream,
                 BlockSparseLayout* selected, flash::BlockSparseKernel kernel) {
  const VsaCubeMap map{p.video->frames, p.video->height, p.video->width};
  const bool gated = p.gate.has_value();
  const auto elements = [&](std::int64_t rows, std::int64_t heads) {
    return static_cast<std::size_t>(s.batch * rows * heads * s.dim);
  };
  cuda::StreamWorkspace ws(stream);
  const std::size_t q_pad_at = ws.place(elements(s.padded, s.heads_q) * sizeof(T));
  const std::size_t k_pad_at = ws.place(elements(s.padded, s.heads_kv) * sizeof(T));
  const std::size_t v_pad_at = ws.place(elements(s.padded, s.heads_kv) * sizeof(T));
  const std::size_t fine_at = ws.place(elements(s.padded, s.heads_q) * sizeof(T));
  const std::size_t q_means_at = ws.place(elements(s.cubes, s.heads_q) * sizeof(float));
  const std::size_t k_means_at = ws.place(elements(s.cubes, s.heads_kv) * sizeof(float));
  const std::size_t v_means_at = ws.place(gated ? elements(s.cubes, s.heads_kv) * sizeof(float) : 0);
  const std::size_t coarse_at = ws.place(gated ? elements(s.cubes, s.heads_q) * sizeof(float) : 0);
  const std::size_t scores_at = ws.place(static_cast<std::size_t>(
      vsa::coarse_heads_per_pass(s.cubes, s.batch * s.heads_q, launch.score_bytes) * s.cubes * vsa::coarse_score_ld(s.cubes) * 4));
  const std::size_t offsets_at = ws.place(static_cast<std::size_t>(s.rows + 1) * sizeof(std::int32_t));
  const std::size_t indices_at = ws.place(static_cast<std::size_t>(s.rows * s.topk) * sizeof(std::int32_t));
  const std::size_t tile_rows_at = ws.place(static_cast<std::size_t>(s.cubes) * sizeof(std::int32_t));
  // Where the video has partial cubes, Hopper's walk takes the lists segmented: an edge cube costs
  // its 16-row segments, not a whole 64-row tile, as queries and as keys.
  const bool segmented = launch.segmented && map.has_partial_cubes();
  SegmentedLists seg;
  if (segmented) {
    std::vector<std::int32_t> cube_rows(static_cast<std::size_t>(s.cubes));
    for (std::int64_t c = 0; c < s.cubes; ++c) cube_rows[static_cast<std::size_t>(c)] = map.valid(c);
    seg = plan_segmented_lists(cube_rows, s.batch * s.heads_q, static_cast<int>(s.topk));
    if (seg.block_capacity() >= (std::int64_t{1} << 31))
      return InvalidInput("FASTVIDEO_VSA on CUDA: " + std::to_string(s.batch * s.heads_q) + " heads of " +
                          std::to_string(s.cubes) + " cubes with topk " + std::to_string(s.topk) +
                          " pass the fine branch's 32-bit block offsets; run fewer sequences or heads per call");
  }
  const auto seg_ints = [&](std::int64_t n) { return segmented ? static_cast<std::size_t>(n) * sizeof(std::int32_t) : 0; };
  const std::size_t query_blocks_at = ws.place(seg_ints(4 * std::int64_t{seg.query_ctas}));
  const std::size_t block_first_at = ws.place(seg_ints(seg.groups * seg.query_ctas));
  const std::size_t block_counts_at = ws.place(seg_ints(seg.groups * seg.query_ctas));
  const std::size_t blocks_at = ws.place(seg_ints(4 * seg.block_capacity()));
  DIFFATTN_RETURN_IF_ERROR(ws.allocate("FASTVIDEO_VSA", "padded q/k/v, fine output, cube means, key lists"));
  T* q_pad = ws.at<T>(q_pad_at);
  T* k_pad = ws.at<T>(k_pad_at);
  T* v_pad = ws.at<T>(v_pad_at);
  T* fine_out = ws.at<T>(fine_at);
  float* q_means = ws.at<float>(q_means_at);
  float* k_means = ws.at<float>(k_means_at);
  float* v_means = gated ? ws.at<float>(v_means_at) : nullptr;
  float* coarse_out = gated ? ws.at<float>(coarse_at) : nullptr;
  float* scores = ws.at<float>(scores_at);
  auto* offsets = ws.at<std::int32_t>(offsets_at);
  auto* indices = ws.at<std::int32_t>(indices_at);
  auto* tile_rows = ws.at<std::int32_t>(tile_rows_at);
  if (segmented) {
    seg.query_blocks = ws.at<std::int32_t>(query_blocks_at);
    seg.block_first = ws.at<std::int32_t>(block_first_at);
    seg.block_counts = ws.at<std::int32_t>(block_counts_at);
    seg.blocks = ws.at<std::int32_t>(blocks_at);
  }

  // Padded cube order and cube means (values only where the gated coarse branch needs them).
  DIFFATTN_RETURN_IF_ERROR(gather<T>(p.q, q_pad, q_means, map, s, s.heads_q, stream));
  DIFFATTN_RETURN_IF_ERROR(gather<T>(p.k, k_pad, k_means, map, s, s.heads_kv, stream));
  DIFFATTN_RETURN_IF_ERROR(gather<T>(p.v, v_pad, v_means, map, s, s.heads_kv, stream));

  // The lists' offsets and tile rows, then the coarse branch fills their indices.
  const std::int64_t fill_items = std::max(s.rows + 1, s.cubes);
  const auto fill_blocks = static_cast<unsigned>(std::min<std::int64_t>((fill_items + 255) / 256, 4096));
  vsa::fill_lists_kernel<<<fill_blocks, 256, 0, stream>>>(offsets, s.rows, static_cast<std::int32_t>(s.topk),
                                                          tile_rows, map);
  DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("fill_lists_kernel"));
  vsa::CoarseParams params;
  params.q_means = q_means;
  params.k_means = k_means;
  params.v_means = v_means;
  params.coarse_out = coarse_out;
  params.indices = indices;
  params.topk = static_cast<int>(s.topk);
  params.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(coarse(params, s, launch, scores, stream));

  constexpr int kTile = flash::kBlockSparseSmallTile;
  static_assert(kTile == kVsaCubeTokens, "a cube is one 64-row query tile and one 64-key tile of the fine branch");
  flash::DeviceBlockSparseLists lists{kTile, kTile, offsets, indices, tile_rows};
  if (segmented) {
    DIFFATTN_RETURN_IF_ERROR(flash::build_segmented_lists_cuda(lists, seg, stream));
    lists.segmented = &seg;
  }

  // The fine branch over the chosen cubes; padding keys are out of every tile by its tile rows.
  AttentionProblem fine;
  const Device device = p.q.device;
  fine.q = TensorView::Contiguous(q_pad, p.q.dtype, {s.batch, s.padded, s.heads_q, s.dim}, device);
  fine.k = TensorView::Contiguous(k_pad, p.q.dtype, {s.batch, s.padded, s.heads_kv, s.dim}, device);
  fine.v = TensorView::Contiguous(v_pad, p.q.dtype, {s.batch, s.padded, s.heads_kv, s.dim}, device);
  fine.out = TensorView::Contiguous(fine_out, p.q.dtype, {s.batch, s.padded, s.heads_q, s.dim}, device);
  fine.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(flash::run_block_sparse_cuda(fine, lists, stream, kernel));

  // Only now is out written: the valid slots back in token order, with the gated coarse branch.
  DIFFATTN_RETURN_IF_ERROR(scatter<T>(fine_out, coarse_out, p, map, s, stream));
  if (selected != nullptr) DIFFATTN_RETURN_IF_ERROR(copy_selected(offsets, indices, tile_rows, s, stream, selected));
  return Status::Ok();
}

}  // namespace

Status run_fastvideo_vsa_cuda(const AttentionProblem& problem, std::int64_t topk, void* stream,
                              BlockSparseLayout* selected, flash::BlockSparseKernel kernel,
                              std::int64_t coarse_score_bytes) {
  DIFFATTN_RETURN_IF_ERROR(check_vsa_problem(problem, topk));
  DIFFATTN_RETURN_IF_ERROR(check_cuda_problem(problem));
  const VideoGeometry& g = *problem.video;
  const VsaCubeMap map{g.frames, g.height, g.width};
  Shapes s{};
  s.batch = problem.q.size(0);
  s.heads_q = problem.q.size(2);
  s.heads_kv = problem.k.size(2);
  s.dim = problem.q.size(3);
  s.cubes = map.cubes();
  s.padded = s.cubes * kVsaCubeTokens;
  s.rows = s.batch * s.heads_q * s.cubes;
  s.topk = topk;
  if (s.rows * s.topk >= (std::int64_t{1} << 31) || s.batch * s.padded >= (std::int64_t{1} << 31) ||
      s.padded >= kMaxSegmentedRows)
    return InvalidInput("FASTVIDEO_VSA on CUDA: " + std::to_string(s.batch) + " sequences of " +
                        std::to_string(s.cubes) + " cubes with topk " + std::to_string(topk) +
                        " pass the kernels' 32-bit lists and row indices; run fewer sequences or heads per call");
  cuda::ScopedDevice device;
  DIFFATTN_RETURN_IF_ERROR(device.enter(problem.q.device.index));
  DIFFATTN_ASSIGN_OR_RETURN(CoarseLaunch launch, check_device(problem.q.device.index, s.cubes, kernel));
  if (coarse_score_bytes > 0) launch.score_bytes = coarse_score_bytes;
  if (s.batch == 0) return Status::Ok();
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (problem.q.dtype == DType::kBFloat16)
    return run_typed<__nv_bfloat16>(problem, s, launch, cuda_stream, selected, kernel);
  return run_typed<__half>(problem, s, launch, cuda_stream, selected, kernel);
}

}  // namespace diffattn
