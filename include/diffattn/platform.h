#pragma once
// Platforms own compatibility policy: they validate explicit backend choices and pick defaults.
// A platform is probed (CPU, CUDA device) or described as JSON, so every routing rule can be
// exercised on a machine without a GPU.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffattn/layer_traits.h"
#include "diffattn/status.h"

namespace diffattn {

class Registry;

enum class PlatformKind { kCpu, kCuda };

// features.flashinfer of a probed GPU where this build's FLASH_ATTN kernels run: FLASHINFER_ATTN's
// ragged prefill and mask kernels are those.
inline constexpr char kDiffattnPrefillKernels[] = "diffattn";

struct PlatformFeatures {
  bool flash_attn = false;          // diffattn FLASH_ATTN kernels exist for this device (FA2/FA3-class)
  bool flash_attn_4 = false;        // an FA4-class kernel exists (the only FLASH_ATTN accepted on Blackwell)
  std::string flashinfer;           // FlashInfer version found, kDiffattnPrefillKernels, or empty
  bool flashinfer_prefill = false;  // FlashInfer's ragged prefill kernels are usable
  bool trtllm_gen = false;          // trtllm-gen FMHA kernels are usable
  bool sage_attn = false;
  bool sage_attn_3 = false;
  std::vector<std::string> plugins;  // plugin backend names loaded at run time
  bool operator==(const PlatformFeatures&) const = default;
};

struct PlatformInfo {
  PlatformKind kind = PlatformKind::kCpu;
  int cc_major = 0, cc_minor = 0;  // CUDA compute capability
  std::string device_name;
  int sm_count = 0;
  int cudnn_version = 0;  // as cudnnGetVersion reports it: 9.5.0 -> 90500; 0 = none
  PlatformFeatures features;
  std::vector<std::string> compiled_archs;  // architectures this build holds kernels for, e.g. "sm_90a"
  std::string origin = "probe";             // "probe" or the description's file name

  int capability() const { return cc_major * 10 + cc_minor; }
  std::string sm_string() const;  // "sm_90"; empty on CPU
  std::string describe() const;   // "NVIDIA H200 (sm_90, 132 SMs, cuDNN 9.19.0)" / "CPU (x86_64, AVX2)"
  bool operator==(const PlatformInfo&) const = default;
};

// JSON form of a PlatformInfo (docs/design/selection_contract.md): {"kind": "cuda",
// "compute_capability": "10.0", "device_name": ..., "cudnn_version": "9.5.0", "features": {...}};
// absent features are false. Unknown keys are errors.
Result<PlatformInfo> platform_from_json(const nlohmann::json& value);
nlohmann::json platform_to_json(const PlatformInfo& info);

PlatformInfo probe_cpu_platform();
// Probes CUDA device `device`: capability, SM count, name, cuDNN runtime version, and which
// diffattn kernels this build holds for the device's architecture. kUnavailable without a GPU
// or in a build without CUDA.
Result<PlatformInfo> probe_cuda_platform(int device = 0);
// "cpu", "cuda", a path to a JSON description, the description itself (text starting with '{'), or
// empty (CUDA when a device answers, else CPU).
Result<PlatformInfo> load_platform(std::string_view spec);

struct Considered {
  std::string backend;
  std::string reason;
  bool operator==(const Considered&) const = default;
};

struct PlatformDecision {
  std::string backend;                 // canonical registry name
  std::vector<Considered> considered;  // defaults passed over, with reasons (default path only)
};

class Platform {
 public:
  virtual ~Platform() = default;
  virtual const PlatformInfo& info() const = 0;
  // The Python system's get_diffusion_attn_backend_cls. `selected` names an explicit backend (any case):
  // validate it and fail with an actionable error when it cannot run. Without one, choose the first
  // compatible default for a layer with `traits` and record what was passed over. head_size <= 0
  // skips head-size checks.
  virtual Result<PlatformDecision> select_backend(std::optional<std::string_view> selected, int head_size,
                                                  const LayerTraits& traits) const = 0;
};

// The CPU or CUDA policy for `info`, consulting `registry` for names and backend availability.
std::shared_ptr<const Platform> make_platform(PlatformInfo info, const Registry& registry);

}  // namespace diffattn
