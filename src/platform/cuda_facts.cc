#include "platform/cuda_facts.h"

#include "common/strings.h"

namespace diffattn {
namespace {

std::string compiled_archs_text(const PlatformInfo& info) {
  if (info.compiled_archs.empty()) return "features.flash_attn is false";
  return "this build holds kernels for " + join(info.compiled_archs, ", ");
}

}  // namespace

CudaFacts cuda_facts(const PlatformInfo& info) {
  CudaFacts f;
  f.capability = info.capability();
  f.sm = info.sm_string();
  f.device = info.describe();
  f.cudnn_version = info.cudnn_version;
  f.compiled_archs = compiled_archs_text(info);
  f.features = info.features;
  return f;
}

}  // namespace diffattn
