#include "backends/cudnn_attn/cudnn_sdpa_runner.h"

#if DIFFATTN_HAVE_CUDA

// diffattn's own nlohmann_json serves the rest of the library; the frontend's copy is not needed.
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include <cuda_runtime.h>
#include <cudnn.h>

// The frontend's headers define helpers this file does not use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <cudnn_frontend.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "backends/cudnn_attn/cudnn_attn_checks.h"
#include "backends/cudnn_attn/key_compaction.h"
#include "backends/cudnn_attn/key_padding_lengths.h"
#include "backends/cudnn_attn/mask_bias.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/scoped_device.h"

namespace diffattn::cudnn_attn {
namespace {

namespace fe = cudnn_frontend;

enum Uid : std::int64_t {
  kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv, kBias,
  kOffsetQ, kOffsetK, kOffsetV, kOffsetO, kOffsetStats
};

// How a call's mask or packing reaches cuDNN.
enum class MaskMode : std::uint8_t {
  kNone,
  kBias,     // a dense mask: an additive bias [mb, mh, Sq, Skv]
  kCompact,  // a key-padding mask: the kept keys gathered to the front of K and V copies, and their counts
  kKeySpan,  // a key-padding mask that cannot be gathered: key lengths to the last kept key, the bias before it
  kRagged,   // packed batches: ragged offsets and per-sequence lengths
};

// Everything that shapes a built graph.
struct GraphKey {
  int device = 0;
  DType dtype = DType::kBFloat16;
  std::array<std::int64_t, 7> sizes{};  // B, Hq, Hkv, Sq, Skv, D, Dv (packed: Sq, Skv are the bucketed maxima)
  std::array<std::int64_t, 16> strides{};  // q, k, v, out (4 each); packed: batch strides unused
  std::array<std::int64_t, 3> lse_strides{};
  std::array<std::int64_t, 3> bias_dims{};  // mb, mh, mq
  MaskMode mode = MaskMode::kNone;
  bool causal = false;
  bool lse = false;
  float scale = 0.f;
  auto tie() const { return std::tie(device, dtype, sizes, strides, lse_strides, bias_dims, mode, causal, lse, scale); }
  bool operator<(const GraphKey& other) const { return tie() < other.tie(); }
};

struct BuiltGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace_bytes = 0;
};

struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
};

struct Workspace {
  Buffer cudnn;    // cuDNN's own workspace
  Buffer scratch;  // lengths, bias, offsets and the packed LSE, written before the graph runs
};

std::string cudnn_error(const std::string& step, fe::error_t err) {
  return "cuDNN " + step + " failed: " + err.get_message();
}

std::string handle_error(const std::string& call, cudnnStatus_t status) {
  return call + " failed: " + cudnnGetErrorString(status);
}

fe::DataType_t cudnn_dtype(DType dtype) {
  return dtype == DType::kFloat16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
}

// Packed batches build one graph per bucket of maximum lengths, not per maximum.
constexpr std::int64_t kLengthBucket = 128;
std::int64_t bucket(std::int64_t n) { return std::max<std::int64_t>(1, (n + kLengthBucket - 1) / kLengthBucket) * kLengthBucket; }

GraphKey make_key(const AttentionProblem& p, int device, MaskMode mode) {
  GraphKey key;
  key.device = device;
  key.dtype = p.q.dtype;
  key.mode = mode;
  key.sizes = {p.q.size(0), p.q.size(2), p.k.size(2), p.q.size(1), p.k.size(1), p.q.size(3), p.v.size(3)};
  if (mode == MaskMode::kRagged) {
    key.sizes[0] = p.num_batches();
    key.sizes[3] = bucket(p.max_seqlen_q > 0 ? p.max_seqlen_q : p.q.size(1));
    key.sizes[4] = bucket(p.max_seqlen_k > 0 ? p.max_seqlen_k : p.k.size(1));
  }
  const TensorView* views[] = {&p.q, &p.k, &p.v, &p.out};
  for (int t = 0; t < 4; ++t) {
    for (int d = 0; d < 4; ++d) key.strides[t * 4 + d] = views[t]->stride(d);
    if (mode == MaskMode::kRagged) key.strides[t * 4] = 0;
    if (mode == MaskMode::kCompact && (t == 1 || t == 2)) {  // the contiguous copies
      const TensorView& v = *views[t];
      key.strides[t * 4 + 3] = 1;
      key.strides[t * 4 + 2] = v.size(3);
      key.strides[t * 4 + 1] = v.size(2) * v.size(3);
      key.strides[t * 4 + 0] = v.size(1) * v.size(2) * v.size(3);
    }
  }
  if (p.lse && mode != MaskMode::kRagged) key.lse_strides = {p.lse->stride(0), p.lse->stride(1), p.lse->stride(2)};
  if (mode == MaskMode::kBias || mode == MaskMode::kKeySpan) {
    const MaskBias dims = mask_bias_dims(p);
    key.bias_dims = {dims.mb, dims.mh, dims.mq};
  }
  key.causal = p.causal;
  key.lse = p.lse.has_value();
  key.scale = p.softmax_scale();
  return key;
}

