// `diffattn attend`: one attention call on .npy arrays, through the backend the configuration (or
// --backend) selects for role "self". Bad input exits non-zero with a message and writes no file.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "common/npy.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/problem.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/cpu/half_convert.h"
#include "runner/device_buffers.h"

namespace diffattn::cli {
namespace {

constexpr std::string_view kAttendFlags =
    "--q, --k, --v, --out (required), --backend, --mask, --scale, --causal, --dtype, --lse and the common flags";

constexpr std::string_view kAttendHelp =
    "usage: diffattn attend [--backend NAME] --q Q.npy --k K.npy --v V.npy [--mask M.npy] [--scale S]\n"
    "                       [--causal] [--dtype float32|float16|bfloat16] --out OUT.npy [--lse LSE.npy]\n"
    "\n"
    "Runs one attention call on arrays from .npy files and writes the result. q is [B, Sq, Hq, D], k is\n"
    "[B, Skv, Hkv, D], v is [B, Skv, Hkv, Dv] (Hq a multiple of Hkv); out is written as [B, Sq, Hq, Dv] in\n"
    "the inputs' dtype and lse as float32 [B, Hq, Sq] (natural log; -inf for rows whose keys are all masked).\n"
    "The backend is the one the configuration selects for role \"self\" (platform default when none is set);\n"
    "--backend NAME is an explicit choice that fails instead of falling back.\n"
    "\n"
    "  --q, --k, --v FILE       inputs; float32 (<f4), float16 (<f2), bfloat16 stored as uint16 (<u2, needs\n"
    "                           --dtype bfloat16) or float64 (<f8, converted to --dtype, default float32)\n"
    "  --mask FILE              bool keep-mask, [B, Skv] (key padding) or [B|1, H|1, Sq, Skv]\n"
    "  --scale S                softmax scale (default D^-1/2)\n"
    "  --causal                 causal, top-left aligned as PyTorch's is_causal\n"
    "  --dtype NAME             dtype of the call: float32, float16 or bfloat16 (default: q's)\n"
    "  --out FILE, --lse FILE   where to write the output and the log-sum-exp\n"
    "  --backend NAME           run this backend (an explicit choice for role \"self\")\n"
    "\n"
    "Inputs with NaN or Inf, mismatched shapes or dtypes, or unreadable files are refused and nothing is\n"
    "written.\n"
    "\n"
    "Common flags:\n";

struct AttendFlags {
  std::string q, k, v, out;
  std::optional<std::string> mask, lse, backend, dtype;
  std::optional<float> scale;
  bool causal = false;
};

Result<std::string> take_required(ArgReader& reader, std::string_view flag) {
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> value, reader.take_value(flag));
  if (!value || value->empty())
    return UsageError("diffattn attend needs " + std::string(flag) + " FILE; see diffattn attend --help.");
  return *value;
}

Result<float> parse_scale(const std::string& text) {
  std::size_t used = 0;
  float value = 0.0f;
  bool parsed = true;
  try {
    value = std::stof(text, &used);
  } catch (...) {
    parsed = false;
  }
  if (!parsed || used != text.size() || !std::isfinite(value))
    return UsageError("--scale '" + text + "' is not a finite number; pass e.g. --scale 0.088");
  return value;
}

Result<AttendFlags> take_attend_flags(std::vector<std::string>& args) {
  ArgReader reader(args);
  AttendFlags flags;
  DIFFATTN_ASSIGN_OR_RETURN(flags.q, take_required(reader, "--q"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.k, take_required(reader, "--k"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.v, take_required(reader, "--v"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.out, take_required(reader, "--out"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.mask, reader.take_value("--mask"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.lse, reader.take_value("--lse"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.backend, reader.take_value("--backend"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.dtype, reader.take_value("--dtype"));
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> scale, reader.take_value("--scale"));
  if (scale) {
    DIFFATTN_ASSIGN_OR_RETURN(flags.scale, parse_scale(*scale));
  }
  DIFFATTN_ASSIGN_OR_RETURN(flags.causal, reader.take_switch("--causal"));
  DIFFATTN_RETURN_IF_ERROR(reader.expect_empty("attend", kAttendFlags));
  return flags;
}

// How an attention dtype is stored in a .npy file.
npy::ElementType storage_of(DType dtype) {
  if (dtype == DType::kFloat16) return npy::ElementType::kFloat16;
  if (dtype == DType::kBFloat16) return npy::ElementType::kUInt16;
  return npy::ElementType::kFloat32;
}

std::string stored_name(npy::ElementType type) {
  switch (type) {
    case npy::ElementType::kFloat32: return "float32 (<f4)";
    case npy::ElementType::kFloat16: return "float16 (<f2)";
    case npy::ElementType::kUInt16: return "uint16 (<u2)";
    case npy::ElementType::kFloat64: return "float64 (<f8)";
    case npy::ElementType::kBool: return "bool (|b1)";
    case npy::ElementType::kInt32: return "int32 (<i4)";
  }
  return "unknown";
}

Result<DType> call_dtype(const AttendFlags& flags, const npy::Array& q) {
  if (flags.dtype) {
    const auto dtype = parse_dtype(*flags.dtype);
    if (!dtype || (*dtype != DType::kFloat32 && *dtype != DType::kFloat16 && *dtype != DType::kBFloat16))
      return UsageError("--dtype '" + *flags.dtype + "' is not float32, float16 or bfloat16");
    return *dtype;
  }
  switch (q.type) {
    case npy::ElementType::kFloat32:
    case npy::ElementType::kFloat64: return DType::kFloat32;
    case npy::ElementType::kFloat16: return DType::kFloat16;
    case npy::ElementType::kUInt16:
      return InvalidInput(flags.q + " holds uint16; if it stores bfloat16 values, pass --dtype bfloat16");
    default:
      return InvalidInput(flags.q + " holds " + stored_name(q.type) +
                          "; attention inputs are float32, float16 or bfloat16 (as uint16)");
  }
}

// Converts float64 arrays to the call's dtype; any other mismatch is an error.
Status conform(npy::Array& array, DType dtype, const std::string& path) {
  const npy::ElementType want = storage_of(dtype);
  if (array.type == want) return Status::Ok();
  if (array.type != npy::ElementType::kFloat64)
    return InvalidInput(path + " holds " + stored_name(array.type) + " but the call runs in " +
                        std::string(dtype_name(dtype)) + " (stored as " + stored_name(want) + "); save " + path +
                        " in that dtype or pass --dtype to match");
  const auto n = static_cast<std::size_t>(array.numel());
  const auto* src = reinterpret_cast<const double*>(array.data.data());
  std::vector<std::byte> converted(n * npy::element_size(want));
  for (std::size_t i = 0; i < n; ++i) {
    const auto f = static_cast<float>(src[i]);
    if (dtype == DType::kFloat32) {
      reinterpret_cast<float*>(converted.data())[i] = f;
    } else {
      reinterpret_cast<std::uint16_t*>(converted.data())[i] =
          dtype == DType::kFloat16 ? cpu::float_to_half(f) : cpu::float_to_bf16(f);
    }
  }
  array.data = std::move(converted);
  array.type = want;
  return Status::Ok();
}

Result<TensorView> view_of(npy::Array& array, DType dtype, const std::string& path) {
  if (array.shape.size() > static_cast<std::size_t>(kMaxDims))
    return InvalidInput(path + " has rank " + std::to_string(array.shape.size()) + " with shape " +
                        array.shape_string() + "; attention arrays have rank 4 ([B, S, H, D]) or, for masks, 2");
  TensorView v;
  v.data = array.data.data();
  v.dtype = dtype;
  v.ndim = static_cast<int>(array.shape.size());
  std::int64_t stride = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    v.shape[i] = array.shape[static_cast<std::size_t>(i)];
    v.strides[i] = stride;
    stride *= v.shape[i];
  }
  return v;
}

float element_as_float(const TensorView& v, std::int64_t i) {
  switch (v.dtype) {
    case DType::kFloat32: return static_cast<const float*>(v.data)[i];
    case DType::kFloat16: return cpu::half_to_float(static_cast<const std::uint16_t*>(v.data)[i]);
    default: return cpu::bf16_to_float(static_cast<const std::uint16_t*>(v.data)[i]);
  }
}

Status check_finite(const TensorView& v, const std::string& path) {
  const std::int64_t n = v.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = element_as_float(v, i);
    if (!std::isfinite(x))
      return InvalidInput(path + " holds " + (std::isnan(x) ? std::string("NaN") : std::string("Inf")) +
                          " at flat index " + std::to_string(i) + "; attention inputs must be finite");
  }
  return Status::Ok();
}

// The loaded arrays and the problem that views them.
struct Inputs {
  npy::Array q, k, v, mask;
  DType dtype = DType::kFloat32;
  std::vector<std::byte> out_storage;
  std::vector<float> lse_storage;
  AttentionProblem problem;
};

Result<std::unique_ptr<Inputs>> load_inputs(const AttendFlags& flags) {
  auto in = std::make_unique<Inputs>();
  DIFFATTN_ASSIGN_OR_RETURN(in->q, npy::read_file(flags.q));
  DIFFATTN_ASSIGN_OR_RETURN(in->k, npy::read_file(flags.k));
  DIFFATTN_ASSIGN_OR_RETURN(in->v, npy::read_file(flags.v));
  DIFFATTN_ASSIGN_OR_RETURN(in->dtype, call_dtype(flags, in->q));
  AttentionProblem& p = in->problem;
  for (auto [array, view, path] : {std::tuple{&in->q, &p.q, &flags.q}, std::tuple{&in->k, &p.k, &flags.k},
                                   std::tuple{&in->v, &p.v, &flags.v}}) {
    DIFFATTN_RETURN_IF_ERROR(conform(*array, in->dtype, *path));
    DIFFATTN_ASSIGN_OR_RETURN(*view, view_of(*array, in->dtype, *path));
  }
  if (flags.mask) {
    DIFFATTN_ASSIGN_OR_RETURN(in->mask, npy::read_file(*flags.mask));
    if (in->mask.type != npy::ElementType::kBool)
      return InvalidInput(*flags.mask + " holds " + stored_name(in->mask.type) +
                          "; the mask is a bool keep-mask (True keeps the key): save it with dtype=bool");
    DIFFATTN_ASSIGN_OR_RETURN(p.mask, view_of(in->mask, DType::kBool, *flags.mask));
  }
  p.scale = flags.scale;
  p.causal = flags.causal;

  // Output buffers, shaped from the inputs so that validation reports input mistakes by name.
  const bool ranks_ok = p.q.ndim == 4 && p.v.ndim == 4;
  const std::int64_t b = ranks_ok ? p.q.size(0) : 0, sq = ranks_ok ? p.q.size(1) : 0,
                     hq = ranks_ok ? p.q.size(2) : 0, dv = ranks_ok ? p.v.size(3) : 0;
  in->out_storage.resize(static_cast<std::size_t>(b * sq * hq * dv) * dtype_size(in->dtype));
  p.out = TensorView::Contiguous(in->out_storage.data(), in->dtype, {b, sq, hq, dv});
  if (flags.lse) {
    in->lse_storage.resize(static_cast<std::size_t>(b * hq * sq));
    p.lse = TensorView::Contiguous(in->lse_storage.data(), DType::kFloat32, {b, hq, sq});
  }
  DIFFATTN_RETURN_IF_ERROR(validate_problem(p));
  for (auto [view, path] : {std::pair{&p.q, &flags.q}, std::pair{&p.k, &flags.k}, std::pair{&p.v, &flags.v}})
    DIFFATTN_RETURN_IF_ERROR(check_finite(*view, *path));
  return in;
}

struct Selected {
  Resolution resolution;
  std::unique_ptr<Backend> backend;
};

Result<Selected> select_backend(const AttendFlags& flags, const CommonOptions& options, const PlatformInfo& info,
                                const AttentionProblem& p) {
  DIFFATTN_ASSIGN_OR_RETURN(AttentionConfig config, config_from_options(options));
  if (flags.backend) {
    AttentionSpec spec;
    spec.backend = *flags.backend;
    DIFFATTN_RETURN_IF_ERROR(validate_spec(spec, "--backend"));
    config.per_role["self"] = spec;
  }
  Selector selector(make_platform(info, global_registry()), &global_registry());
  const int head_size = static_cast<int>(p.q.size(3));
  Selected selected;
  DIFFATTN_ASSIGN_OR_RETURN(selected.resolution, selector.resolve("self", head_size, config));
  BackendInit init;
  init.num_heads = static_cast<int>(p.q.size(2));
  init.num_kv_heads = static_cast<int>(p.k.size(2));
  init.head_size = head_size;
  init.scale = p.scale;
  init.causal = p.causal;
  init.role = "self";
  init.explicit_choice = selected.resolution.source != ResolutionSource::kPlatform;
  init.spec = selected.resolution.spec;
  init.platform = info;
  DIFFATTN_ASSIGN_OR_RETURN(selected.backend, global_registry().create(selected.resolution.backend, init));
  // The arrays are staged onto the GPU when the platform is CUDA: judge the call where it will run.
  ProblemShape shape = p.shape();
  shape.device = info.kind == PlatformKind::kCuda ? DeviceKind::kCuda : DeviceKind::kCpu;
  const std::vector<std::string> reasons =
      global_registry().find(selected.resolution.backend).value()->unsupported_reasons(shape);
  if (!reasons.empty()) {
    std::string joined;
    for (const auto& r : reasons) joined += (joined.empty() ? "" : "; ") + r;
    return Unsupported(selected.resolution.backend + " cannot run this call: " + joined +
                       "; choose another backend with --backend (TORCH_SDPA runs every valid call)");
  }
  return selected;
}

// Copies the views' storage to the GPU, runs there, and copies out and lse back.
Status run_on_device(Backend& backend, Inputs& in) {
  AttentionProblem device = in.problem;
  std::vector<runner::DeviceBuffer> buffers;
  auto stage = [&buffers](TensorView& view, bool upload) -> Status {
    const std::size_t bytes = static_cast<std::size_t>(view.numel()) * dtype_size(view.dtype);
    DIFFATTN_ASSIGN_OR_RETURN(runner::DeviceBuffer buffer, runner::DeviceBuffer::allocate(bytes ? bytes : 1));
    if (upload) DIFFATTN_RETURN_IF_ERROR(buffer.upload(view.data, bytes));
    view.data = buffer.data();
    view.device = {DeviceKind::kCuda, 0};
    buffers.push_back(std::move(buffer));
    return Status::Ok();
  };
  DIFFATTN_RETURN_IF_ERROR(stage(device.q, true));
  DIFFATTN_RETURN_IF_ERROR(stage(device.k, true));
  DIFFATTN_RETURN_IF_ERROR(stage(device.v, true));
  if (device.mask) DIFFATTN_RETURN_IF_ERROR(stage(*device.mask, true));
  DIFFATTN_RETURN_IF_ERROR(stage(device.out, false));
  if (device.lse) DIFFATTN_RETURN_IF_ERROR(stage(*device.lse, false));
  DIFFATTN_RETURN_IF_ERROR(backend.forward(device, nullptr));
  // out and lse were staged last: the final buffers.
  const std::size_t out_index = 3 + (device.mask ? 1 : 0);
  DIFFATTN_RETURN_IF_ERROR(buffers[out_index].download(in.problem.out.data, in.out_storage.size()));
  if (device.lse)
    DIFFATTN_RETURN_IF_ERROR(buffers[out_index + 1].download(in.problem.lse->data, in.lse_storage.size() * sizeof(float)));
  return Status::Ok();
}

Status write_outputs(const AttendFlags& flags, Inputs& in) {
  const AttentionProblem& p = in.problem;
  npy::Array out;
  out.type = storage_of(in.dtype);
  out.shape = {p.out.size(0), p.out.size(1), p.out.size(2), p.out.size(3)};
  out.data = std::move(in.out_storage);
  DIFFATTN_RETURN_IF_ERROR(npy::write_file(flags.out, out));
  if (!flags.lse) return Status::Ok();
  npy::Array lse;
  lse.type = npy::ElementType::kFloat32;
  lse.shape = {p.lse->size(0), p.lse->size(1), p.lse->size(2)};
  const auto* bytes = reinterpret_cast<const std::byte*>(in.lse_storage.data());
  lse.data.assign(bytes, bytes + in.lse_storage.size() * sizeof(float));
  const Status written = npy::write_file(*flags.lse, lse);
  if (!written.ok()) std::remove(flags.out.c_str());  // all or nothing
  return written;
}

int attend_with_options(std::vector<std::string>& args, const CommonOptions& options) {
  auto flags = take_attend_flags(args);
  if (!flags.ok()) return report_error(flags.status(), options.json);
  auto info = platform_from_options(options);
  if (!info.ok()) return report_error(info.status(), options.json);
  auto inputs = load_inputs(*flags);
  if (!inputs.ok()) return report_error(inputs.status(), options.json);
  Inputs& in = **inputs;
  auto selected = select_backend(*flags, options, *info, in.problem);
  if (!selected.ok()) return report_error(selected.status(), options.json);

  const auto start = std::chrono::steady_clock::now();
  const Status ran = info->kind == PlatformKind::kCuda ? run_on_device(*selected->backend, in)
                                                        : selected->backend->forward(in.problem, nullptr);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!ran.ok()) return report_error(ran, options.json);
  const Status written = write_outputs(*flags, in);
  if (!written.ok()) return report_error(written, options.json);

  const Resolution& r = selected->resolution;
  const AttentionProblem& p = in.problem;
  if (options.json) {
    nlohmann::json doc = {{"backend", r.backend},
                          {"source", std::string(source_name(r.source))},
                          {"platform", platform_to_json(*info)},
                          {"dtype", std::string(dtype_name(in.dtype))},
                          {"q", p.q.shape_string()},
                          {"k", p.k.shape_string()},
                          {"v", p.v.shape_string()},
                          {"out", flags->out},
                          {"milliseconds", ms}};
    doc["lse"] = flags->lse ? nlohmann::json(*flags->lse) : nlohmann::json(nullptr);
    print_json(doc);
  } else {
    std::cout << r.backend << " (" << source_name(r.source) << ") on " << info->describe() << ": q "
              << p.q.shape_string() << ", k " << p.k.shape_string() << ", v " << p.v.shape_string() << ", "
              << dtype_name(in.dtype) << (p.causal ? ", causal" : "") << (p.mask ? ", masked" : "") << " -> "
              << flags->out << " " << p.out.shape_string() << (flags->lse ? " and " + *flags->lse : "") << " in "
              << ms << " ms\n";
  }
  return 0;
}

}  // namespace

int run_attend(std::vector<std::string> args) { return run_subcommand(args, kAttendHelp, attend_with_options); }

}  // namespace diffattn::cli
