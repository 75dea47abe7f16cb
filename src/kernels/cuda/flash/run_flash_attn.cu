// FLASH_ATTN for CUDA views: picks the kernel for the device's architecture, turns the views into
// kernel arguments and launches. Every check runs before the launch.

#include "common/reason.h"
#include "kernels/cuda/flash/run_flash_attn.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash/dense_mask.h"
#include "kernels/cuda/flash/flash_checks.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper.h"
#include "kernels/cuda/flash/segment_lists_kernel.cuh"
#include "kernels/cuda/scoped_device.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/dense/tile_config.h"
#include "kernels/sparse/segmented_key_blocks.h"

namespace diffattn::flash {
namespace {

struct DeviceFacts {
  int cc_major = 0, cc_minor = 0, sm_count = 0;
};

// Attributes are read once per device: they cannot change while the process runs.
Result<DeviceFacts> device_facts(int device) {
  static std::mutex mu;
  static std::vector<std::optional<DeviceFacts>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (device >= static_cast<int>(cache.size())) cache.resize(device + 1);
  if (!cache[device]) {
    DeviceFacts f;
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.cc_major, cudaDevAttrComputeCapabilityMajor, device));
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, device));
    cache[device] = f;
  }
  return *cache[device];
}

Status check_contiguous_last_dim(const TensorView& t, const char* name) {
  if (t.stride(3) == 1 || t.size(3) <= 1) return Status::Ok();
  return InvalidInput(std::string("FLASH_ATTN needs ") + name + "'s head dimension to be contiguous (stride 1), got " +
                      "stride " + std::to_string(t.stride(3)) + "; pass a contiguous copy of " + name);
}

Status check_on_device(const std::optional<TensorView>& t, const char* name) {
  if (!t || t->device.kind == DeviceKind::kCuda) return Status::Ok();
  return InvalidInput(std::string("FLASH_ATTN reads ") + name + " on the GPU, but it lives on the CPU; copy " + name +
                      " to the device of q");
}

Status status_from(const LaunchStatus& s) {
  switch (s.code) {
    case LaunchStatus::kOk: return Status::Ok();
    case LaunchStatus::kUnsupported: return Unsupported(s.message);
    case LaunchStatus::kInvalidInput: return InvalidInput(s.message);
    case LaunchStatus::kCudaError: return CudaError(s.message);
  }
  return Internal("FLASH_ATTN: unknown launch status");
}

Result<HopperArgs> hopper_args(const AttentionProblem& pr, int sm_count) {
  for (const auto& [t, name] : {std::pair{&pr.q, "q"}, {&pr.k, "k"}, {&pr.v, "v"}, {&pr.out, "out"}})
    DIFFATTN_RETURN_IF_ERROR(check_contiguous_last_dim(*t, name));
  DIFFATTN_RETURN_IF_ERROR(check_on_device(pr.cu_seqlens_q, "cu_seqlens_q"));
  DIFFATTN_RETURN_IF_ERROR(check_on_device(pr.cu_seqlens_k, "cu_seqlens_k"));
  const float scale = pr.softmax_scale();
  if (!(scale > 0.f))
    return Unsupported("FLASH_ATTN needs a positive softmax scale, got " + std::to_string(scale) +
                       "; select TORCH_SDPA for other scales");
  HopperArgs a;
  a.q = pr.q.data;
  a.k = pr.k.data;
  a.v = pr.v.data;
  for (int i = 0; i < 3; ++i) {
    a.q_stride[i] = pr.q.stride(i);
    a.k_stride[i] = pr.k.stride(i);
    a.v_stride[i] = pr.v.stride(i);
  }
  a.q_rows = pr.q.size(1);
  a.kv_rows = pr.k.size(1);
  a.tma_batch = pr.q.size(0);
  a.bf16 = pr.q.dtype == DType::kBFloat16;
  a.sm_count = sm_count;
  FlashParams& p = a.params;
  p.out = pr.out.data;
  p.out_stride_b = pr.out.stride(0);
  p.out_stride_s = pr.out.stride(1);
  p.out_stride_h = pr.out.stride(2);
  if (pr.lse) {
    p.lse = static_cast<float*>(pr.lse->data);
    p.lse_stride_b = pr.lse->stride(0);
    p.lse_stride_h = pr.lse->stride(1);
    p.lse_stride_s = pr.lse->stride(2);
  }
  if (pr.mask) {
    p.kv_mask = static_cast<const std::uint8_t*>(pr.mask->data);
    p.mask_stride_b = pr.mask->stride(0);
    p.mask_stride_s = pr.mask->stride(1);
  }
  p.heads_q = static_cast<int>(pr.q.size(2));
  p.heads_kv = static_cast<int>(pr.k.size(2));
  p.head_size = static_cast<int>(pr.q.size(3));
  p.scale_log2 = scale * 1.4426950408889634f;
  p.causal = pr.causal;
  if (pr.is_varlen()) {
    p.cu_seqlens_q = static_cast<const int*>(pr.cu_seqlens_q->data);
    p.cu_seqlens_k = static_cast<const int*>(pr.cu_seqlens_k->data);
    p.batch = static_cast<int>(pr.cu_seqlens_q->size(0) - 1);
    // Without the maxima every packed row bounds a sequence; tiles past a sequence's end are skipped.
    p.seqlen_q = static_cast<int>(pr.max_seqlen_q > 0 ? pr.max_seqlen_q : pr.q.size(1));
    p.seqlen_k = static_cast<int>(pr.max_seqlen_k > 0 ? pr.max_seqlen_k : pr.k.size(1));
    a.tma_batch = 1;
  } else {
    p.batch = static_cast<int>(pr.q.size(0));
    p.seqlen_q = static_cast<int>(pr.q.size(1));
    p.seqlen_k = static_cast<int>(pr.k.size(1));
  }
  return a;
}

