#include "diffattn/registry.h"

#include <cctype>
#include <mutex>
#include <string>
#include <utility>

#include "common/name_hints.h"
#include "registry/nearest_backend_name.h"
#include "registry/unknown_backend_message.h"

namespace diffattn {
namespace {

bool is_upper_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!(std::isupper(u) || std::isdigit(u) || c == '_')) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> BackendDescriptor::unsupported_reasons(const ProblemShape& problem,
                                                                bool explicit_choice) const {
  std::vector<std::string> reasons = capability_reasons(caps, problem);
  if (extra_problem_reasons) {
    for (std::string& reason : extra_problem_reasons(problem)) reasons.push_back(std::move(reason));
  }
  if (explicit_choice && explicit_problem_reasons) {
    for (std::string& reason : explicit_problem_reasons(problem)) reasons.push_back(std::move(reason));
  }
  return reasons;
}

Status Registry::add(BackendDescriptor descriptor) {
  if (!is_upper_name(descriptor.name)) {
    return InvalidConfig("Cannot register diffusion attention backend '" + descriptor.name +
                         "': names are upper case letters, digits and '_' (e.g. MY_SPARSE_ATTN).");
  }
  if (!descriptor.create) {
    return InvalidConfig("Cannot register diffusion attention backend '" + descriptor.name +
                         "' without a factory: set BackendDescriptor::create.");
  }
  std::unique_lock lock(mu_);
  for (const auto& existing : descriptors_) {
    if (existing->name == descriptor.name) {
      return InvalidConfig("Diffusion attention backend '" + descriptor.name +
                           "' is already registered. Use replace_implementation('" + descriptor.name +
                           "', factory) to swap the implementation behind an existing name.");
    }
  }
  descriptors_.push_back(std::make_unique<BackendDescriptor>(std::move(descriptor)));
  return Status::Ok();
}

Status Registry::replace_implementation(std::string_view name, BackendFactory factory) {
  if (!factory) {
    return InvalidConfig("replace_implementation('" + std::string(name) +
                         "') needs a factory; use clear_override to restore the built-in implementation.");
  }
  DIFFATTN_RETURN_IF_ERROR(find(name).status());
  std::unique_lock lock(mu_);
  overrides_.insert_or_assign(std::string(name), std::move(factory));
  return Status::Ok();
}

bool Registry::is_overridden(std::string_view name) const {
  std::shared_lock lock(mu_);
  return overrides_.find(name) != overrides_.end();
}

void Registry::clear_override(std::string_view name) {
  std::unique_lock lock(mu_);
  if (auto it = overrides_.find(name); it != overrides_.end()) overrides_.erase(it);
}

Result<const BackendDescriptor*> Registry::find(std::string_view name) const {
  {
    std::shared_lock lock(mu_);
    for (const auto& descriptor : descriptors_)
      if (descriptor->name == name) return static_cast<const BackendDescriptor*>(descriptor.get());
  }
  return UnknownBackend(unknown_backend_message(name, names()));
}

std::string unknown_backend_message(std::string_view as_written, const std::vector<std::string>& valid) {
  std::string list;
  for (const std::string& name : valid) list += (list.empty() ? "" : ", ") + name;
  return "Unknown diffusion attention backend: '" + bounded_echo(as_written) + "'." + did_you_mean(as_written, valid) +
         " Valid options are: " + (list.empty() ? "(none registered)" : list);
}

std::vector<std::string> Registry::names() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  out.reserve(descriptors_.size());
  for (const auto& descriptor : descriptors_) out.push_back(descriptor->name);
  return out;
}

Result<std::unique_ptr<Backend>> Registry::create(std::string_view name, const BackendInit& init) const {
  DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* descriptor, find(name));
  BackendFactory factory;
  {
    std::shared_lock lock(mu_);
    auto it = overrides_.find(name);
    factory = it != overrides_.end() ? it->second : descriptor->create;
  }
  // Called without the lock: a factory may consult the registry itself.
  return factory(init);
}

}  // namespace diffattn
