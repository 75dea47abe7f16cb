#include "runner/activation_dumps.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/npy.h"
#include "common/safetensors.h"
#include "common/strings.h"
#include "runner/host_tensor.h"

namespace diffattn::runner {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOperands[] = {"q", "k", "v"};
constexpr const char* kLayoutHint =
    "give the folder holding <role>/q.npy, k.npy, v.npy or <role>/qkv.safetensors (tensors q, k, v)";

// The files of one folder that form its sample.
struct SampleFiles {
  bool npy = false;      // q.npy, k.npy and v.npy
  fs::path safetensors;  // empty: none
};

// A folder with some of q.npy, k.npy, v.npy is a broken sample, never one to skip or generate for.
std::string incomplete_npy_message(const fs::path& dir, const std::vector<std::string>& present) {
  std::vector<std::string> missing;
  for (const char* op : kOperands) {
    const std::string file = std::string(op) + ".npy";
    if (std::find(present.begin(), present.end(), file) == present.end()) missing.push_back(file);
  }
  return dir.string() + " holds " + join_as_sentence(present) + " but no " + join_as_sentence(missing) +
         "; a sample needs all of q.npy, k.npy and v.npy (or one qkv.safetensors)";
}

// Refuses folders whose sample is ambiguous: .npy files next to a safetensors file, or several
// safetensors files of which none is qkv.safetensors.
Result<SampleFiles> sample_files(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> npy_files, safetensors_files;
  for (const char* op : kOperands)
    if (fs::is_regular_file(dir / (std::string(op) + ".npy"), ec)) npy_files.push_back(std::string(op) + ".npy");
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec))
      safetensors_files.push_back(entry.path().filename().string());
  std::sort(safetensors_files.begin(), safetensors_files.end());

  SampleFiles files;
  files.npy = npy_files.size() == 3;
  if (!npy_files.empty() && !files.npy) return InvalidInput(incomplete_npy_message(dir, npy_files));
  if (safetensors_files.empty()) return files;
  const bool has_qkv = std::find(safetensors_files.begin(), safetensors_files.end(), "qkv.safetensors") != safetensors_files.end();
  if (!has_qkv && safetensors_files.size() > 1)
    return InvalidInput(dir.string() + " holds several safetensors files (" + join_as_sentence(safetensors_files) +
                        ") and no qkv.safetensors; a folder holds one sample: rename the one to load to qkv.safetensors, "
                        "or move each into its own subfolder");
  const std::string chosen = has_qkv ? "qkv.safetensors" : safetensors_files.front();
  if (!npy_files.empty())
    return InvalidInput(dir.string() + " holds both " + join_as_sentence(npy_files) + " and " + chosen +
                        " for one sample; keep one format: remove " + join_as_sentence(npy_files) + ", or remove " + chosen +
                        " (or move it into its own subfolder)");
  files.safetensors = dir / chosen;
  return files;
}

Status check_qkv_tensors(const std::string& file, const safetensors::Header& header) {
  std::vector<std::string> missing;
  for (const char* op : kOperands)
    if (!header.tensors.count(op)) missing.push_back(std::string("\"") + op + "\"");
  if (missing.empty()) return Status::Ok();
  return InvalidInput(file + " has no tensor named " + join_as_sentence(missing) + "; it holds " + safetensors::tensor_names(header) +
                      "; an activation dump needs tensors named q, k and v, each [batch, tokens, heads, head_size]");
}

// `what` names the array in messages; `data` holds the C-order elements of `shape` in `stored`.
Result<HostTensor> to_host_tensor(const std::string& what, DType stored, const std::vector<std::int64_t>& shape,
                                  const std::string& shape_text, const std::byte* data, DType dtype) {
  if (shape.size() != 4)
    return InvalidInput(what + " has shape " + shape_text + "; activation dumps are [batch, tokens, heads, head_size]");
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    return InvalidInput(what + " has shape " + shape_text + ", which holds no elements; dump a step that has tokens");
  HostTensor t(dtype, {shape[0], shape[1], shape[2], shape[3]});
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const float x = read_as_float(stored, data, i);
    if (!std::isfinite(x))
      return InvalidInput(what + " holds a non-finite value at flat index " + std::to_string(i) +
                          "; dump activations from a healthy step");
    t.set(i, x);
  }
  return t;
}

Result<HostTensor> load_npy_operand(const fs::path& path, DType dtype) {
  DIFFATTN_ASSIGN_OR_RETURN(npy::Array a, npy::read_file(path.string()));
  DType stored;
  switch (a.type) {
    case npy::ElementType::kFloat32: stored = DType::kFloat32; break;
    case npy::ElementType::kFloat16: stored = DType::kFloat16; break;
    case npy::ElementType::kUInt16: stored = DType::kBFloat16; break;  // bfloat16 bits, as diffattn attend stores them
    case npy::ElementType::kFloat64: stored = DType::kFloat64; break;
    default:
      return InvalidInput(path.string() + " holds " + std::string(npy::descr(a.type)) +
                          "; activation dumps must be float32, float16, float64 or uint16 (bfloat16 bits)");
  }
  return to_host_tensor(path.string(), stored, a.shape, a.shape_string(), a.data.data(), dtype);
}

