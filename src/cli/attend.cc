// `diffattn attend`: one attention call on .npy arrays, through an attention layer built by
// Attention::Create for --role (default "self"), so per-role configuration applies. Bad input exits
// non-zero with a message and writes no file.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
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
#include "cli/output_paths.h"
#include "common/npy.h"
#include "common/staged_files.h"
#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/log.h"
#include "diffattn/platform.h"
#include "diffattn/problem.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/score_range.h"
#include "runner/device_buffers.h"
#include "runner/report_format.h"

namespace diffattn::cli {
namespace {

constexpr std::string_view kAttendFlags =
    "--q, --k, --v, --out (required), --backend, --role, --mask, --scale, --causal, --dtype, --lse, --bf16-bits, "
    "--video, --layer-index and the common flags";

constexpr std::string_view kAttendHelp =
    "usage: diffattn attend [--backend NAME] [--role ROLE[:CATEGORY]] --q Q.npy --k K.npy --v V.npy\n"
    "                       [--mask M.npy] [--scale S] [--causal] [--dtype float32|float16|bfloat16]\n"
    "                       --out OUT.npy [--lse LSE.npy] [--bf16-bits] [--video F,H,W[,BEFORE,AFTER]]\n"
    "                       [--layer-index N]\n"
    "\n"
    "Runs one attention call on arrays from .npy files and writes the result. q is [B, Sq, Hq, D], k is\n"
    "[B, Skv, Hkv, D], v is [B, Skv, Hkv, Dv] (Hq a multiple of Hkv); out is written as [B, Sq, Hq, Dv] in\n"
    "the call's dtype (bfloat16 as float32, which holds it exactly and NumPy reads) and lse as float32\n"
    "[B, Hq, Sq] (natural log; -inf for rows whose keys are all masked).\n"
    "The backend is the one the configuration selects for --role (platform default when none is set);\n"
    "--backend NAME is an explicit choice for that role that fails instead of falling back, and may not be\n"
    "combined with another choice for the same role (--diffusion-attention-backend, default.backend,\n"
    "per_role.<role> or per_role.<category>).\n"
    "\n"
    "  --q, --k, --v FILE       inputs; float32 (<f4), float16 (<f2), float64 (<f8), or bfloat16 stored as\n"
    "                           uint16 (<u2, needs --dtype bfloat16). Floating inputs in another dtype than\n"
    "                           the call's are converted to it, and the log says so\n"
    "  --mask FILE              bool keep-mask, [B, Skv] (key padding) or [B|1, H|1, Sq, Skv]\n"
    "  --scale S                softmax scale (default D^-1/2)\n"
    "  --causal                 causal, top-left aligned as PyTorch's is_causal\n"
    "  --dtype NAME             dtype of the call: float32, float16 or bfloat16 (default: q's; float32 for\n"
    "                           float64 q)\n"
    "  --out FILE, --lse FILE   where to write the output and the log-sum-exp\n"
    "  --bf16-bits              with --dtype bfloat16: write out as the raw bfloat16 bits (uint16, <u2), the\n"
    "                           form the inputs take, instead of float32\n"
    "  --backend NAME           run this backend (an explicit choice for --role)\n"
    "  --role ROLE[:CATEGORY]   the attention role of the layer, with its category (default: self); per_role\n"
    "                           configuration for it applies\n"
    "  --video F,H,W[,BEFORE,AFTER]  the latent video whose tokens the sequence is (frames, height, width, and\n"
    "                           text tokens before and after it in a joint sequence): FASTVIDEO_VSA and\n"
    "                           RAINFUSION_ATTN need it\n"
    "  --layer-index N          the model's layer of this call (RAINFUSION_ATTN's skip_layers)\n"
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
  bool bf16_bits = false;
  RoleFlag role{"self", std::nullopt};
  std::optional<VideoGeometry> video;
  std::optional<std::int64_t> layer_index;
};

// "F,H,W" or "F,H,W,BEFORE,AFTER": positive extents, non-negative text counts.
Result<VideoGeometry> parse_video(const std::string& text) {
  std::vector<std::int64_t> values;
  std::size_t at = 0;
  bool parsed = !text.empty();
  while (parsed && at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    std::size_t used = 0;
    try {
      values.push_back(std::stoll(part, &used));
    } catch (...) {
      parsed = false;
    }
    parsed = parsed && used == part.size() && !part.empty();
    at = comma + 1;
  }
  if (!parsed || (values.size() != 3 && values.size() != 5) || values[0] <= 0 || values[1] <= 0 || values[2] <= 0 ||
      (values.size() == 5 && (values[3] < 0 || values[4] < 0)))
    return UsageError("--video '" + text + "' is not FRAMES,HEIGHT,WIDTH[,TEXT_BEFORE,TEXT_AFTER] with positive "
                      "extents; pass e.g. --video 21,30,52 (the latent after patchifying)");
  VideoGeometry g{values[0], values[1], values[2]};
  if (values.size() == 5) g.text_before = values[3], g.text_after = values[4];
  return g;
}

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
  DIFFATTN_ASSIGN_OR_RETURN(flags.bf16_bits, reader.take_switch("--bf16-bits"));
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> role, reader.take_value("--role"));
  if (role) {
    DIFFATTN_ASSIGN_OR_RETURN(flags.role, parse_role_flag(*role));
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> video, reader.take_value("--video"));
  if (video) {
    DIFFATTN_ASSIGN_OR_RETURN(flags.video, parse_video(*video));
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> layer_index, reader.take_value("--layer-index"));
  if (layer_index) {
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(*layer_index, &used);
    } catch (...) {
      used = 0;
    }
    if (used != layer_index->size() || layer_index->empty() || value < 0)
      return UsageError("--layer-index '" + *layer_index + "' is not a non-negative integer; pass e.g. --layer-index 3");
    flags.layer_index = value;
  }
  DIFFATTN_RETURN_IF_ERROR(reader.expect_empty("attend", kAttendFlags));
  if (flags.bf16_bits && (!flags.dtype || parse_dtype(*flags.dtype) != DType::kBFloat16))
    return UsageError("--bf16-bits writes bfloat16 output as raw bits; it needs --dtype bfloat16");
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

