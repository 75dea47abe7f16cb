#include "platform/requirements.h"

#include <algorithm>

#include "diffattn/log.h"
#include "platform/cudnn_version.h"

namespace diffattn::requirements {
namespace {

bool in_any(const std::vector<CapabilityRange>& ranges, int capability) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const CapabilityRange& r) { return r.contains(capability); });
}

bool is_architecture(const PlatformNeed& need) { return need.fact == PlatformFact::kArchitecture; }

// Kernels this build lacks for the device cannot be installed; a missing library can.
ErrorCode code_when_missing(PlatformFact fact) {
  switch (fact) {
    case PlatformFact::kArchitecture:
    case PlatformFact::kFlashAttnKernels:
    case PlatformFact::kFlashAttn4Kernels: return ErrorCode::kUnsupported;
    case PlatformFact::kCudnn:
    case PlatformFact::kFlashInfer:
    case PlatformFact::kFlashInferPrefill:
    case PlatformFact::kTrtllmGen: return ErrorCode::kUnavailable;
  }
  return ErrorCode::kUnsupported;
}

bool fact_present(const PlatformNeed& need, const CudaFacts& f) {
  switch (need.fact) {
    case PlatformFact::kArchitecture: return in_any(need.archs, f.capability);
    case PlatformFact::kFlashAttnKernels: return f.features.flash_attn;
    case PlatformFact::kFlashAttn4Kernels: return f.features.flash_attn_4;
    case PlatformFact::kCudnn: return f.cudnn_version > 0 && f.cudnn_version >= need.min_version;
    case PlatformFact::kFlashInfer: return !f.features.flashinfer.empty();
    case PlatformFact::kFlashInferPrefill: return !f.features.flashinfer.empty() && f.features.flashinfer_prefill;
    case PlatformFact::kTrtllmGen: return f.features.trtllm_gen;
  }
  return false;
}

std::string explicit_text(const PlatformNeed& need) {
  if (!need.explicit_reason.empty()) return need.explicit_reason;
  return "is unsupported on {sm} (" + need.default_reason + "). Select {suggest} instead.";
}

Status explicit_failure(const BackendDescriptor& backend, const PlatformNeed& need, const TemplateValues& values) {
  return Status(code_when_missing(need.fact),
                backend.name + " was explicitly selected but " + fill(explicit_text(need), values));
}

std::string head_text(int head_size) { return head_size > 0 ? std::to_string(head_size) : "unknown"; }

void replace_all(std::string& text, std::string_view key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
    text.replace(at, key.size(), value);
  }
}

}  // namespace

std::string fill(std::string_view text, const TemplateValues& values) {
  std::string out(text);
  if (values.facts != nullptr) {
    const CudaFacts& f = *values.facts;
    replace_all(out, "{sm}", f.sm);
    replace_all(out, "{device}", f.device);
    replace_all(out, "{cudnn}", cudnn_version_string(f.cudnn_version));
    replace_all(out, "{found}", f.cudnn_version > 0 ? "found cuDNN " + cudnn_version_string(f.cudnn_version)
                                                    : std::string("found none"));
    replace_all(out, "{compiled}", f.compiled_archs);
  }
  replace_all(out, "{suggest}", values.suggest);
  replace_all(out, "{head}", head_text(values.head_size));
  replace_all(out, "{rule}", values.rule);
  return out;
}

bool holds(const PlatformNeed& need, const CudaFacts& facts) {
  if (!is_architecture(need) && !need.archs.empty() && !in_any(need.archs, facts.capability)) return true;
  return fact_present(need, facts);
}

Status check_architectures(const BackendDescriptor& backend, const TemplateValues& values) {
  for (const PlatformNeed& need : backend.cuda.needs) {
    if (is_architecture(need) && !need.default_only && !holds(need, *values.facts)) {
      return explicit_failure(backend, need, values);
    }
  }
  return Status::Ok();
}

Status check_facts(const BackendDescriptor& backend, const TemplateValues& values) {
  for (const PlatformNeed& need : backend.cuda.needs) {
    if (!is_architecture(need) && !need.default_only && !holds(need, *values.facts)) {
      return explicit_failure(backend, need, values);
    }
  }
  return Status::Ok();
}

Status check_head_size(const BackendDescriptor& backend, const TemplateValues& values) {
  if (values.head_size <= 0 || backend.caps.supports_head_size(values.head_size)) return Status::Ok();
  return Unsupported(backend.name + " was explicitly selected but " +
                     fill(backend.head_size_reasons.explicit_reason, values));
}

Reason default_blocker(const BackendDescriptor& backend, const TemplateValues& values, const LayerTraits& traits) {
  const auto blocks_default = [&](const PlatformNeed& need) {
    return !need.explicit_only && !holds(need, *values.facts);
  };
  for (const PlatformNeed& need : backend.cuda.needs) {
    if (is_architecture(need) && blocks_default(need)) return fill(need.default_reason, values);
  }
  if (backend.cuda.default_needs_trait != nullptr && !(traits.*backend.cuda.default_needs_trait)) {
    return fill(backend.cuda.trait_reason, values);
  }
  for (const PlatformNeed& need : backend.cuda.needs) {
    if (is_architecture(need) || !blocks_default(need)) continue;
    if (!need.default_warning.empty()) log_warning(fill(need.default_warning, values));
    return fill(need.default_reason, values);
  }
  const HeadSizeNeed& head = backend.head_size_reasons;
  const bool head_blocks = values.head_size > 0 ? !backend.caps.supports_head_size(values.head_size)
                                                : head.default_needs_known;
  if (head_blocks) return fill(head.default_reason, values);
  return std::nullopt;
}

}  // namespace diffattn::requirements
