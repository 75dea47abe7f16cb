// Plugin libraries (include/diffattn/plugin.h): dlopen, one registration call, and an adapter
// backend that checks every call before handing it to the plugin's C function.

#include <dlfcn.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/reason.h"
#include "diffattn/plugin.h"
#include "diffattn/registry.h"
#include "registry/option_checks.h"

namespace diffattn {
namespace {

// The loaded library; closed when the last descriptor or backend using it goes away.
struct PluginLibrary {
  void* handle = nullptr;
  std::string path;
  ~PluginLibrary() {
    if (handle != nullptr) dlclose(handle);
  }
};

struct PluginEntry {
  diffattn_plugin_backend fields{};  // the plugin's struct; name/summary point into the strings below
  std::string name, summary;
};

class PluginBackend final : public Backend {
 public:
  PluginBackend(std::shared_ptr<const PluginLibrary> library, std::shared_ptr<const PluginEntry> entry,
                Capabilities caps, BackendInit init)
      : library_(std::move(library)), entry_(std::move(entry)), caps_(std::move(caps)), init_(std::move(init)) {}

  std::string_view name() const override { return entry_->name; }

  // The layer checked and completed the call; what the plugin declared it runs is checked here,
  // because the plugin's own code is outside diffattn.
  Status forward(const AttentionProblem& checked, void* stream) override {
    AttentionProblem call = checked;  // DLPack views point into the copy's shape and stride arrays
    if (auto reasons = capability_reasons(caps_, call.shape()); !reasons.empty())
      return Unsupported(entry_->name + " (plugin " + library_->path + ") cannot run this call: " + reasons_text(reasons) +
                         "; select TORCH_SDPA or another backend");
    DLTensor q = to_dlpack(call.q), k = to_dlpack(call.k), v = to_dlpack(call.v), out = to_dlpack(call.out);
    DLTensor mask{}, lse{};
    if (call.mask) mask = to_dlpack(*call.mask);
    if (call.lse) lse = to_dlpack(*call.lse);
    diffattn_plugin_call c{};
    c.q = &q, c.k = &k, c.v = &v, c.out = &out;
    c.mask = call.mask ? &mask : nullptr;
    c.lse = call.lse ? &lse : nullptr;
    c.scale = call.softmax_scale();
    c.causal = call.causal ? 1 : 0;
    c.stream = stream;
    char error[1024] = {};
    const int rc = entry_->fields.forward(entry_->fields.user_data, &c, error, sizeof error);
    error[sizeof error - 1] = '\0';
    if (rc != 0)
      return Unsupported(entry_->name + " (plugin " + library_->path + ") failed: " +
                         (error[0] != '\0' ? std::string(error) : std::string("it gave no reason")));
    return Status::Ok();
  }

 private:
  std::shared_ptr<const PluginLibrary> library_;
  std::shared_ptr<const PluginEntry> entry_;
  Capabilities caps_;
  BackendInit init_;
};

// Collects the backends of one registration call; nothing reaches the registry until it returns 0.
struct Registrar {
  const Registry* registry;
  std::vector<std::shared_ptr<PluginEntry>> entries;
  std::vector<std::string> errors;

  int add(const diffattn_plugin_backend* b) {
    if (b == nullptr) return refuse("a NULL backend description");
    const std::string name = b->name != nullptr ? b->name : "";
    const std::string what = "backend '" + name + "'";
    if (name.empty()) return refuse("a backend without a name");
    if (b->forward == nullptr) return refuse(what + " has no forward function");
    if ((b->devices & (DIFFATTN_PLUGIN_DEVICE_CPU | DIFFATTN_PLUGIN_DEVICE_CUDA)) == 0)
      return refuse(what + " declares no device (set DIFFATTN_PLUGIN_DEVICE_CPU and/or _CUDA)");
    if ((b->dtypes & (DIFFATTN_PLUGIN_DTYPE_FLOAT32 | DIFFATTN_PLUGIN_DTYPE_FLOAT16 | DIFFATTN_PLUGIN_DTYPE_BFLOAT16)) == 0)
      return refuse(what + " declares no dtype (set DIFFATTN_PLUGIN_DTYPE_* bits)");
    if (b->min_head_size < 1 || b->max_head_size < b->min_head_size)
      return refuse(what + " declares head sizes " + std::to_string(b->min_head_size) + ".." +
                    std::to_string(b->max_head_size) + "; give 1 <= min_head_size <= max_head_size");
    for (const auto& e : entries)
      if (e->name == name) return refuse(what + " is registered twice by this library");
    if (auto existing = registry->find(name); existing.ok()) {
      const BackendDescriptor& d = **existing;
      return refuse(d.origin.empty() ? what + " shadows the built-in backend " + name + "; give it another name"
                                     : what + " is already registered by the plugin '" + d.origin +
                                           "' (the first registration wins)");
    }
    auto entry = std::make_shared<PluginEntry>();
    entry->fields = *b;
    entry->name = name;
    entry->summary = b->summary != nullptr ? b->summary : "";
    entry->fields.name = entry->name.c_str();
    entry->fields.summary = entry->summary.c_str();
    entries.push_back(std::move(entry));
    return 0;
  }

