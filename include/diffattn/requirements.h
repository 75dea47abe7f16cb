#pragma once
// What a backend needs from a CUDA platform, declared as data in the backend's own folder and
// evaluated generically by the platform (src/platform/requirements.cc). The platform owns the
// facts (compute capability, cuDNN, optional libraries); a backend only says which it needs and
// what to tell the user when one is missing.
//
// Reason texts are templates; the platform fills in {sm} ("sm_90"), {device} (the platform's
// description), {suggest} (the route's suggestions without this backend), {found} (the cuDNN
// version found, or "none"), {cudnn} ("9.4.0"), {compiled} (the architectures this build holds
// kernels for), {head} (the head size, or "unknown") and {rule} (the backend's head sizes).

#include <string>
#include <utility>
#include <vector>

#include "diffattn/layer_traits.h"

namespace diffattn {

// An inclusive range of compute capabilities as major * 10 + minor: {100, 109} is every 10.x.
struct CapabilityRange {
  int min = 0;
  int max = 1 << 10;
  bool contains(int capability) const { return capability >= min && capability <= max; }
};

// The facts a platform holds about a CUDA device and this build.
enum class PlatformFact {
  kArchitecture,      // the compute capability is in `archs`
  kFlashAttnKernels,  // PlatformFeatures::flash_attn: FA2/FA3-class kernels for this device
  kFlashAttn4Kernels,  // PlatformFeatures::flash_attn_4
  kCudnn,             // a cuDNN runtime of at least `min_version` (cudnnGetVersion form, 90500 = 9.5.0)
  kFlashInfer,        // PlatformFeatures::flashinfer is not empty
  kFlashInferPrefill,  // PlatformFeatures::flashinfer_prefill
  kTrtllmGen,         // PlatformFeatures::trtllm_gen
};

// One fact a backend needs. An empty reason means the need does not apply to that kind of choice
// (an explicit name, or the platform's automatic default).
struct PlatformNeed {
  PlatformFact fact = PlatformFact::kArchitecture;
  // kArchitecture: the architectures with kernels. Any other fact: the architectures on which the
  // fact is needed (empty: all).
  std::vector<CapabilityRange> archs;
  int min_version = 0;  // kCudnn only
  // Follows "<NAME> was explicitly selected but ". Empty with a default_reason: "is unsupported on
  // {sm} (<default_reason>). Select {suggest} instead."
  std::string explicit_reason;
  std::string default_reason;  // one clause, listed with the candidates a default passed over
  std::string default_warning;  // logged as a warning when this need keeps the backend from being a default
  bool explicit_only = false;   // not a condition of being chosen automatically
  bool default_only = false;    // a condition of being chosen automatically only

  // Declaration helpers: need(PlatformFact::kCudnn, "...").at_least(90500).on({{100, 129}}).
  PlatformNeed& on(std::vector<CapabilityRange> ranges) { archs = std::move(ranges); return *this; }
  PlatformNeed& at_least(int version) { min_version = version; return *this; }
  PlatformNeed& when_explicit(std::string reason) { explicit_reason = std::move(reason); return *this; }
  PlatformNeed& warn(std::string text) { default_warning = std::move(text); return *this; }
  PlatformNeed& only_explicit() { explicit_only = true; return *this; }
  PlatformNeed& only_default() { default_only = true; return *this; }
};

// A need whose reason for a default is `default_reason` (see PlatformNeed for the explicit one).
inline PlatformNeed need(PlatformFact fact, std::string default_reason) {
  PlatformNeed n;
  n.fact = fact;
  n.default_reason = std::move(default_reason);
  return n;
}

// The head-size texts of a backend on every platform (its head sizes themselves are Capabilities).
struct HeadSizeNeed {
  std::string explicit_reason =
      "head_size={head} is unsupported. Supported head sizes: {rule}. Select TORCH_SDPA or another backend.";
  std::string default_reason = "head_size {head} is outside {rule}";
  bool default_needs_known = false;  // an unknown head size keeps the backend from being a default
};

// Everything a backend requires of a CUDA platform. An explicit choice is checked in this order:
// architectures, the device kind and availability, the other facts, the head size. A default is
// checked: architectures, the layer trait, the other facts, the head size, kind and availability.
struct CudaRequirements {
  std::vector<PlatformNeed> needs;
  // A layer trait that must be true before the platform picks this backend unasked, and the
  // reason given when it is not (e.g. &LayerTraits::allows_trtllm_default).
  bool LayerTraits::*default_needs_trait = nullptr;
  std::string trait_reason;
};

}  // namespace diffattn