Status run_ampere(const AttentionProblem& pr, void* stream) {
  DIFFATTN_ASSIGN_OR_RETURN(cuda::SdpaParams params, cuda::make_sdpa_params(pr));
  if (auto reasons = cuda::mma_path_reasons(params); !reasons.empty())
    return Unsupported("FLASH_ATTN's Ampere/Ada kernel cannot run this problem: " + reasons_text(reasons) +
                       "; select TORCH_SDPA");
  return cuda::launch_sdpa_mma(params, stream);
}

// The checks every entry point makes before anything runs; `device` stays entered for the launch.
// `dense_mask`: the entry takes dense masks (the masked entries), which FLASH_ATTN's own refuse.
Result<DeviceFacts> enter_device(const AttentionProblem& problem, cuda::ScopedDevice& device, bool dense_mask = false) {
  if (problem.q.device.kind != DeviceKind::kCuda)
    return InvalidInput("FLASH_ATTN runs on CUDA tensors, but q lives on the CPU; move q/k/v/out to a GPU or "
                        "select TORCH_SDPA");
  ProblemShape shape = problem.shape();
  if (dense_mask && shape.mask == MaskKind::kDense) shape.mask = MaskKind::kNone;
  if (auto reasons = flash_shape_reasons(shape); !reasons.empty()) return Unsupported(reasons_text(reasons));
  DIFFATTN_RETURN_IF_ERROR(device.enter(problem.q.device.index));
  return device_facts(problem.q.device.index);
}

// Whether the Hopper listed walk cuts its last partial wave along each tail tile's list, as the
// dense walk does along its keys (plan_tail_split, which plans on Skv's key blocks; each piece takes
// its share of the tile's list). The rule, measured on an H100 (docs/backends/flashinfer.md): dense
// masks on the in-order tile, whose tiles fill few waves (FLUX.1's prompt padding as a dense mask:
// 0.415 -> 0.387 ms), and nowhere else: with lists shorter than Skv's blocks the pieces come out
// short (a per-head mask that empties half the blocks 0.496 -> 0.505 ms on the 128-row tile;
// block-sparse lists at density 0.125 1-3 % slower, at density 1 1-3 % faster).
// DIFFATTN_LISTED_TAIL_SPLIT=0 / =1 turns it off or on everywhere (read at every call; A/B runs and
// tests); both give the result up to the order of the pieces' sums.
bool listed_tail_split(bool rule) {
  const char* knob = std::getenv("DIFFATTN_LISTED_TAIL_SPLIT");
  if (knob == nullptr) return rule;
  return std::string(knob) == "1" ? true : std::string(knob) == "0" ? false : rule;
}