// The largest finite value of an attention dtype.
double largest_finite(DType dtype) {
  if (dtype == DType::kFloat16) return 65504.0;
  if (dtype == DType::kBFloat16) return 3.3895313892515355e38;
  return std::numeric_limits<float>::max();
}

// A finite value the call dtype cannot hold would turn into Inf on conversion; say so, not "holds Inf".
Status check_fits_dtype(double x, DType dtype, const std::string& path, std::size_t index) {
  if (!std::isfinite(x) || std::fabs(x) <= largest_finite(dtype)) return Status::Ok();
  char text[64];
  std::snprintf(text, sizeof text, "%.6g at flat index %zu is finite but outside %s's range (largest %.6g)", x, index,
                std::string(dtype_name(dtype)).c_str(), largest_finite(dtype));
  return InvalidInput(path + " holds " + text + "; scale the input into range before the call");
}

bool is_floating(npy::ElementType type) {
  return type == npy::ElementType::kFloat32 || type == npy::ElementType::kFloat16 ||
         type == npy::ElementType::kFloat64;
}

double stored_value(const npy::Array& array, std::size_t i) {
  switch (array.type) {
    case npy::ElementType::kFloat64: return reinterpret_cast<const double*>(array.data.data())[i];
    case npy::ElementType::kFloat16: return cpu::half_to_float(reinterpret_cast<const std::uint16_t*>(array.data.data())[i]);
    default: return reinterpret_cast<const float*>(array.data.data())[i];
  }
}

