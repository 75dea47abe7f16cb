#include "kernels/cpu/sdpa_cpu.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "common/name_hints.h"
#include "diffattn/log.h"
#include "kernels/cpu/dense_tile_params.h"
#include "kernels/cpu/score_range.h"
#include "kernels/cpu/tiles.h"

namespace diffattn {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// CPUID leaf 1, ECX bit 29; not every compiler's __builtin_cpu_supports knows "f16c".
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

bool cpu_has(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case CpuIsa::kPortable: return true;
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") && has_f16c();
  }
  return false;
#else
  return isa == CpuIsa::kPortable;
#endif
}

cpu::TileKernel tile_kernel(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == CpuIsa::kAvx512) return cpu::avx512_tile_kernel();
  if (isa == CpuIsa::kAvx2) return cpu::avx2_tile_kernel();
#endif
  return cpu::portable_tile_kernel();
}

int thread_count() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

cpu::ElemType elem_type(DType dtype) {
  if (dtype == DType::kFloat16) return cpu::ElemType::kF16;
  if (dtype == DType::kBFloat16) return cpu::ElemType::kBF16;
  return cpu::ElemType::kF32;
}

void copy_strides(const TensorView& t, std::int64_t* dst) {
  for (int i = 0; i < t.ndim; ++i) dst[i] = t.strides[i];
}

// Mask strides in [batch, head, query, key] order with broadcast dimensions at stride 0.
void mask_strides(const TensorView& mask, std::int64_t* dst) {
  if (mask.ndim == 2) {
    dst[0] = mask.size(0) == 1 ? 0 : mask.stride(0);
    dst[1] = 0;
    dst[2] = 0;
    dst[3] = mask.stride(1);
    return;
  }
  for (int i = 0; i < 4; ++i) dst[i] = mask.size(i) == 1 ? 0 : mask.stride(i);
}

cpu::DenseTileParams make_params(const AttentionProblem& p, const cpu::CpuTiles& tiles) {
  cpu::DenseTileParams f;
  f.q = p.q.data;
  f.k = p.k.data;
  f.v = p.v.data;
  f.out = p.out.data;
  f.elem = elem_type(p.q.dtype);
  copy_strides(p.q, f.q_stride);
  copy_strides(p.k, f.k_stride);
  copy_strides(p.v, f.v_stride);
  copy_strides(p.out, f.out_stride);
  if (p.lse) {
    f.lse = static_cast<float*>(p.lse->data);
    copy_strides(*p.lse, f.lse_stride);
  }
  if (p.mask) {
    f.mask = static_cast<const std::uint8_t*>(p.mask->data);
    mask_strides(*p.mask, f.mask_stride);
  }
  f.heads_q = p.q.size(2);
  f.heads_kv = p.k.size(2);
  f.head_size = p.q.size(3);
  f.head_size_v = p.v.size(3);
  f.scale_log2 = p.softmax_scale() * 1.4426950408889634f;
  f.causal = p.causal;
  f.block_q = tiles.block_q;
  f.block_k = tiles.block_k;
  return f;
}

struct Sequence {
  std::int64_t batch, q_begin, q_len, kv_begin, kv_len;
};

std::vector<Sequence> sequences(const AttentionProblem& p) {
  std::vector<Sequence> seqs;
  if (!p.is_varlen()) {
    for (std::int64_t b = 0; b < p.q.size(0); ++b) seqs.push_back({b, 0, p.q.size(1), 0, p.k.size(1)});
    return seqs;
  }
  const auto* cq = static_cast<const std::int32_t*>(p.cu_seqlens_q->data);
  const auto* ck = static_cast<const std::int32_t*>(p.cu_seqlens_k->data);
  const std::int64_t sq = p.cu_seqlens_q->stride(0), sk = p.cu_seqlens_k->stride(0);
  for (std::int64_t b = 0; b + 1 < p.cu_seqlens_q->size(0); ++b)
    seqs.push_back({0, cq[b * sq], cq[(b + 1) * sq] - cq[b * sq], ck[b * sk], ck[(b + 1) * sk] - ck[b * sk]});
  return seqs;
}

std::vector<cpu::WorkItem> work_items(const std::vector<Sequence>& seqs, std::int64_t heads, int block_q) {
  std::vector<cpu::WorkItem> items;
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    const Sequence& seq = seqs[s];
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t q0 = 0; q0 < seq.q_len; q0 += block_q) {
        cpu::WorkItem w;
        w.batch = seq.batch;
        w.mask_batch = static_cast<std::int64_t>(s);
        w.head = h;
        w.q_begin = seq.q_begin + q0;
        w.q_rows = seq.q_len - q0 < block_q ? seq.q_len - q0 : block_q;
        w.q_local = q0;
        w.kv_begin = seq.kv_begin;
        w.kv_len = seq.kv_len;
        items.push_back(w);
      }
  }
  return items;
}

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};

Status run_items(const cpu::TileKernel& kernel, const cpu::DenseTileParams& params,
                 const std::vector<cpu::WorkItem>& items) {
  const std::size_t bytes = (kernel.workspace_floats(params) * sizeof(float) + 63) / 64 * 64;
  const auto count = static_cast<std::int64_t>(items.size());
  std::atomic<bool> out_of_memory{false};
#pragma omp parallel
  {
    std::unique_ptr<float, AlignedFree> workspace(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!workspace) out_of_memory = true;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < count; ++i)
      if (workspace) kernel.run(params, items[static_cast<std::size_t>(i)], workspace.get());
  }
  if (out_of_memory)
    return Internal("the CPU attention kernel could not allocate its " + std::to_string(bytes) +
                    "-byte per-thread workspace; free memory or lower OMP_NUM_THREADS");
  return Status::Ok();
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable: return "portable";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (cpu_isa_name(isa) == name) return isa;
  return std::nullopt;
}