// Dense masks' tile (flash_config.h, dense_mask_tile): the rule, or DIFFATTN_DENSE_MASK_TILE=128
// / =192 for the 128 x 128 or hd128's in-order 192 x 128 tile (read at every call; A/B runs and
// tests).
int dense_mask_in_order() {
  const char* knob = std::getenv("DIFFATTN_DENSE_MASK_TILE");
  if (knob == nullptr) return -1;
  return std::string(knob) == "192" ? 1 : std::string(knob) == "128" ? 0 : -1;
}

std::string sm_name(const DeviceFacts& facts) { return "sm_" + std::to_string(facts.cc_major * 10 + facts.cc_minor); }

static_assert(std::equal(kBlockSparseHeadSizes.begin(), kBlockSparseHeadSizes.end(), cuda::kListedHeadDims.begin(),
                         cuda::kListedHeadDims.end()),
              "the Hopper and the mma.sync block-sparse kernels compile the same head sizes");
static_assert(kBlockSparseTile == 128 && kBlockSparseSmallTile == 64 && cuda::kListTiles[0] == kBlockSparseSmallTile &&
                  cuda::kListTiles[1] == kBlockSparseTile,
              "the Hopper and the mma.sync block-sparse kernels take the same lists");

// The block-sparse kernel for `facts`: Hopper's on sm_90, the mma.sync walk where FLASH_ATTN runs
// its Ampere/Ada kernel (or from sm_80 on when that walk is asked for).
Result<FlashKernel> block_sparse_kernel(const DeviceFacts& facts, BlockSparseKernel choice) {
  if (choice == BlockSparseKernel::kAmpere && facts.cc_major >= 8) return FlashKernel::kAmpere;
  const auto kernel = flash_kernel_for_capability(facts.cc_major, facts.cc_minor);
  if (choice == BlockSparseKernel::kForDevice && kernel) return *kernel;
  return Unsupported("block-sparse attention on CUDA has kernels for " + architectures_text() +
                     ", but this device is " + sm_name(facts) + "; run the sparse backend on CPU tensors, or "
                     "choose TORCH_SDPA for dense attention");
}

// What the block-sparse launch needs beyond FLASH_ATTN's own checks: a kernel for the device, a
// compiled head size, lists on one of the kernels' tilings (both square; tile rows over
// self-attention only), and no causal, packed or key-masked problem. Sets *small to the tiling the
// lists use.
Status block_sparse_reasons(const AttentionProblem& pr, int q_tile, int k_tile, bool tile_rows, bool* small) {
  const char* what = "block-sparse attention on CUDA";
  const int d = static_cast<int>(pr.q.size(3));
  if (!is_block_sparse_head_size(d) || pr.v.size(3) != d)
    return Unsupported(std::string(what) + ": head size " + std::to_string(d) + " (values " +
                       std::to_string(pr.v.size(3)) + ") is not compiled; compiled: " + block_sparse_head_sizes_text() +
                       " with equal query and value head sizes");
  if (pr.causal || pr.mask || pr.is_varlen())
    return Unsupported(std::string(what) + " takes no causal, key-masked or packed problem; express such keys in the "
                       "block lists or run on CPU tensors");
  const HopperTile tile = block_sparse_tile(d);
  *small = q_tile == kBlockSparseSmallTile && k_tile == kBlockSparseSmallTile;
  if (!*small && (q_tile != tile.block_m || k_tile != tile.block_n))
    return InvalidInput(std::string(what) + " at head size " + std::to_string(d) + " takes lists of " +
                        std::to_string(tile.block_m) + " x " + std::to_string(tile.block_n) + " or " +
                        std::to_string(kBlockSparseSmallTile) + " x " + std::to_string(kBlockSparseSmallTile) +
                        " (query rows x keys) tiles, got " + std::to_string(q_tile) + " x " + std::to_string(k_tile) +
                        "; build the layout with flash::block_sparse_tile or kBlockSparseSmallTile");
  if (tile_rows && pr.q.size(1) != pr.k.size(1))
    return Unsupported(std::string(what) + " honours tile_rows on self-attention (Sq = Skv) only; run on CPU "
                       "tensors");
  return Status::Ok();
}