  int refuse(std::string why) {
    errors.push_back(std::move(why));
    return 1;
  }
};

int add_backend(void* registrar, const diffattn_plugin_backend* backend) {
  try {
    return static_cast<Registrar*>(registrar)->add(backend);
  } catch (...) {
    return 1;  // nothing may unwind into the plugin's C code
  }
}

Capabilities caps_of(const diffattn_plugin_backend& b) {
  Capabilities caps;
  if (b.devices & DIFFATTN_PLUGIN_DEVICE_CPU) caps.devices.push_back(DeviceKind::kCpu);
  if (b.devices & DIFFATTN_PLUGIN_DEVICE_CUDA) caps.devices.push_back(DeviceKind::kCuda);
  if (b.dtypes & DIFFATTN_PLUGIN_DTYPE_FLOAT32) caps.dtypes.push_back(DType::kFloat32);
  if (b.dtypes & DIFFATTN_PLUGIN_DTYPE_FLOAT16) caps.dtypes.push_back(DType::kFloat16);
  if (b.dtypes & DIFFATTN_PLUGIN_DTYPE_BFLOAT16) caps.dtypes.push_back(DType::kBFloat16);
  caps.min_head_size = b.min_head_size;
  caps.max_head_size = b.max_head_size;
  caps.gqa = b.gqa != 0;
  caps.causal = b.causal != 0;
  caps.key_padding_mask = b.key_padding_mask != 0;
  caps.dense_mask = b.dense_mask != 0;
  caps.lse = b.lse != 0;
  caps.cross = b.cross != 0;
  caps.varlen = false;
  return caps;
}

}  // namespace

Result<std::vector<std::string>> load_plugin(std::string_view path_view, Registry& registry) {
  const std::string path(path_view);
  if (path.empty()) return InvalidConfig("load_plugin needs the path of a plugin library (a .so file)");
  // dlopen blocks on a pipe and reads a device to its end: only a regular file can be a library.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return InvalidConfig(path + " is a folder, device or pipe, not a file; name a plugin library (a .so file)");
  auto library = std::make_shared<PluginLibrary>();
  library->path = path;
  library->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle == nullptr) {
    const char* why = dlerror();
    return Unavailable("Cannot load the diffattn plugin '" + path + "': " + (why != nullptr ? why : "unknown error") +
                       ". Check the path and that the library's own dependencies are on the library path.");
  }
  dlerror();
  void* symbol = dlsym(library->handle, DIFFATTN_PLUGIN_REGISTER_SYMBOL);
  if (symbol == nullptr)
    return InvalidConfig("'" + path + "' is not a diffattn plugin: it does not export " +
                         DIFFATTN_PLUGIN_REGISTER_SYMBOL + " (see include/diffattn/plugin.h)");
  auto register_fn = reinterpret_cast<diffattn_plugin_register_fn>(symbol);
  Registrar registrar{&registry, {}, {}};
  const int rc = register_fn(DIFFATTN_PLUGIN_ABI_VERSION, add_backend, &registrar);
  if (rc != 0 || !registrar.errors.empty()) {
    std::string why = registrar.errors.empty() ? "its registration returned " + std::to_string(rc) +
                                                     " for plugin ABI version " +
                                                     std::to_string(DIFFATTN_PLUGIN_ABI_VERSION)
                                               : join(registrar.errors, "; ");
    return InvalidConfig("The diffattn plugin '" + path + "' was not loaded: " + why + ". No backend was added.");
  }
  if (registrar.entries.empty())
    return InvalidConfig("The diffattn plugin '" + path + "' registered no backends.");

  std::vector<BackendDescriptor> descriptors;
  for (const auto& entry : registrar.entries) {
    BackendDescriptor d;
    d.name = entry->name;
    d.summary = "plugin: " + (entry->summary.empty() ? std::string("(no summary)") : entry->summary);
    d.origin = path;
    d.caps = caps_of(entry->fields);
    d.validate_options = [name = entry->name](const AttentionSpec& spec) { return check_extra_keys(spec, name, {}); };
    d.create = [library, entry, caps = d.caps](const BackendInit& init) -> Result<std::unique_ptr<Backend>> {
      return std::unique_ptr<Backend>(std::make_unique<PluginBackend>(library, entry, caps, init));
    };
    descriptors.push_back(std::move(d));
  }
  std::vector<std::string> names;
  for (auto& d : descriptors) {
    std::string name = d.name;
    // Names were checked above; a registration racing with this one can still take a name.
    DIFFATTN_RETURN_IF_ERROR(registry.add(std::move(d)));
    names.push_back(std::move(name));
  }
  return names;
}

}  // namespace diffattn