// Converts a floating array in another dtype to the call's, saying so in the log; uint16 (bfloat16
// bits) and non-floating arrays in another dtype are refused, as their meaning is not a float.
Status conform(npy::Array& array, DType dtype, const std::string& path) {
  const npy::ElementType want = storage_of(dtype);
  if (array.type == want) return Status::Ok();
  if (!is_floating(array.type))
    return InvalidInput(path + " holds " + stored_name(array.type) + " but the call runs in " +
                        std::string(dtype_name(dtype)) + " (stored as " + stored_name(want) + "); save " + path +
                        " as a floating array (float32, float16, float64) or pass --dtype to match");
  const auto n = static_cast<std::size_t>(array.numel());
  std::vector<std::byte> converted(n * npy::element_size(want));
  for (std::size_t i = 0; i < n; ++i) {
    const double x = stored_value(array, i);
    DIFFATTN_RETURN_IF_ERROR(check_fits_dtype(x, dtype, path, i));
    const auto f = static_cast<float>(x);
    if (dtype == DType::kFloat32) {
      reinterpret_cast<float*>(converted.data())[i] = f;
    } else {
      reinterpret_cast<std::uint16_t*>(converted.data())[i] =
          dtype == DType::kFloat16 ? cpu::float_to_half(f) : cpu::float_to_bf16(f);
    }
  }
  log_info("attend: converted " + path + " from " + stored_name(array.type) + " to " + std::string(dtype_name(dtype)) +
           ", the call's dtype");
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
  p.video = flags.video;
  if (flags.layer_index) {
    DenoisingStep step;
    step.layer = *flags.layer_index;
    p.denoising = step;
  }

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

// --backend is one explicit choice for the role; another for the same role would silently lose.
Status check_backend_flag_conflicts(const AttendFlags& flags, const AttentionConfig& config) {
  const std::string backend = "--backend " + *flags.backend;
  if (config.default_spec && config.default_origin == DefaultOrigin::kShorthand)
    return UsageError(backend + " and --diffusion-attention-backend " + config.default_spec->backend +
                      " both choose attend's backend; give one of them (--backend for this call)");
  if (config.default_spec && config.default_origin == DefaultOrigin::kConfig)
    return UsageError(backend + " and default.backend " + config.default_spec->backend +
                      " (--diffusion-attention-config) both choose attend's backend; drop default.backend or --backend");
  for (const std::optional<std::string>& key : {std::optional<std::string>(flags.role.role), flags.role.category}) {
    if (!key) continue;
    const auto it = config.per_role.find(*key);
    if (it == config.per_role.end()) continue;
    return UsageError(backend + " and per_role." + *key + ".backend " + it->second.backend +
                      " (--diffusion-attention-config) both choose the backend of role '" + flags.role.role +
                      "'; drop per_role." + *key + " or --backend");
  }
  return Status::Ok();
}

// The configuration the call resolves with: the common flags, and --backend as the role's entry.
Result<AttentionConfig> attend_config(const AttendFlags& flags, const CommonOptions& options) {
  DIFFATTN_ASSIGN_OR_RETURN(AttentionConfig config, config_from_options(options));
  if (!flags.backend) return config;
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<AttentionSpec> spec,
                            spec_from_json(nlohmann::json(*flags.backend), "--backend", global_registry()));
  if (!spec) return config;  // "auto": no opinion
  DIFFATTN_RETURN_IF_ERROR(check_backend_flag_conflicts(flags, config));
  config.per_role[flags.role.role] = *spec;
  return config;
}

Result<Attention> build_layer(const AttendFlags& flags, const AttentionConfig& config, const PlatformInfo& info,
                              const AttentionProblem& p) {
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(p.q.size(2));
  desc.num_kv_heads = static_cast<int>(p.k.size(2));
  desc.head_size = static_cast<int>(p.q.size(3));
  desc.scale = p.scale;
  desc.causal = p.causal;
  desc.role = flags.role.role;
  desc.category = flags.role.category;
  // A call without a mask meets the mask-free contract under which TRTLLM_ATTN may be a default.
  desc.traits.allows_trtllm_default = !p.mask.has_value();
  Selector selector(make_platform(info, global_registry()), &global_registry());
  return Attention::Create(desc, config, selector);
}

// Copies the views' storage to the GPU, runs there, and copies out and lse back.
Status run_on_device(const Attention& layer, Inputs& in) {
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
  DIFFATTN_RETURN_IF_ERROR(layer.forward(device, nullptr));
  // out and lse were staged last: the final buffers.
  const std::size_t out_index = 3 + (device.mask ? 1 : 0);
  DIFFATTN_RETURN_IF_ERROR(buffers[out_index].download(in.problem.out.data, in.out_storage.size()));
  if (device.lse)
    DIFFATTN_RETURN_IF_ERROR(buffers[out_index + 1].download(in.problem.lse->data, in.lse_storage.size() * sizeof(float)));
  return Status::Ok();
}

// bfloat16 output as float32 (exact; NumPy has no bfloat16 dtype), unless --bf16-bits asks for the bits.
npy::Array output_array(const AttendFlags& flags, Inputs& in) {
  const AttentionProblem& p = in.problem;
  npy::Array out;
  out.type = storage_of(in.dtype);
  out.shape = {p.out.size(0), p.out.size(1), p.out.size(2), p.out.size(3)};
  out.data = std::move(in.out_storage);
  if (in.dtype != DType::kBFloat16 || flags.bf16_bits) return out;
  const auto n = static_cast<std::size_t>(out.numel());
  std::vector<std::byte> widened(n * sizeof(float));
  for (std::size_t i = 0; i < n; ++i)
    reinterpret_cast<float*>(widened.data())[i] = cpu::bf16_to_float(reinterpret_cast<const std::uint16_t*>(out.data.data())[i]);
  out.data = std::move(widened);
  out.type = npy::ElementType::kFloat32;
  log_info("attend: wrote the bfloat16 output to " + flags.out +
           " as float32 (exact); pass --bf16-bits for the raw bits as uint16");
  return out;
}

nlohmann::json shape_array(const TensorView& view) {
  nlohmann::json dims = nlohmann::json::array();
  for (int i = 0; i < view.ndim; ++i) dims.push_back(view.size(i));
  return dims;
}