// Launches the block-sparse kernel over lists on the device, once the caller has checked them.
Status launch_lists(const AttentionProblem& problem, const DeviceFacts& facts, FlashKernel kernel, bool small,
                    const DeviceBlockSparseLists& lists, void* stream) {
  if (kernel == FlashKernel::kAmpere) {
    DIFFATTN_ASSIGN_OR_RETURN(cuda::SdpaParams params, cuda::make_sdpa_params(problem));
    params.bs_offsets = lists.offsets;
    params.bs_indices = lists.indices;
    params.bs_tile_rows = lists.tile_rows;
    return cuda::launch_sdpa_mma_block_sparse(params, lists.q_tile, stream);
  }
  DIFFATTN_ASSIGN_OR_RETURN(HopperArgs args, hopper_args(problem, facts.sm_count));
  args.tail_split = listed_tail_split(false);
  args.params.bs_offsets = lists.offsets;
  args.params.bs_indices = lists.indices;
  args.params.bs_tile_rows = lists.tile_rows;
  if (const SegmentedLists* seg = lists.segmented) {
    args.params.bs_query_blocks = seg->query_blocks;
    args.params.bs_query_ctas = seg->query_ctas;
    args.params.bs_query_wholes = seg->whole_ctas;
    args.params.bs_block_first = seg->block_first;
    args.params.bs_block_counts = seg->block_counts;
    args.params.bs_blocks = seg->blocks;
  }
  return status_from(launch_flash_hopper_block_sparse(args, small ? SparseTiling::kSmall : SparseTiling::kLarge, stream));
}

}  // namespace

Status check_block_sparse_device(int device, BlockSparseKernel kernel) {
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, device_facts(device));
  return block_sparse_kernel(facts, kernel).status();
}

Status run_block_sparse_cuda(const AttentionProblem& problem, const DeviceBlockSparseLists& lists, void* stream,
                             BlockSparseKernel choice) {
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device));
  DIFFATTN_ASSIGN_OR_RETURN(FlashKernel kernel, block_sparse_kernel(facts, choice));
  bool small = false;
  DIFFATTN_RETURN_IF_ERROR(
      block_sparse_reasons(problem, lists.q_tile, lists.k_tile, lists.tile_rows != nullptr, &small));
  if (lists.offsets == nullptr || lists.indices == nullptr)
    return InvalidInput("block-sparse attention on CUDA: the key lists' offsets and indices must be device pointers");
  if (const SegmentedLists* seg = lists.segmented) {
    if (lists.q_tile != kSegmentTile || lists.k_tile != kSegmentTile || lists.tile_rows == nullptr)
      return InvalidInput("block-sparse attention on CUDA: segmented lists describe 64 x 64 lists with tile rows, got " +
                          std::to_string(lists.q_tile) + " x " + std::to_string(lists.k_tile) +
                          (lists.tile_rows == nullptr ? " without tile rows" : "") + "; pass the lists alone");
    if (seg->query_blocks == nullptr || seg->block_first == nullptr || seg->block_counts == nullptr ||
        seg->blocks == nullptr || seg->query_ctas <= 0 || seg->whole_ctas < 0 || seg->whole_ctas > seg->query_ctas || seg->tiles != tile_count(problem.q.size(1), kSegmentTile) ||
        seg->groups != problem.q.size(0) * problem.q.size(2) || problem.q.size(1) >= kMaxSegmentedRows)
      return InvalidInput("block-sparse attention on CUDA: the segmented lists were not planned for this problem's "
                          "tiles, batch and heads; plan and build them for it (plan_segmented_lists)");
  }
  return launch_lists(problem, facts, kernel, small, lists, stream);
}

Status build_segmented_lists_cuda(const DeviceBlockSparseLists& lists, const SegmentedLists& seg, void* stream) {
  if (lists.q_tile != kSegmentTile || lists.k_tile != kSegmentTile || lists.offsets == nullptr ||
      lists.indices == nullptr || lists.tile_rows == nullptr)
    return InvalidInput("segmented lists are built from 64 x 64 lists with tile rows");
  if (seg.query_blocks == nullptr || seg.block_first == nullptr || seg.block_counts == nullptr ||
      seg.blocks == nullptr || seg.groups < 0 || seg.tiles <= 0)
    return InvalidInput("segmented lists: allocate the sizes plan_segmented_lists gives on the device first");
  if (seg.block_capacity() >= (std::int64_t{1} << 31) || seg.groups * seg.query_ctas >= (std::int64_t{1} << 31))
    return InvalidInput("segmented lists: " + std::to_string(seg.block_capacity()) +
                        " key blocks pass the walk's 32-bit offsets; run fewer sequences or heads per call");
  auto s = static_cast<cudaStream_t>(stream);
  segment_query_kernel<<<1, 32, 0, s>>>(lists.tile_rows, seg.tiles, seg.query_blocks);
  DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("segment_query_kernel"));
  const std::int64_t items = seg.groups * seg.query_ctas;
  if (items == 0) return Status::Ok();
  SegmentListsParams p{lists.offsets, lists.indices, lists.tile_rows, seg.query_blocks, seg.groups, seg.tiles,
                       seg.query_ctas, seg.whole_ctas, seg.whole_capacity, seg.packed_capacity, seg.block_first,
                       seg.block_counts, seg.blocks};
  segment_lists_kernel<<<static_cast<unsigned>((items + kSegmentWarps - 1) / kSegmentWarps), kSegmentWarps * 32, 0,
                         s>>>(p);
  return cuda::check_launch("segment_lists_kernel");
}

