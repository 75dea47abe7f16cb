#pragma once
// Which registered backends the parity harness runs for a case on a platform, and why not the
// others: the same answers the selector and `diffattn backends` give.

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diffattn/attention.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/selector.h"

namespace diffattn::testing {

// Why `d` cannot run anything on `platform` for `device` (nullopt: it can run some problems).
inline std::optional<std::string> backend_unavailable_reason(const BackendDescriptor& d, const PlatformInfo& platform,
                                                             DeviceKind device) {
  if (std::find(d.caps.devices.begin(), d.caps.devices.end(), device) == d.caps.devices.end())
    return std::string("runs only on ") + (device == DeviceKind::kCpu ? "CUDA devices" : "the CPU");
  if (d.unavailable_reason) return d.unavailable_reason(platform);
  return std::nullopt;
}

// Why `d` cannot run `shape` here: the platform's verdict on an explicit choice, then the
// backend's own capability reasons. Empty when it can.
inline std::vector<std::string> case_unsupported_reasons(const BackendDescriptor& d, const Platform& platform,
                                                         const ProblemShape& shape) {
  auto decision = platform.select_backend(d.name, static_cast<int>(shape.head_size), LayerTraits::Unconstrained());
  if (!decision.ok()) return {decision.status().message()};
  return d.unsupported_reasons(shape);
}

// The registered backends that can run on `platform` for `device`; the others are printed with
// the reason, so that a backend the harness does not run is visible in every test log.
inline std::vector<const BackendDescriptor*> runnable_backends(const Registry& registry, const PlatformInfo& platform,
                                                               DeviceKind device) {
  std::vector<const BackendDescriptor*> runnable;
  for (const std::string& name : registry.names()) {
    const BackendDescriptor* d = registry.find(name).value();
    if (auto why = backend_unavailable_reason(*d, platform, device)) {
      std::printf("[ NOT RUN  ] %s: %s\n", name.c_str(), why->c_str());
      continue;
    }
    runnable.push_back(d);
  }
  return runnable;
}

inline std::string join_reasons(const std::vector<std::string>& reasons) {
  std::string out;
  for (const auto& r : reasons) out += (out.empty() ? "" : "; ") + r;
  return out;
}

inline BackendInit init_for(const AttentionProblem& p, const PlatformInfo& platform) {
  BackendInit init;
  init.num_heads = static_cast<int>(p.q.size(2));
  init.num_kv_heads = static_cast<int>(p.k.size(2));
  init.head_size = static_cast<int>(p.q.size(3));
  init.explicit_choice = true;
  init.platform = platform;
  return init;
}

// A layer declared for `p`'s shapes with `d` named explicitly: the checked path every caller takes
// (only the layer checks and completes a call; backends trust it).
inline Result<Attention> layer_for(const BackendDescriptor& d, const PlatformInfo& platform, const AttentionProblem& p) {
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(p.q.size(2));
  desc.num_kv_heads = static_cast<int>(p.k.size(2));
  desc.head_size = static_cast<int>(p.q.size(3));
  AttentionSpec spec;
  spec.backend = d.name;
  AttentionConfig config;
  config.default_spec = spec;
  Selector selector(make_platform(platform, global_registry()), &global_registry());
  return Attention::Create(desc, config, selector);
}

}  // namespace diffattn::testing