// DiT views are [B, S, H, D]; cuDNN names dimensions [B, H, S, D], so the strides are permuted.
// Packed views give their batch stride as a whole padded sequence; the ragged offsets place them.
std::vector<std::int64_t> bhsd_strides(const GraphKey& key, int tensor) {
  const std::int64_t* s = &key.strides[tensor * 4];
  const std::int64_t seq = tensor == 0 || tensor == 3 ? key.sizes[3] : key.sizes[4];
  const std::int64_t batch = key.mode == MaskMode::kRagged ? seq * s[1] : s[0];
  return {batch, s[2], s[1], s[3]};
}

Result<BuiltGraph> build_graph(const GraphKey& key, cudnnHandle_t handle) {
  const auto [b, hq, hkv, sq, skv, d, dv] = key.sizes;
  const bool ragged = key.mode == MaskMode::kRagged;
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(cudnn_dtype(key.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto index = [&](const char* name, Uid uid, std::int64_t n) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({n, 1, 1, 1})
                             .set_stride({1, 1, 1, 1})
                             .set_data_type(fe::DataType_t::INT32));
  };
  auto tensor = [&](const char* name, Uid uid, std::vector<std::int64_t> dims, std::vector<std::int64_t> strides,
                    Uid offset_uid, const char* offset_name) {
    auto attributes =
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(std::move(dims)).set_stride(std::move(strides));
    if (ragged) attributes.set_ragged_offset(index(offset_name, offset_uid, b + 1));
    return graph->tensor(attributes);
  };
  auto q = tensor("Q", kQ, {b, hq, sq, d}, bhsd_strides(key, 0), kOffsetQ, "offset_q");
  auto k = tensor("K", kK, {b, hkv, skv, d}, bhsd_strides(key, 1), kOffsetK, "offset_k");
  auto v = tensor("V", kV, {b, hkv, skv, dv}, bhsd_strides(key, 2), kOffsetV, "offset_v");

  auto options = fe::graph::SDPA_attributes().set_name("diffattn_sdpa").set_generate_stats(key.lse).set_attn_scale(key.scale);
  if (key.causal) {
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  }
  if (key.mode == MaskMode::kKeySpan || key.mode == MaskMode::kCompact || ragged) {
    options.set_padding_mask(true).set_seq_len_q(index("seq_len_q", kSeqQ, b)).set_seq_len_kv(index("seq_len_kv", kSeqKv, b));
  }
  if (key.mode == MaskMode::kBias || key.mode == MaskMode::kKeySpan) {
    // [mb, mh, Sq, Skv] with rows of a multiple of 8 elements; a key-padding bias (mq == 1) is read
    // again for every query through a zero query stride.
    const auto [mb, mh, mq] = key.bias_dims;
    const std::int64_t row = (skv + 7) / 8 * 8;
    auto bias = graph->tensor(fe::graph::Tensor_attributes()
                                  .set_name("bias")
                                  .set_uid(kBias)
                                  .set_dim({mb, mh, sq, skv})
                                  .set_stride({mh * mq * row, mq * row, mq > 1 ? row : 0, 1}));
    options.set_bias(bias);
  }
  auto [o, stats] = graph->sdpa(q, k, v, options);
  o->set_output(true).set_uid(kO).set_dim({b, hq, sq, dv}).set_stride(bhsd_strides(key, 3));
  if (ragged) o->set_ragged_offset(index("offset_o", kOffsetO, b + 1));
  if (key.lse) {
    stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({b, hq, sq, 1});
    if (ragged) {  // token-major scratch [total_q, Hq]; moved to [1, Hq, total_q] afterwards
      stats->set_stride({sq * hq, 1, hq, 1}).set_ragged_offset(index("offset_stats", kOffsetStats, b + 1));
    } else {
      stats->set_stride({key.lse_strides[0], key.lse_strides[1], key.lse_strides[2], 1});
    }
  }

  const auto step = [](const char* name, fe::error_t err) -> Status {
    if (err.is_good()) return Status::Ok();
    return Unsupported(cudnn_error(name, err) + "; select TORCH_SDPA for this problem");
  };
  DIFFATTN_RETURN_IF_ERROR(step("graph validation", graph->validate()));
  DIFFATTN_RETURN_IF_ERROR(step("operation graph", graph->build_operation_graph(handle)));
  DIFFATTN_RETURN_IF_ERROR(step("execution plans", graph->create_execution_plans({fe::HeurMode_t::A})));
  DIFFATTN_RETURN_IF_ERROR(step("support check", graph->check_support(handle)));
  DIFFATTN_RETURN_IF_ERROR(step("plan build", graph->build_plans(handle)));
  BuiltGraph built;
  built.graph = std::move(graph);
  DIFFATTN_RETURN_IF_ERROR(step("workspace query", built.graph->get_workspace_size(built.workspace_bytes)));
  return built;
}