Status run_block_sparse_cuda(const AttentionProblem& problem, const BlockSparseLayout& layout, void* stream,
                             BlockSparseKernel choice) {
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device));
  DIFFATTN_ASSIGN_OR_RETURN(FlashKernel kernel, block_sparse_kernel(facts, choice));
  bool small = false;
  DIFFATTN_RETURN_IF_ERROR(
      block_sparse_reasons(problem, layout.q_tile, layout.k_tile, !layout.tile_rows.empty(), &small));
  DIFFATTN_RETURN_IF_ERROR(check_block_sparse_layout(layout, problem.q.size(0), problem.q.size(2), problem.q.size(1),
                                                     problem.k.size(1)));
  // The lists travel on the caller's stream, in one allocation, and are freed behind the kernel.
  const auto s = static_cast<cudaStream_t>(stream);
  const std::vector<std::int32_t>* parts[3] = {&layout.offsets, &layout.indices, &layout.tile_rows};
  std::size_t bytes = 0;
  for (const auto* part : parts) bytes += part->size() * sizeof(std::int32_t);
  void* buffer = nullptr;
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&buffer, bytes + 4, s));
  auto upload_and_launch = [&]() -> Status {
    std::int32_t* at[3] = {};
    std::int32_t* next = static_cast<std::int32_t*>(buffer);
    for (int i = 0; i < 3; ++i) {
      at[i] = next;
      next += parts[i]->size();
      if (!parts[i]->empty() && cudaMemcpyAsync(at[i], parts[i]->data(), parts[i]->size() * sizeof(std::int32_t),
                                                cudaMemcpyHostToDevice, s) != cudaSuccess)
        return CudaError(std::string("block-sparse attention on CUDA: cannot copy the key lists to the device: ") +
                         cudaGetErrorString(cudaGetLastError()));
    }
    const DeviceBlockSparseLists lists{layout.q_tile, layout.k_tile, at[0], at[1],
                                       layout.tile_rows.empty() ? nullptr : at[2]};
    return launch_lists(problem, facts, kernel, small, lists, stream);
  };
  const Status status = upload_and_launch();
  (void)cudaFreeAsync(buffer, s);
  return status;
}

