#pragma once
// Real Q/K/V dumps, in DIR/<role>/ or in one subfolder per sample under it (DIR/<role>/<sample>/).
// A sample is either q.npy, k.npy and v.npy, or one safetensors file (qkv.safetensors, or the only
// *.safetensors file of the folder) holding tensors named q, k and v. Every array is
// [B, S, H, D]: float32, float16, float64 or uint16 holding bfloat16 bits in .npy files; F32, F16
// or BF16 in safetensors files.

#include <string>
#include <vector>

#include "diffattn/dtype.h"
#include "diffattn/status.h"
#include "models/model_zoo.h"
#include "runner/activation_source.h"

namespace diffattn::runner {

// The folders holding a complete q/k/v sample for `role`, sorted; empty when DIR/<role> does not
// exist. A role folder with no sample, a folder with only some of q.npy, k.npy and v.npy, a folder
// holding both .npy files and a safetensors file, or several safetensors files and no
// qkv.safetensors, is an error; so is a safetensors file without tensors q, k and v.
Result<std::vector<std::string>> find_role_dumps(const std::string& activations_dir, const std::string& role);

// Loads one q/k/v sample, checks it against the role (heads, kv heads, head size, matching batch
// and key lengths, finite values) and converts it to `dtype`.
Result<QkvTensors> load_qkv_dump(const std::string& dir, const ModelRole& role, DType dtype);

}  // namespace diffattn::runner
