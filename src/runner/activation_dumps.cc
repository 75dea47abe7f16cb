#include "runner/activation_dumps.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/npy.h"
#include "kernels/cpu/half_convert.h"

namespace diffattn::runner {
namespace {

namespace fs = std::filesystem;

bool has_qkv(const fs::path& dir) {
  return fs::is_regular_file(dir / "q.npy") && fs::is_regular_file(dir / "k.npy") && fs::is_regular_file(dir / "v.npy");
}

float element(const npy::Array& a, std::int64_t i) {
  const std::byte* p = a.data.data();
  switch (a.type) {
    case npy::ElementType::kFloat16: {
      std::uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return cpu::half_to_float(h);
    }
    case npy::ElementType::kUInt16: {  // bfloat16 bits, as diffattn attend stores them
      std::uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return cpu::bf16_to_float(h);
    }
    case npy::ElementType::kFloat64: {
      double d;
      std::memcpy(&d, p + i * 8, 8);
      return static_cast<float>(d);
    }
    default: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
  }
}

Result<HostTensor> load_operand(const fs::path& path, DType dtype) {
  DIFFATTN_ASSIGN_OR_RETURN(npy::Array a, npy::read_file(path.string()));
  const bool floating = a.type == npy::ElementType::kFloat32 || a.type == npy::ElementType::kFloat16 ||
                        a.type == npy::ElementType::kUInt16 || a.type == npy::ElementType::kFloat64;
  if (!floating)
    return InvalidInput(path.string() + " holds " + std::string(npy::descr(a.type)) +
                        "; activation dumps must be float32, float16, float64 or uint16 (bfloat16 bits)");
  if (a.shape.size() != 4)
    return InvalidInput(path.string() + " has shape " + a.shape_string() +
                        "; activation dumps are [batch, tokens, heads, head_size]");
  HostTensor t(dtype, {a.shape[0], a.shape[1], a.shape[2], a.shape[3]});
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const float x = element(a, i);
    if (!std::isfinite(x))
      return InvalidInput(path.string() + " holds a non-finite value at flat index " + std::to_string(i) +
                          "; dump activations from a healthy step");
    t.set(i, x);
  }
  return t;
}

Status check_against_role(const fs::path& dir, const QkvTensors& t, const ModelRole& role) {
  const auto& q = t.q.shape();
  const auto& k = t.k.shape();
  const auto& v = t.v.shape();
  auto mismatch = [&](const std::string& what) {
    return InvalidInput("dump " + dir.string() + " does not fit role '" + role.role + "' (" +
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

}  // namespace

Result<std::vector<std::string>> find_role_dumps(const std::string& activations_dir, const std::string& role) {
  std::error_code ec;
  if (!fs::is_directory(activations_dir, ec))
    return InvalidInput("--activations " + activations_dir + " is not a folder; give the folder holding <role>/q.npy, k.npy, v.npy");
  const fs::path role_dir = fs::path(activations_dir) / role;
  std::vector<std::string> dirs;
  if (!fs::is_directory(role_dir, ec)) return dirs;
  if (has_qkv(role_dir)) dirs.push_back(role_dir.string());
  for (const auto& entry : fs::directory_iterator(role_dir, ec))
    if (entry.is_directory() && has_qkv(entry.path())) dirs.push_back(entry.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

Result<QkvTensors> load_qkv_dump(const std::string& dir, const ModelRole& role, DType dtype) {
  const fs::path d(dir);
  QkvTensors t;
  DIFFATTN_ASSIGN_OR_RETURN(t.q, load_operand(d / "q.npy", dtype));
  DIFFATTN_ASSIGN_OR_RETURN(t.k, load_operand(d / "k.npy", dtype));
  DIFFATTN_ASSIGN_OR_RETURN(t.v, load_operand(d / "v.npy", dtype));
  DIFFATTN_RETURN_IF_ERROR(check_against_role(d, t, role));
  return t;
}

}  // namespace diffattn::runner
