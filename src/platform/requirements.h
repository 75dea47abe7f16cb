#pragma once
// Evaluates the requirements a backend declares (diffattn/requirements.h) against a device's
// facts. Generic: no backend name appears here.

#include <optional>
#include <string>

#include "common/reason.h"
#include "diffattn/layer_traits.h"
#include "diffattn/registry.h"
#include "platform/cuda_facts.h"

namespace diffattn::requirements {

using diffattn::Reason;

// The values a reason template may name ({sm}, {head}, ...).
struct TemplateValues {
  const CudaFacts* facts = nullptr;  // nullptr on the CPU
  std::string suggest;
  int head_size = 0;
  std::string rule;  // the backend's head sizes
};
std::string fill(std::string_view text, const TemplateValues& values);

// Whether `need` holds on this device (a need scoped to other architectures holds trivially).
bool holds(const PlatformNeed& need, const CudaFacts& facts);

// Explicit choices: the architecture needs, then (after kind and availability) the other needs.
Status check_architectures(const BackendDescriptor& backend, const TemplateValues& values);
Status check_facts(const BackendDescriptor& backend, const TemplateValues& values);
// kUnsupported when head_size > 0 is outside the backend's head sizes (every platform).
Status check_head_size(const BackendDescriptor& backend, const TemplateValues& values);

// Why the backend is not a default for this layer here (its declared needs only), or nullopt.
Reason default_blocker(const BackendDescriptor& backend, const TemplateValues& values, const LayerTraits& traits);

}  // namespace diffattn::requirements