Status run_dense_mask_cuda(const AttentionProblem& problem, void* stream) {
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device, /*dense_mask=*/true));
  const char* what = "dense-mask attention on CUDA";
  if (!problem.mask || problem.mask->ndim != 4)
    return InvalidInput(std::string(what) + " needs a dense keep-mask [B|1, H|1, Sq, Skv]; run key-padding masks "
                        "through run_flash_attn_cuda");
  if (facts.cc_major != 9)
    return Unsupported(std::string(what) + " has a kernel for sm_90 (Hopper) only, but this device is " +
                       sm_name(facts) + "; select TORCH_SDPA, whose CUDA kernel reads the mask itself");
  const int d = static_cast<int>(problem.q.size(3));
  if (!is_block_sparse_head_size(d) || problem.v.size(3) != d)
    return Unsupported(std::string(what) + ": head size " + std::to_string(d) + " (values " +
                       std::to_string(problem.v.size(3)) + ") is not compiled; compiled: " +
                       block_sparse_head_sizes_text() + " with equal query and value head sizes; select TORCH_SDPA");
  if (problem.causal || problem.is_varlen())
    return Unsupported(std::string(what) + " takes no causal or packed problem; fold the causal cut into the mask");
  if (problem.mask->device.kind != DeviceKind::kCuda)
    return InvalidInput(std::string(what) + " reads the mask on the GPU, but it lives on the CPU; copy the mask to "
                        "the device of q");
  if (problem.q.size(1) == 0 || problem.q.size(0) == 0) return Status::Ok();
  AttentionProblem unmasked = problem;
  unmasked.mask.reset();
  DIFFATTN_ASSIGN_OR_RETURN(HopperArgs args, hopper_args(unmasked, facts.sm_count));
  const TensorView& m = *problem.mask;
  DenseMaskView view;
  view.data = static_cast<const std::uint8_t*>(m.data);
  view.batch = m.size(0);
  view.heads = m.size(1);
  view.stride_b = m.size(0) == 1 ? 0 : m.stride(0);
  view.stride_h = m.size(1) == 1 ? 0 : m.stride(1);
  view.stride_i = m.stride(2);
  view.stride_j = m.stride(3);
  view.seqlen_q = static_cast<int>(problem.q.size(1));
  view.seqlen_k = static_cast<int>(problem.k.size(1));
  const HopperTile tile = dense_mask_tile(d, view.seqlen_q, view.seqlen_k, problem.q.size(0) * problem.q.size(2),
                                          facts.sm_count, view.heads > 1, dense_mask_in_order());
  const bool three_groups = tile.block_m != block_sparse_tile(d).block_m;
  DenseMaskLists lists;
  const DenseMaskStatus built = build_dense_mask_lists(view, tile.block_m, tile.block_n, stream, &lists);
  if (!built.ok) return CudaError(std::string(what) + ": " + built.message);
  FlashParams& p = args.params;
  args.tail_split = listed_tail_split(three_groups);
  p.bs_offsets = lists.offsets;
  p.bs_indices = lists.indices;
  p.bs_partial = lists.partial;
  p.bs_stride_b = lists.list_stride_b;
  p.bs_stride_h = lists.list_stride_h;
  p.row_bits = lists.row_bits;
  p.row_bits_words = lists.words;
  p.row_bits_stride_b = lists.row_bits_stride_b;
  p.row_bits_stride_h = lists.row_bits_stride_h;
  const Status status = status_from(launch_flash_hopper_block_sparse(
      args, three_groups ? SparseTiling::kDenseMaskInOrder : SparseTiling::kLarge, stream));
  (void)cudaFreeAsync(lists.workspace, static_cast<cudaStream_t>(stream));
  return status;
}

Status run_masked_cuda(const AttentionProblem& problem, void* stream, bool ampere_kernel) {
  if (problem.mask_kind() != MaskKind::kDense && !ampere_kernel) return run_flash_attn_cuda(problem, stream);
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device, /*dense_mask=*/true));
  const int d = static_cast<int>(problem.q.size(3));
  const bool listed_walk = facts.cc_major == 9 && facts.cc_minor == 0 && is_block_sparse_head_size(d) &&
                           problem.v.size(3) == d && !problem.causal;
  if (!ampere_kernel && listed_walk) return run_dense_mask_cuda(problem, stream);
  if (facts.cc_major < 8)
    return Unsupported("masked attention on CUDA needs sm_80 or newer, but this device is " + sm_name(facts) +
                       "; select TORCH_SDPA");
  return run_ampere(problem, stream);
}

Status run_flash_attn_cuda(const AttentionProblem& problem, void* stream) {
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device));
  const auto kernel = flash_kernel_for_capability(facts.cc_major, facts.cc_minor);
  if (!kernel)
    return Unsupported("FLASH_ATTN has kernels for " + architectures_text() + ", but this device is " + sm_name(facts) +
                       "; select CUDNN_ATTN or TORCH_SDPA");
  if (*kernel == FlashKernel::kAmpere) return run_ampere(problem, stream);
  DIFFATTN_ASSIGN_OR_RETURN(HopperArgs args, hopper_args(problem, facts.sm_count));
  return status_from(launch_flash_hopper(args, stream));
}

Status run_flash_attn_ampere_cuda(const AttentionProblem& problem, void* stream) {
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device));
  if (facts.cc_major < 8)
    return Unsupported("FLASH_ATTN's Ampere/Ada kernel needs sm_80 or newer, but this device is " + sm_name(facts) +
                       "; select TORCH_SDPA");
  return run_ampere(problem, stream);
}

}  // namespace diffattn::flash