constexpr std::size_t align_up(std::size_t n) { return (n + 255) / 256 * 256; }

class Runner {
 public:
  static Runner& instance() {
    static Runner* runner = new Runner();  // never destroyed: handles outlive static teardown order
    return *runner;
  }

  Status run(const AttentionProblem& p, cudaStream_t stream) {
    const int device = p.q.device.index;
    cuda::ScopedDevice scoped;
    DIFFATTN_RETURN_IF_ERROR(scoped.enter(device));
    std::lock_guard<std::mutex> lock(mu_);
    DIFFATTN_ASSIGN_OR_RETURN(cudnnHandle_t handle, handle_for(device));
    DIFFATTN_ASSIGN_OR_RETURN(Workspace * ws, workspace_for(device, stream));
    // While the stream is captured into a CUDA graph no buffer may grow.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing"));
    const bool capturing = capture != cudaStreamCaptureStatusNone;
    // A key-padding graph cuDNN cannot build is remembered, and the call retried on the next way.
    for (;;) {
      bool retry = false;
      Status s = run_locked(p, stream, device, handle, ws, capturing, &retry);
      if (!retry) return s;
    }
  }

 private:
  // How a mask reaches cuDNN: key padding is gathered where it can be (and the copies stay below
  // kMaxCompactBytes), else spanned; dense masks are a bias. Ways whose graph failed are skipped.
  static constexpr std::int64_t kMaxCompactBytes = std::int64_t{1} << 30;

  MaskMode mask_mode(const AttentionProblem& p, int device) const {
    if (!mask_is_key_padding(p)) return MaskMode::kBias;
    if (can_compact_keys(p) && compacted_k_bytes(p) + compacted_v_bytes(p) <= kMaxCompactBytes &&
        !unsupported_.contains(make_key(p, device, MaskMode::kCompact)))
      return MaskMode::kCompact;
    if (!unsupported_.contains(make_key(p, device, MaskMode::kKeySpan))) return MaskMode::kKeySpan;
    return MaskMode::kBias;
  }