bool cpu_isa_available(CpuIsa isa) { return cpu_has(isa); }

namespace {

CpuIsa fastest_cpu_isa() {
  if (cpu_has(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (cpu_has(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kPortable;
}

std::string available_isa_names() {
  std::string names;
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (cpu_has(isa)) names += (names.empty() ? "" : ", ") + std::string(cpu_isa_name(isa));
  return names;
}

// DIFFATTN_CPU_ISA is a tuning knob: a value that cannot be honoured warns once and the run-time
// choice stays, rather than failing every call.
CpuIsa cpu_isa_from_env() {
  const char* env = std::getenv("DIFFATTN_CPU_ISA");
  const CpuIsa fastest = fastest_cpu_isa();
  if (env == nullptr) return fastest;
  const std::optional<CpuIsa> isa = parse_cpu_isa(env);
  if (isa && cpu_has(*isa)) return *isa;
  const std::string why = isa ? "this CPU or build cannot run the " + std::string(env) + " kernel"
                              : "'" + bounded_echo(env) + "' is not a CPU kernel; valid values are portable, avx2 and avx512";
  log_warning("DIFFATTN_CPU_ISA: " + why + ". Using " + std::string(cpu_isa_name(fastest)) + " (available here: " +
              available_isa_names() + ").");
  return fastest;
}

}  // namespace

CpuIsa default_cpu_isa() {
  static const CpuIsa isa = cpu_isa_from_env();
  return isa;
}

namespace {

// Every entry point: every key tile when `layout` is null, else the layout's lists; V from
// problem.v, or as FP8 E4M3 codes with their scales when `fp8_v` is given.
Status run_tiled(const AttentionProblem& problem, CpuIsa isa, const BlockSparseLayout* layout,
                 const Fp8ValuesView* fp8_v) {
  if (!cpu_has(isa))
    return Unsupported("the " + std::string(cpu_isa_name(isa)) +
                       " CPU attention kernel cannot run on this CPU or build; use " +
                       std::string(cpu_isa_name(default_cpu_isa())));
  if (problem.q.device.kind != DeviceKind::kCpu)
    return Internal("run_sdpa_cpu was given tensors on a CUDA device; route them to run_sdpa_cuda");
  if (layout != nullptr) {
    if (problem.is_varlen())
      return Unsupported("block-sparse CPU attention does not take packed batches (cu_seqlens); pass [B, S, H, D] "
                         "batches");
    DIFFATTN_RETURN_IF_ERROR(check_block_sparse_layout(*layout, problem.q.size(0), problem.q.size(2),
                                                       problem.q.size(1), problem.k.size(1)));
  }
  DIFFATTN_RETURN_IF_ERROR(check_scores_fit_float32(problem));
  const std::vector<Sequence> seqs = sequences(problem);
  const std::int64_t heads = problem.q.size(2);
  std::int64_t longest_q = 0;
  for (const Sequence& s : seqs) longest_q = s.q_len > longest_q ? s.q_len : longest_q;
  const int threads = thread_count();
  cpu::CpuTiles tiles =
      cpu::choose_cpu_tiles(static_cast<std::int64_t>(seqs.size()) * heads, longest_q, threads, problem.q.size(3),
                            problem.v.size(3));
  if (layout != nullptr) tiles = {layout->q_tile, layout->k_tile};  // one work item per query tile
  cpu::DenseTileParams params = make_params(problem, tiles);
  if (layout != nullptr) {
    params.sparse_offsets = layout->offsets.data();
    params.sparse_indices = layout->indices.data();
    params.sparse_q_tiles = layout->q_tiles;
    if (!layout->tile_rows.empty()) params.sparse_tile_rows = layout->tile_rows.data();
  }
  if (fp8_v != nullptr) {
    params.v = fp8_v->codes;
    for (int i = 0; i < 4; ++i) params.v_stride[i] = fp8_v->strides[i];
    params.v_scale = fp8_v->scales;
  }
  std::vector<cpu::WorkItem> items = work_items(seqs, heads, tiles.block_q);
  if (layout != nullptr && !layout->tile_rows.empty())  // padding query rows are not computed
    for (cpu::WorkItem& w : items) w.q_rows = layout->tile_rows[static_cast<std::size_t>(w.q_local / tiles.block_q)];
  if (items.empty()) return Status::Ok();
  return run_items(tile_kernel(isa), params, items);
}

}  // namespace

Status run_sdpa_cpu(const AttentionProblem& problem) { return run_sdpa_cpu(problem, default_cpu_isa()); }

Status run_sdpa_cpu(const AttentionProblem& problem, CpuIsa isa) { return run_tiled(problem, isa, nullptr, nullptr); }

Status run_sdpa_cpu(const AttentionProblem& problem, const Fp8ValuesView& v, CpuIsa isa) {
  return run_tiled(problem, isa, nullptr, &v);
}

Status run_block_sparse_cpu(const AttentionProblem& problem, const BlockSparseLayout& layout) {
  return run_block_sparse_cpu(problem, layout, default_cpu_isa());
}

Status run_block_sparse_cpu(const AttentionProblem& problem, const BlockSparseLayout& layout, CpuIsa isa) {
  return run_tiled(problem, isa, &layout, nullptr);
}

}  // namespace diffattn
