#pragma once
// SAGE_ATTN's options, read from the `extra` of its AttentionSpec: {"pv": "fp8" | "fp16"}.

#include <optional>

#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/status.h"
#include "kernels/sage/sage_quant.h"

namespace diffattn {

// Every extra key is known and "pv", when set, is one of "fp8" (the default) and "fp16".
Status validate_sage_options(const AttentionSpec& spec);

// The P*V mode a validated spec names, or none when it names none (a platform default, or extra
// without "pv").
std::optional<sage::PvMode> sage_pv_choice(const std::optional<AttentionSpec>& spec);

// The P*V mode on `platform`: the one named, else FP8 where a kernel has FP8 P*V (the CPU, Hopper)
// and the input's 16-bit dtype elsewhere (Ampere/Ada, as SageAttention chooses per GPU). An
// explicit "fp8" on a GPU without an FP8 P*V kernel is refused with what to set instead.
Result<sage::PvMode> sage_pv_mode(const std::optional<AttentionSpec>& spec, const PlatformInfo& platform);

}  // namespace diffattn
