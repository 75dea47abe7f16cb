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

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "backends/cudnn_attn/cudnn_attn_checks.h"
#include "backends/cudnn_attn/key_padding_lengths.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/scoped_device.h"

namespace diffattn::cudnn_attn {
namespace {

namespace fe = cudnn_frontend;

enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv };

// Everything that shapes a built graph.
struct GraphKey {
  int device = 0;
  DType dtype = DType::kBFloat16;
  std::array<std::int64_t, 7> sizes{};  // B, Hq, Hkv, Sq, Skv, D, Dv
  std::array<std::int64_t, 16> strides{};  // q, k, v, out (4 each)
  std::array<std::int64_t, 3> lse_strides{};
  bool causal = false;
  bool padding = false;
  bool lse = false;
  float scale = 0.f;
  auto tie() const { return std::tie(device, dtype, sizes, strides, lse_strides, causal, padding, lse, scale); }
  bool operator<(const GraphKey& other) const { return tie() < other.tie(); }
};

struct BuiltGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace_bytes = 0;
};

struct Workspace {
  void* device = nullptr;
  std::size_t bytes = 0;
  std::int32_t* host_flags = nullptr;  // pinned: read back the mask check without a pageable copy
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

GraphKey make_key(const AttentionProblem& p, int device) {
  GraphKey key;
  key.device = device;
  key.dtype = p.q.dtype;
  key.sizes = {p.q.size(0), p.q.size(2), p.k.size(2), p.q.size(1), p.k.size(1), p.q.size(3), p.v.size(3)};
  const TensorView* views[] = {&p.q, &p.k, &p.v, &p.out};
  for (int t = 0; t < 4; ++t) {
    for (int d = 0; d < 4; ++d) key.strides[t * 4 + d] = views[t]->stride(d);
  }
  if (p.lse) key.lse_strides = {p.lse->stride(0), p.lse->stride(1), p.lse->stride(2)};
  key.causal = p.causal;
  key.padding = p.mask.has_value();
  key.lse = p.lse.has_value();
  key.scale = p.softmax_scale();
  return key;
}

// DiT views are [B, S, H, D]; cuDNN names dimensions [B, H, S, D], so the strides are permuted.
std::vector<std::int64_t> bhsd_strides(const GraphKey& key, int tensor) {
  const std::int64_t* s = &key.strides[tensor * 4];
  return {s[0], s[2], s[1], s[3]};
}

Result<BuiltGraph> build_graph(const GraphKey& key, cudnnHandle_t handle) {
  const auto [b, hq, hkv, sq, skv, d, dv] = key.sizes;
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(cudnn_dtype(key.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, Uid uid, std::vector<std::int64_t> dims, std::vector<std::int64_t> strides) {
    return graph->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(std::move(dims)).set_stride(std::move(strides)));
  };
  auto q = tensor("Q", kQ, {b, hq, sq, d}, bhsd_strides(key, 0));
  auto k = tensor("K", kK, {b, hkv, skv, d}, bhsd_strides(key, 1));
  auto v = tensor("V", kV, {b, hkv, skv, dv}, bhsd_strides(key, 2));

  auto options = fe::graph::SDPA_attributes().set_name("diffattn_sdpa").set_generate_stats(key.lse).set_attn_scale(key.scale);
  if (key.causal) {
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  }
  if (key.padding) {
    auto lengths = [&](const char* name, Uid uid) {
      return graph->tensor(fe::graph::Tensor_attributes()
                               .set_name(name)
                               .set_uid(uid)
                               .set_dim({b, 1, 1, 1})
                               .set_stride({1, 1, 1, 1})
                               .set_data_type(fe::DataType_t::INT32));
    };
    options.set_padding_mask(true).set_seq_len_q(lengths("seq_len_q", kSeqQ)).set_seq_len_kv(lengths("seq_len_kv", kSeqKv));
  }
  auto [o, stats] = graph->sdpa(q, k, v, options);
  o->set_output(true).set_uid(kO).set_dim({b, hq, sq, dv}).set_stride(bhsd_strides(key, 3));
  if (key.lse) {
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({b, hq, sq, 1})
        .set_stride({key.lse_strides[0], key.lse_strides[1], key.lse_strides[2], 1});
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
    const GraphKey key = make_key(p, device);
    DIFFATTN_ASSIGN_OR_RETURN(const BuiltGraph* built, graph_for(key, handle));

    const std::size_t batch = static_cast<std::size_t>(p.q.size(0));
    const std::size_t cudnn_bytes = align_up(static_cast<std::size_t>(built->workspace_bytes));
    const std::size_t lengths_bytes = p.mask ? align_up((2 * batch + 2) * sizeof(std::int32_t)) : 0;
    DIFFATTN_ASSIGN_OR_RETURN(Workspace * ws, workspace_for(device, stream, cudnn_bytes + lengths_bytes));

    std::unordered_map<std::int64_t, void*> pack = {{kQ, p.q.data}, {kK, p.k.data}, {kV, p.v.data}, {kO, p.out.data}};
    if (p.lse) pack[kStats] = p.lse->data;
    if (p.mask) {
      auto* lengths = reinterpret_cast<std::int32_t*>(static_cast<char*>(ws->device) + cudnn_bytes);
      KeyPaddingLengths out{lengths, lengths + batch, lengths + 2 * batch};
      DIFFATTN_RETURN_IF_ERROR(check_mask_prefix(p, out, ws, stream));
      pack[kSeqQ] = out.seq_len_q;
      pack[kSeqKv] = out.seq_len_kv;
    }
    if (cudnnStatus_t s = cudnnSetStream(handle, stream); s != CUDNN_STATUS_SUCCESS) {
      return CudaError(handle_error("cudnnSetStream", s));
    }
    if (auto err = built->graph->execute(handle, pack, ws->device); err.is_bad()) {
      return CudaError(cudnn_error("graph execution", err));
    }
    return cuda::check_launch("cuDNN SDPA graph");
  }

 private:
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

  Result<Workspace*> workspace_for(int device, cudaStream_t stream, std::size_t bytes) {
    Workspace& ws = workspaces_[{device, stream}];
    if (ws.host_flags == nullptr) {
      DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaMallocHost(&ws.host_flags, 2 * sizeof(std::int32_t)),
                                                 "cudaMallocHost(CUDNN_ATTN mask flags)"));
    }
    if (ws.bytes >= bytes) return &ws;
    if (ws.device != nullptr) {
      // The stream may still use the old buffer.
      DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
      DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaFree(ws.device), "cudaFree(CUDNN_ATTN workspace)"));
      ws.device = nullptr;
      ws.bytes = 0;
    }
    DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaMalloc(&ws.device, bytes),
                                               "cudaMalloc(CUDNN_ATTN workspace, " + std::to_string(bytes) + " bytes)"));
    ws.bytes = bytes;
    return &ws;
  }

  Status check_mask_prefix(const AttentionProblem& p, const KeyPaddingLengths& out, Workspace* ws,
                           cudaStream_t stream) {
    const TensorView& mask = *p.mask;
    const int last = mask.ndim - 1;
    const std::int64_t batch_stride = mask.size(0) == 1 ? 0 : mask.stride(0);
    DIFFATTN_RETURN_IF_ERROR(launch_key_padding_lengths(static_cast<const std::uint8_t*>(mask.data), batch_stride,
                                                        mask.stride(last), static_cast<int>(p.q.size(0)),
                                                        static_cast<int>(p.q.size(1)), static_cast<int>(p.k.size(1)),
                                                        out, stream));
    DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(
        cudaMemcpyAsync(ws->host_flags, out.flags, 2 * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync(CUDNN_ATTN mask flags)"));
    DIFFATTN_RETURN_IF_ERROR(cuda::cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    if (ws->host_flags[0] != 0) {
      return Unsupported("CUDNN_ATTN takes key-padding masks that keep a prefix of the keys; batch " +
                         std::to_string(ws->host_flags[0] - 1) +
                         " keeps a key after a dropped one. Select TORCH_SDPA for arbitrary keep-masks");
    }
    if (ws->host_flags[1] != 0) {
      return Unsupported("CUDNN_ATTN cannot run batch " + std::to_string(ws->host_flags[1] - 1) +
                         ", whose mask keeps no key; select TORCH_SDPA, which returns zeros and LSE -inf for "
                         "fully masked rows");
    }
    return Status::Ok();
  }

  std::mutex mu_;
  std::map<int, cudnnHandle_t> handles_;
  std::map<GraphKey, BuiltGraph> graphs_;
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
