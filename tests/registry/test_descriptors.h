#pragma once
// Backends made up by a test, so that the selection core (registry, platform, selector) is tested
// without diffattn's own backends, which sit in a layer above it (cmake/Layers.cmake). The tsan
// preset builds only the core, so its concurrency tests register these.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "diffattn/registry.h"

namespace diffattn::testing {

// A backend that only knows its name; the registry and selector never run it.
class NamedBackend final : public Backend {
 public:
  explicit NamedBackend(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  Status forward(const AttentionProblem&, void*) override { return Status::Ok(); }

 private:
  std::string name_;
};

inline BackendFactory factory_named(std::string name) {
  return [name](const BackendInit&) -> Result<std::unique_ptr<Backend>> {
    return std::unique_ptr<Backend>(std::make_unique<NamedBackend>(name));
  };
}

// Runs anywhere, on every dtype and head size, with no options.
inline BackendDescriptor test_descriptor(std::string name) {
  BackendDescriptor d;
  d.name = name;
  d.summary = "a backend made up by a test";
  d.caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  d.create = factory_named(std::move(name));
  return d;
}

// Registers one test backend per name; a name registered twice fails the calling test.
inline Status register_test_backends(Registry& registry, const std::vector<std::string>& names) {
  for (const std::string& name : names) DIFFATTN_RETURN_IF_ERROR(registry.add(test_descriptor(name)));
  return Status::Ok();
}

}  // namespace diffattn::testing