// out and lse are written together: both files appear, or neither changes.
Status write_outputs(const AttendFlags& flags, Inputs& in) {
  const AttentionProblem& p = in.problem;
  const npy::Array out = output_array(flags, in);
  DIFFATTN_ASSIGN_OR_RETURN(const std::string out_header, npy::file_header(out));
  StagedFiles files;
  DIFFATTN_RETURN_IF_ERROR(files.stage(flags.out, {out_header, npy::data_bytes(out)}));
  npy::Array lse;
  std::string lse_header;
  if (flags.lse) {
    lse.type = npy::ElementType::kFloat32;
    lse.shape = {p.lse->size(0), p.lse->size(1), p.lse->size(2)};
    const auto* bytes = reinterpret_cast<const std::byte*>(in.lse_storage.data());
    lse.data.assign(bytes, bytes + in.lse_storage.size() * sizeof(float));
    DIFFATTN_ASSIGN_OR_RETURN(lse_header, npy::file_header(lse));
    DIFFATTN_RETURN_IF_ERROR(files.stage(*flags.lse, {lse_header, npy::data_bytes(lse)}));
  }
  return files.commit();
}

// Outputs must not overwrite an input or each other, and their folders must take files.
Status check_attend_paths(const AttendFlags& flags) {
  std::vector<FlagPath> inputs = {{"--q", flags.q}, {"--k", flags.k}, {"--v", flags.v}};
  if (flags.mask) inputs.push_back({"--mask", *flags.mask});
  std::vector<FlagPath> outputs = {{"--out", flags.out}};
  if (flags.lse) outputs.push_back({"--lse", *flags.lse});
  return check_output_paths(inputs, outputs);
}

int attend_with_options(std::vector<std::string>& args, const CommonOptions& options) {
  auto flags = take_attend_flags(args);
  if (!flags.ok()) return report_error(flags.status(), options.json);
  // Usage conflicts are reported before any input is read.
  const Status paths = check_attend_paths(*flags);
  if (!paths.ok()) return report_error(paths, options.json);
  auto config = attend_config(*flags, options);
  if (!config.ok()) return report_error(config.status(), options.json);
  auto info = platform_from_options(options);
  if (!info.ok()) return report_error(info.status(), options.json);
  auto inputs = load_inputs(*flags);
  if (!inputs.ok()) return report_error(inputs.status(), options.json);
  Inputs& in = **inputs;
  auto layer = build_layer(*flags, *config, *info, in.problem);
  if (!layer.ok()) return report_error(layer.status(), options.json);
  // The CPU kernels check this themselves; device kernels cannot, but the arrays are still on the host here.
  if (info->kind == PlatformKind::kCuda) {
    const Status fits = check_scores_fit_float32(in.problem);
    if (!fits.ok()) return report_error(fits, options.json);
  }

  const auto start = std::chrono::steady_clock::now();
  const Status ran = info->kind == PlatformKind::kCuda ? run_on_device(*layer, in) : layer->forward(in.problem, nullptr);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!ran.ok()) return report_error(ran, options.json);
  const Status written = write_outputs(*flags, in);
  if (!written.ok()) return report_error(written, options.json);

  const Resolution& r = layer->resolution();
  const AttentionProblem& p = in.problem;
  if (options.json) {
    nlohmann::json doc = {{"backend", r.backend},
                          {"source", std::string(source_name(r.source))},
                          {"role", r.role},
                          {"platform", platform_to_json(*info)},
                          {"dtype", std::string(dtype_name(in.dtype))},
                          {"q", shape_array(p.q)},
                          {"k", shape_array(p.k)},
                          {"v", shape_array(p.v)},
                          {"out", flags->out},
                          {"out_shape", shape_array(p.out)},
                          {"milliseconds", ms}};
    doc["lse"] = flags->lse ? nlohmann::json(*flags->lse) : nlohmann::json(nullptr);
    print_json(doc);
  } else {
    std::cout << r.backend << " (" << source_name(r.source) << ", role " << r.role << ") on " << info->describe() << ": q "
              << p.q.shape_string() << ", k " << p.k.shape_string() << ", v " << p.v.shape_string() << ", "
              << dtype_name(in.dtype) << (p.causal ? ", causal" : "") << (p.mask ? ", masked" : "") << " -> "
              << flags->out << " " << p.out.shape_string() << (flags->lse ? " and " + *flags->lse : "") << " in "
              << runner::fmt_ms(ms) << "\n";
  }
  return 0;
}

}  // namespace

int run_attend(std::vector<std::string> args) { return run_subcommand(args, kAttendHelp, attend_with_options); }

}  // namespace diffattn::cli