Result<QkvTensors> load_safetensors_dump(const fs::path& file, DType dtype) {
  DIFFATTN_ASSIGN_OR_RETURN(safetensors::Header header, safetensors::read_header(file.string()));
  DIFFATTN_RETURN_IF_ERROR(check_qkv_tensors(file.string(), header));
  QkvTensors t;
  HostTensor* outputs[] = {&t.q, &t.k, &t.v};
  for (int i = 0; i < 3; ++i) {
    const safetensors::TensorInfo& info = header.tensors.at(kOperands[i]);
    DIFFATTN_ASSIGN_OR_RETURN(std::vector<std::byte> data, safetensors::read_tensor_data(file.string(), header, kOperands[i]));
    DIFFATTN_ASSIGN_OR_RETURN(*outputs[i], to_host_tensor(file.string() + " tensor \"" + kOperands[i] + "\"", info.dtype,
                                                          info.shape, info.shape_string(), data.data(), dtype));
  }
  return t;
}

Status check_against_role(const fs::path& dump, const QkvTensors& t, const ModelRole& role) {
  const auto& q = t.q.shape();
  const auto& k = t.k.shape();
  const auto& v = t.v.shape();
  auto mismatch = [&](const std::string& what) {
    return InvalidInput("dump " + dump.string() + " does not fit role '" + role.role + "' (" +
                        std::to_string(role.num_heads) + " heads, " + std::to_string(role.num_kv_heads) + " kv heads, head size " +
                        std::to_string(role.head_size) + "): " + what);
  };
  if (q[2] != role.num_heads || q[3] != role.head_size) return mismatch("q is " + t.q.shape_string());
  if (k[2] != role.num_kv_heads || k[3] != role.head_size) return mismatch("k is " + t.k.shape_string());
  if (v[0] != k[0] || v[1] != k[1] || v[2] != k[2] || v[3] != role.head_size)
    return mismatch("v " + t.v.shape_string() + " must match k " + t.k.shape_string());
  if (q[0] != k[0]) return mismatch("q and k batch sizes differ");
  return Status::Ok();
}

// Whether `dir` holds a sample; a safetensors sample's header is checked here, before any run.
Result<bool> holds_sample(const fs::path& dir) {
  DIFFATTN_ASSIGN_OR_RETURN(SampleFiles files, sample_files(dir));
  if (files.safetensors.empty()) return files.npy;
  DIFFATTN_ASSIGN_OR_RETURN(safetensors::Header header, safetensors::read_header(files.safetensors.string()));
  DIFFATTN_RETURN_IF_ERROR(check_qkv_tensors(files.safetensors.string(), header));
  return true;
}

}  // namespace

Result<std::vector<std::string>> find_role_dumps(const std::string& activations_dir, const std::string& role) {
  std::error_code ec;
  if (!fs::is_directory(activations_dir, ec)) return InvalidInput("--activations " + activations_dir + " is not a folder; " + kLayoutHint);
  const fs::path role_dir = fs::path(activations_dir) / role;
  std::vector<std::string> dirs;
  if (!fs::is_directory(role_dir, ec)) return dirs;
  DIFFATTN_ASSIGN_OR_RETURN(const bool role_dir_holds_sample, holds_sample(role_dir));
  if (role_dir_holds_sample) dirs.push_back(role_dir.string());
  for (const auto& entry : fs::directory_iterator(role_dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    DIFFATTN_ASSIGN_OR_RETURN(const bool sample, holds_sample(entry.path()));
    if (sample) dirs.push_back(entry.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty())
    return InvalidInput(role_dir.string() + " holds no q/k/v sample (no q.npy, k.npy, v.npy or .safetensors file, in "
                        "it or in a subfolder); " + kLayoutHint);
  return dirs;
}

Result<QkvTensors> load_qkv_dump(const std::string& dir, const ModelRole& role, DType dtype) {
  const fs::path d(dir);
  DIFFATTN_ASSIGN_OR_RETURN(SampleFiles files, sample_files(d));
  QkvTensors t;
  if (!files.safetensors.empty()) {
    DIFFATTN_ASSIGN_OR_RETURN(t, load_safetensors_dump(files.safetensors, dtype));
    DIFFATTN_RETURN_IF_ERROR(check_against_role(files.safetensors, t, role));
    return t;
  }
  DIFFATTN_ASSIGN_OR_RETURN(t.q, load_npy_operand(d / "q.npy", dtype));
  DIFFATTN_ASSIGN_OR_RETURN(t.k, load_npy_operand(d / "k.npy", dtype));
  DIFFATTN_ASSIGN_OR_RETURN(t.v, load_npy_operand(d / "v.npy", dtype));
  DIFFATTN_RETURN_IF_ERROR(check_against_role(d, t, role));
  return t;
}

}  // namespace diffattn::runner
