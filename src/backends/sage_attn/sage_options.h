#pragma once
// SAGE_ATTN's options, read from the `extra` of its AttentionSpec: {"pv": "fp8" | "fp16"}.

#include <optional>

#include "diffattn/config.h"
#include "diffattn/status.h"
#include "kernels/sage/sage_quant.h"

namespace diffattn {

// Every extra key is known and "pv", when set, is one of "fp8" (the default) and "fp16".
Status validate_sage_options(const AttentionSpec& spec);

// The P*V mode of a validated spec (kFp8 when there is none, as for a platform default).
sage::PvMode sage_pv_mode(const std::optional<AttentionSpec>& spec);

}  // namespace diffattn
