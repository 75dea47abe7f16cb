#pragma once
// Real Q/K/V dumps: DIR/<role>/{q,k,v}.npy, or one subfolder per sample under DIR/<role>/, each
// array [B, S, H, D] in float32, float16, or uint16 holding bfloat16 bits.

#include <string>
#include <vector>

#include "diffattn/dtype.h"
#include "diffattn/status.h"
#include "models/model_zoo.h"
#include "runner/activation_source.h"

namespace diffattn::runner {

// The folders holding a complete q/k/v set for `role`, sorted; empty when the role has none.
Result<std::vector<std::string>> find_role_dumps(const std::string& activations_dir, const std::string& role);

// Loads one q/k/v set, checks it against the role (heads, kv heads, head size, matching batch and
// key lengths, finite values) and converts it to `dtype`.
Result<QkvTensors> load_qkv_dump(const std::string& dir, const ModelRole& role, DType dtype);

}  // namespace diffattn::runner