  Status run_locked(const AttentionProblem& p, cudaStream_t stream, int device, cudnnHandle_t handle, Workspace* ws,
                    bool capturing, bool* retry) {
    // The scratch holds everything written before the graph runs; its layout follows the call.
    const bool ragged = p.is_varlen();
    const std::size_t batch = static_cast<std::size_t>(p.num_batches());
    std::size_t used = 0;
    const auto take = [&used](std::size_t bytes) {
      const std::size_t at = used;
      used += align_up(bytes);
      return at;
    };
    MaskBias bias;
    MaskMode mode = ragged ? MaskMode::kRagged : MaskMode::kNone;
    std::size_t lengths_at = 0, bias_at = 0, first_at = 0, offsets_at = 0, stats_at = 0, slot_at = 0, kc_at = 0,
                vc_at = 0;
    if (p.mask) {
      mode = mask_mode(p, device);
      bias = mask_bias_dims(p);
      if (mode == MaskMode::kCompact) {
        // The gathered copies' first kept keys are per batch of the problem.
        bias.mb = static_cast<std::int64_t>(batch), bias.mh = 1, bias.mq = 1;
        lengths_at = take(2 * batch * sizeof(std::int32_t));
        first_at = take(batch * sizeof(std::int32_t));
        slot_at = take(static_cast<std::size_t>(batch * p.k.size(1)) * sizeof(std::int32_t));
        kc_at = take(static_cast<std::size_t>(compacted_k_bytes(p)));
        vc_at = take(static_cast<std::size_t>(compacted_v_bytes(p)));
      } else {
        if (mode == MaskMode::kKeySpan) lengths_at = take(2 * batch * sizeof(std::int32_t));
        bias_at = take(static_cast<std::size_t>(bias.rows() * bias.skv_pad) * sizeof(std::uint16_t));
        first_at = take(static_cast<std::size_t>(bias.rows()) * sizeof(std::int32_t));
      }
    }
    if (ragged) {
      offsets_at = take((7 * batch + 5) * sizeof(std::int32_t));
      if (p.lse) stats_at = take(static_cast<std::size_t>(p.q.size(1) * p.q.size(2)) * sizeof(float));
    }
    DIFFATTN_RETURN_IF_ERROR(grow(ws->scratch, used, stream, capturing, "CUDNN_ATTN scratch"));
    char* scratch = static_cast<char*>(ws->scratch.data);

    std::unordered_map<std::int64_t, void*> pack = {{kQ, p.q.data}, {kK, p.k.data}, {kV, p.v.data}, {kO, p.out.data}};
    // Nothing here waits for the stream: whatever the mask keeps, its lengths, copies or bias are
    // written on the device.
    if (mode == MaskMode::kCompact) {
      auto* lengths = reinterpret_cast<std::int32_t*>(scratch + lengths_at);
      bias.first_kept = reinterpret_cast<std::int32_t*>(scratch + first_at);
      const KeyCompaction out{scratch + kc_at, scratch + vc_at, lengths, lengths + batch, bias.first_kept,
                              reinterpret_cast<std::int32_t*>(scratch + slot_at)};
      DIFFATTN_RETURN_IF_ERROR(launch_key_compaction(p, out, stream));
      pack[kK] = out.k;
      pack[kV] = out.v;
      pack[kSeqQ] = out.seq_len_q;
      pack[kSeqKv] = out.seq_len_kv;
    } else if (p.mask) {
      bias.bias = scratch + bias_at;
      bias.first_kept = reinterpret_cast<std::int32_t*>(scratch + first_at);
      DIFFATTN_RETURN_IF_ERROR(launch_mask_bias(p, bias, stream));
      pack[kBias] = bias.bias;
      if (mode == MaskMode::kKeySpan) {
        auto* lengths = reinterpret_cast<std::int32_t*>(scratch + lengths_at);
        const KeyPaddingLengths out{lengths, lengths + batch};
        DIFFATTN_RETURN_IF_ERROR(launch_key_spans(p, out, stream));
        pack[kSeqQ] = out.seq_len_q;
        pack[kSeqKv] = out.seq_len_kv;
      }
    }
    float* stats = nullptr;
    if (ragged) {
      auto* ints = reinterpret_cast<std::int32_t*>(scratch + offsets_at);
      const RaggedOffsets offsets{ints,
                                  ints + batch,
                                  ints + 2 * batch,
                                  ints + 3 * batch + 1,
                                  ints + 4 * batch + 2,
                                  ints + 5 * batch + 3,
                                  ints + 6 * batch + 4};
      DIFFATTN_RETURN_IF_ERROR(launch_ragged_offsets(p, offsets, stream));
      pack[kSeqQ] = offsets.seq_len_q;
      pack[kSeqKv] = offsets.seq_len_kv;
      pack[kOffsetQ] = offsets.q;
      pack[kOffsetK] = offsets.k;
      pack[kOffsetV] = offsets.v;
      pack[kOffsetO] = offsets.o;
      if (p.lse) {
        stats = reinterpret_cast<float*>(scratch + stats_at);
        pack[kOffsetStats] = offsets.stats;
      }
    }
    if (p.lse) pack[kStats] = ragged ? static_cast<void*>(stats) : p.lse->data;

    const GraphKey key = make_key(p, device, mode);
    Result<const BuiltGraph*> found = graph_for(key, handle);
    if (!found.ok() && (mode == MaskMode::kCompact || mode == MaskMode::kKeySpan)) {
      // A cuDNN that cannot build this way for this shape: the next way (mask_mode).
      unsupported_.insert(key);
      *retry = true;
      return found.status();
    }
    DIFFATTN_ASSIGN_OR_RETURN(const BuiltGraph* built, std::move(found));
    DIFFATTN_RETURN_IF_ERROR(grow(ws->cudnn, align_up(static_cast<std::size_t>(built->workspace_bytes)), stream, capturing,
                                  "CUDNN_ATTN workspace"));
    if (cudnnStatus_t s = cudnnSetStream(handle, stream); s != CUDNN_STATUS_SUCCESS) {
      return CudaError(handle_error("cudnnSetStream", s));
    }
    if (auto err = built->graph->execute(handle, pack, ws->cudnn.data); err.is_bad()) {
      return CudaError(cudnn_error("graph execution", err));
    }
    DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("cuDNN SDPA graph"));
    // cuDNN leaves rows without keys undefined; diffattn's contract gives them zeros and LSE -inf.
    if (p.mask) return launch_clear_empty_rows(p, bias, stream);
    if (ragged) return launch_finish_ragged(p, stats, stream);
    return Status::Ok();
  }

  Result<cudnnHandle_t> handle_for(int device) {
    if (auto it = handles_.find(device); it != handles_.end()) return it->second;
    cudnnHandle_t handle = nullptr;
    if (cudnnStatus_t s = cudnnCreate(&handle); s != CUDNN_STATUS_SUCCESS) {
      return Unavailable(handle_error("cudnnCreate on device " + std::to_string(device), s) +
                         "; check that libcudnn 9 is on the library path, or select TORCH_SDPA");
    }
    handles_[device] = handle;
    return handle;
  }

  Result<const BuiltGraph*> graph_for(const GraphKey& key, cudnnHandle_t handle) {
    if (auto it = graphs_.find(key); it != graphs_.end()) return &it->second;
    DIFFATTN_ASSIGN_OR_RETURN(BuiltGraph built, build_graph(key, handle));
    return &graphs_.emplace(key, std::move(built)).first->second;
  }

  Result<Workspace*> workspace_for(int device, cudaStream_t stream) {
    return &workspaces_[{device, stream}];
  }

  // Buffers are kept per (device, stream) and only grow; the stream may still use the old one.
  static Status grow(Buffer& buffer, std::size_t bytes, cudaStream_t stream, bool capturing, const char* what) {
    if (buffer.bytes >= bytes) return Status::Ok();
    if (capturing)
      return InvalidInput(std::string(what) + " must grow to " + std::to_string(bytes) +
                          " bytes, which cannot happen while the stream is captured into a CUDA graph; make the "
                          "same call once on this stream before capturing it");
    if (buffer.data != nullptr) {
      DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
      DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaFree(buffer.data), std::string("cudaFree(") + what + ")"));
      buffer = Buffer{};
    }
    DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(
        cudaMalloc(&buffer.data, bytes), std::string("cudaMalloc(") + what + ", " + std::to_string(bytes) + " bytes)"));
    buffer.bytes = bytes;
    return Status::Ok();
  }

  // Each batch's query length and its keys up to the last kept one (kernel of key_padding_lengths.cu).
  static Status launch_key_spans(const AttentionProblem& p, const KeyPaddingLengths& out, cudaStream_t stream) {
    const TensorView& mask = *p.mask;
    const int last = mask.ndim - 1;
    const std::int64_t batch_stride = mask.size(0) == 1 ? 0 : mask.stride(0);
    return launch_key_padding_lengths(static_cast<const std::uint8_t*>(mask.data), batch_stride, mask.stride(last),
                                      static_cast<int>(p.q.size(0)), static_cast<int>(p.q.size(1)),
                                      static_cast<int>(p.k.size(1)), out, stream);
  }

  std::mutex mu_;
  std::map<int, cudnnHandle_t> handles_;
  std::map<GraphKey, BuiltGraph> graphs_;
  std::set<GraphKey> unsupported_;  // key-padding graphs (gathered, spanned) this cuDNN could not build
  std::map<std::pair<int, cudaStream_t>, Workspace> workspaces_;
};

}  // namespace

Status run_cudnn_sdpa(const AttentionProblem& problem, void* stream) {
  return Runner::instance().run(problem, static_cast<cudaStream_t>(stream));
}

int cudnn_runtime_version() { return static_cast<int>(cudnnGetVersion()); }

}  // namespace diffattn::cudnn_attn

#else  // !DIFFATTN_HAVE_CUDA

namespace diffattn::cudnn_attn {

Status run_cudnn_sdpa(const AttentionProblem&, void*) {
  return Unavailable("this diffattn build has no CUDA (nvcc was not found when it was built), so CUDNN_ATTN "
                     "cannot run; select TORCH_SDPA or rebuild with the CUDA toolkit and cuDNN 9");
}

int cudnn_runtime_version() { return 0; }

}  // namespace diffattn::cudnn_attn

#endif
