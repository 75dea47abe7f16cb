// The keyword set a backend's kernel receives: the typed blocks flattened the way each consumer reads them.

#include "diffattn/config.h"

namespace diffattn {
namespace {

void add_skip_softmax(const SkipSoftmaxSpec& block, nlohmann::json& out) {
  if (block.threshold) out["skip_softmax_threshold"] = *block.threshold;
  if (block.target_sparsity) out["target_sparsity"] = *block.target_sparsity;
  // 0 means the timestep gate is off, which is what a kernel assumes without the key.
  if (block.disabled_until_timestep != 0.0) out["disabled_until_timestep"] = block.disabled_until_timestep;
}

void add_quant(const AttnQuantSpec& block, nlohmann::json& out) {
  nlohmann::json quant = nlohmann::json::object();
  if (block.dtype_qk || block.dtype_vo) {
    quant["dtype_qk"] = block.dtype_qk ? nlohmann::json(*block.dtype_qk) : nlohmann::json(nullptr);
    quant["q_block_size"] = block.q_block_size;
    quant["k_block_size"] = block.k_block_size;
    if (block.dtype_vo) quant["dtype_vo"] = *block.dtype_vo;
  }
  if (block.flashinfer_backend) quant["flashinfer_backend"] = *block.flashinfer_backend;
  if (!quant.empty()) out["quant"] = std::move(quant);
}

void add_block_sparse(const BlockSparseSpec& block, nlohmann::json& out) {
  out["sparsity"] = block.sparsity;
  out["start_step"] = block.start_step;
  out["end_step"] = block.end_step;
  out["precision"] = block.precision;
  if (!block.skip_layer_indices.empty()) {
    out["skip_layers"] = std::vector<std::int64_t>(block.skip_layer_indices.begin(), block.skip_layer_indices.end());
  }
}

}  // namespace

nlohmann::json backend_kwargs(const AttentionSpec& spec) {
  nlohmann::json out = nlohmann::json::object();
  if (spec.skip_softmax) add_skip_softmax(*spec.skip_softmax, out);
  if (spec.quant) add_quant(*spec.quant, out);
  if (spec.fastvideo_vsa_topk) out["topk"] = *spec.fastvideo_vsa_topk;
  if (spec.block_sparse) add_block_sparse(*spec.block_sparse, out);
  return out;
}

}  // namespace diffattn
