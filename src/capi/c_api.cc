// The C interface (include/diffattn/c_api.h) over the C++ API: sessions hold a platform, a
// selector and a parsed configuration; layers hold a resolved backend. Every entry point catches
// everything, so no exception crosses into C, and records its failure in a per-thread message.

#include "common/json_text.h"
#include "capi/capi_internal.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/problem.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "diffattn/status.h"
#include "diffattn/tensor.h"
#include "parallel/in_process_communicator.h"
#include "parallel/nccl_communicator.h"
#include "parallel/parallel_attention.h"

#include <nlohmann/json.hpp>

struct diffattn_comm {
  std::unique_ptr<diffattn::parallel::Communicator> comm;
};

struct diffattn_parallel_layer {
  std::unique_ptr<diffattn::parallel::ParallelAttention> layer;
};

namespace diffattn::capi {
namespace {
thread_local std::string g_last_error;
}  // namespace

void clear_last_error() { g_last_error.clear(); }

diffattn_code fail(const Status& status) {
  g_last_error = status.message();
  return static_cast<diffattn_code>(static_cast<int>(status.code()));
}

diffattn_code fail(ErrorCode code, std::string message) { return fail(Status(code, std::move(message))); }

diffattn_code null_argument(const char* function, const char* name) {
  return fail(ErrorCode::kInvalidInput, std::string(function) + ": " + name + " must not be NULL");
}

diffattn_code return_string(const char* function, const std::string& text, char** out) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy == nullptr) return fail(ErrorCode::kInternal, std::string(function) + ": out of host memory");
  std::memcpy(copy, text.c_str(), text.size() + 1);
  *out = copy;
  return DIFFATTN_OK;
}

const char* last_error() { return g_last_error.c_str(); }

}  // namespace diffattn::capi

namespace {

using diffattn::ErrorCode;
using diffattn::Status;
using diffattn::capi::fail;
using diffattn::capi::guarded;
using diffattn::capi::null_argument;
using diffattn::capi::return_string;

bool is_empty(const char* text) { return text == nullptr || text[0] == '\0'; }

diffattn::Result<diffattn::TensorView> view_of(const DLTensor* tensor, const char* name) {
  auto view = diffattn::from_dlpack(*tensor);
  if (!view.ok()) return Status(view.status().code(), std::string(name) + ": " + view.status().message());
  return view;
}

// The C layer description as the C++ one; `function` names the caller in errors.
diffattn::Result<diffattn::AttentionLayerDesc> layer_desc_from_c(const diffattn_layer_desc& desc, const char* function) {
  diffattn::AttentionLayerDesc d;
  d.num_heads = desc.num_heads;
  d.num_kv_heads = desc.num_kv_heads;
  d.head_size = desc.head_size;
  if (desc.has_scale) {
    if (!(desc.scale > 0.f))
      return Status(ErrorCode::kInvalidInput, std::string(function) + ": scale must be positive, got " +
                                                  std::to_string(desc.scale) + "; set has_scale = 0 for head_size^-1/2");
    d.scale = desc.scale;
  }
  d.causal = desc.causal != 0;
  d.role = desc.role != nullptr ? desc.role : "self";
  if (desc.category != nullptr) d.category = std::string(desc.category);
  d.traits.allows_trtllm_default = desc.allow_trtllm_default != 0;
  return d;
}

}  // namespace

extern "C" {

const char* diffattn_last_error(void) { return diffattn::capi::last_error(); }

const char* diffattn_code_name(diffattn_code code) {
  if (code < DIFFATTN_OK || code > DIFFATTN_INTERNAL) return "unknown";
  // error_code_name returns views of string literals, so data() is NUL-terminated.
  return diffattn::error_code_name(static_cast<ErrorCode>(static_cast<int>(code))).data();
}

const char* diffattn_version(void) { return DIFFATTN_VERSION_STRING; }

diffattn_code diffattn_session_create(const char* platform, const char* config_json, diffattn_session** out) {
  return guarded("diffattn_session_create", [&]() -> diffattn_code {
    if (out == nullptr) return null_argument("diffattn_session_create", "out");
    diffattn::ConfigSources sources;
    if (!is_empty(config_json)) sources.config_json = std::string(config_json);
    auto config =
        diffattn::build_attention_config(sources, diffattn::env_attention_backend(), diffattn::global_registry());
    if (!config.ok()) return fail(config.status());
    auto info = diffattn::load_platform(is_empty(platform) ? "" : platform);
    if (!info.ok()) return fail(info.status());
    auto session = std::make_unique<diffattn_session>();
    session->registry = std::make_unique<diffattn::Registry>();
    diffattn::register_builtin_backends(*session->registry);
    session->platform = diffattn::make_platform(std::move(info).value(), *session->registry);
    session->selector = std::make_unique<diffattn::Selector>(session->platform, session->registry.get());
    session->config = std::move(config).value();
    *out = session.release();
    return DIFFATTN_OK;
  });
}

void diffattn_session_destroy(diffattn_session* session) { delete session; }

diffattn_code diffattn_session_load_plugin(diffattn_session* session, const char* path, char** out_names_json) {
  return guarded("diffattn_session_load_plugin", [&]() -> diffattn_code {
    if (session == nullptr) return null_argument("diffattn_session_load_plugin", "session");
    if (path == nullptr) return null_argument("diffattn_session_load_plugin", "path");
    std::unique_lock lock(session->mu);
    auto names = diffattn::load_plugin(path, *session->registry);
    if (!names.ok()) return fail(names.status());
    // Decisions cached before the load may have refused a name the plugin now provides.
    session->selector = std::make_unique<diffattn::Selector>(session->platform, session->registry.get());
    if (out_names_json == nullptr) return DIFFATTN_OK;
    return return_string("diffattn_session_load_plugin", diffattn::json_text(nlohmann::json(*names)), out_names_json);
  });
}

diffattn_code diffattn_resolve(diffattn_session* session, const char* role, const char* category, int head_size,
                               int allow_trtllm_default, char** out_json) {
  return guarded("diffattn_resolve", [&]() -> diffattn_code {
    if (session == nullptr) return null_argument("diffattn_resolve", "session");
    if (role == nullptr) return null_argument("diffattn_resolve", "role");
    if (out_json == nullptr) return null_argument("diffattn_resolve", "out_json");
    std::optional<std::string_view> cat;
    if (category != nullptr) cat = category;
    std::shared_lock lock(session->mu);
    auto resolution = session->selector->resolve(role, head_size, session->config, cat,
                                                  diffattn::LayerTraits{.allows_trtllm_default = allow_trtllm_default != 0});
    if (!resolution.ok()) return fail(resolution.status());
    return return_string("diffattn_resolve", diffattn::json_text(diffattn::resolution_to_json(*resolution)), out_json);
  });
}

void diffattn_string_free(char* text) { std::free(text); }

void diffattn_layer_desc_init(diffattn_layer_desc* desc) {
  if (desc == nullptr) return;
  *desc = diffattn_layer_desc{};
  desc->role = "self";
}

diffattn_code diffattn_layer_create(diffattn_session* session, const diffattn_layer_desc* desc, diffattn_layer** out) {
  return guarded("diffattn_layer_create", [&]() -> diffattn_code {
    if (session == nullptr) return null_argument("diffattn_layer_create", "session");
    if (desc == nullptr) return null_argument("diffattn_layer_create", "desc");
    if (out == nullptr) return null_argument("diffattn_layer_create", "out");
    auto d = layer_desc_from_c(*desc, "diffattn_layer_create");
    if (!d.ok()) return fail(d.status());
    std::shared_lock lock(session->mu);
    auto attention = diffattn::Attention::Create(*d, session->config, session->schedule ? &*session->schedule : nullptr,
                                                 *session->selector);
    if (!attention.ok()) return fail(attention.status());
    *out = new diffattn_layer{std::move(attention).value()};
    return DIFFATTN_OK;
  });
}

void diffattn_layer_destroy(diffattn_layer* layer) { delete layer; }

const char* diffattn_layer_backend(const diffattn_layer* layer) {
  return layer == nullptr ? "" : layer->attention.resolution().backend.c_str();
}

diffattn_code diffattn_session_set_schedule(diffattn_session* session, const char* schedule_json) {
  return guarded("diffattn_session_set_schedule", [&]() -> diffattn_code {
    if (session == nullptr) return null_argument("diffattn_session_set_schedule", "session");
    diffattn::ScheduleSources sources;
    if (!is_empty(schedule_json)) sources.json = std::string(schedule_json);
    auto schedule = diffattn::parse_attention_schedule(sources, diffattn::global_registry());
    if (!schedule.ok()) return fail(schedule.status());
    std::unique_lock lock(session->mu);
    session->schedule = std::move(schedule).value();
    return DIFFATTN_OK;
  });
}

diffattn_code diffattn_layer_forward(const diffattn_layer* layer, const DLTensor* q, const DLTensor* k,
                                     const DLTensor* v, DLTensor* out, const DLTensor* mask, DLTensor* lse,
                                     void* stream) {
  return diffattn_layer_forward_step(layer, q, k, v, out, mask, lse, nullptr, stream);
}

diffattn_code diffattn_layer_forward_step(const diffattn_layer* layer, const DLTensor* q, const DLTensor* k,
                                          const DLTensor* v, DLTensor* out, const DLTensor* mask, DLTensor* lse,
                                          const diffattn_denoising_step* step, void* stream) {
  diffattn_call_extras extras;
  diffattn_call_extras_init(&extras);
  extras.step = step;
  return diffattn_layer_forward_ex(layer, q, k, v, out, mask, lse, &extras, stream);
}

void diffattn_call_extras_init(diffattn_call_extras* extras) {
  if (extras == nullptr) return;
  *extras = diffattn_call_extras{};
  extras->layer_index = -1;
}

diffattn_code diffattn_layer_forward_ex(const diffattn_layer* layer, const DLTensor* q, const DLTensor* k,
                                        const DLTensor* v, DLTensor* out, const DLTensor* mask, DLTensor* lse,
                                        const diffattn_call_extras* extras, void* stream) {
  return guarded("diffattn_layer_forward", [&]() -> diffattn_code {
    constexpr const char* kFn = "diffattn_layer_forward";
    diffattn_call_extras none;
    diffattn_call_extras_init(&none);
    if (extras == nullptr) extras = &none;
    const diffattn_denoising_step* step = extras->step;
    if (layer == nullptr) return null_argument(kFn, "layer");
    if (q == nullptr) return null_argument(kFn, "q");
    if (k == nullptr) return null_argument(kFn, "k");
    if (v == nullptr) return null_argument(kFn, "v");
    if (out == nullptr) return null_argument(kFn, "out");
    diffattn::AttentionProblem problem;
    for (auto [tensor, view, name] : {std::tuple{q, &problem.q, "q"}, {k, &problem.k, "k"}, {v, &problem.v, "v"},
                                      {static_cast<const DLTensor*>(out), &problem.out, "out"}}) {
      auto converted = view_of(tensor, name);
      if (!converted.ok()) return fail(converted.status());
      *view = *converted;
    }
    if (mask != nullptr) {
      auto converted = view_of(mask, "mask");
      if (!converted.ok()) return fail(converted.status());
      problem.mask = *converted;
    }
    if (lse != nullptr) {
      auto converted = view_of(lse, "lse");
      if (!converted.ok()) return fail(converted.status());
      problem.lse = *converted;
    }
    if (step != nullptr || extras->layer_index >= 0) {
      diffattn::DenoisingStep s;
      if (step != nullptr) {
        s.index = step->index;
        s.num_steps = step->num_steps;
        if (step->has_sigma != 0) s.sigma = step->sigma;
      }
      if (extras->layer_index >= 0) s.layer = extras->layer_index;
      problem.denoising = s;
    }
    if (extras->video != nullptr) {
      const diffattn_video_geometry& g = *extras->video;
      if (g.frames <= 0 || g.height <= 0 || g.width <= 0 || g.text_before < 0 || g.text_after < 0)
        return fail(ErrorCode::kInvalidInput,
                    "the video geometry needs positive frames, height and width and non-negative text counts, got " +
            std::to_string(g.frames) + " x " + std::to_string(g.height) + " x " + std::to_string(g.width) + " (text " +
            std::to_string(g.text_before) + " before, " + std::to_string(g.text_after) + " after)");
      problem.video = diffattn::VideoGeometry{g.frames, g.height, g.width, g.text_before, g.text_after};
    }
    if (extras->gate != nullptr) {
      auto converted = view_of(extras->gate, "gate");
      if (!converted.ok()) return fail(converted.status());
      problem.gate = *converted;
    }
    const Status status = layer->attention.forward(problem, stream);
    if (!status.ok()) return fail(status);
    return DIFFATTN_OK;
  });
}

diffattn_code diffattn_nccl_unique_id(char** out_id) {
  return guarded("diffattn_nccl_unique_id", [&]() -> diffattn_code {
    if (out_id == nullptr) return null_argument("diffattn_nccl_unique_id", "out_id");
    auto id = diffattn::parallel::make_nccl_unique_id();
    if (!id.ok()) return fail(id.status());
    return return_string("diffattn_nccl_unique_id", *id, out_id);
  });
}

diffattn_code diffattn_comm_create_nccl(const char* unique_id, int rank, int world, int device, diffattn_comm** out) {
  return guarded("diffattn_comm_create_nccl", [&]() -> diffattn_code {
    if (unique_id == nullptr) return null_argument("diffattn_comm_create_nccl", "unique_id");
    if (out == nullptr) return null_argument("diffattn_comm_create_nccl", "out");
    auto comm = diffattn::parallel::make_nccl_communicator(unique_id, rank, world, device);
    if (!comm.ok()) return fail(comm.status());
    *out = new diffattn_comm{std::move(comm).value()};
    return DIFFATTN_OK;
  });
}

diffattn_code diffattn_comm_create_in_process(int world, diffattn_comm** out_comms) {
  return guarded("diffattn_comm_create_in_process", [&]() -> diffattn_code {
    if (out_comms == nullptr) return null_argument("diffattn_comm_create_in_process", "out_comms");
    auto comms = diffattn::parallel::make_in_process_group(world);
    if (!comms.ok()) return fail(comms.status());
    for (int r = 0; r < world; ++r) out_comms[r] = new diffattn_comm{std::move((*comms)[r])};
    return DIFFATTN_OK;
  });
}

void diffattn_comm_destroy(diffattn_comm* comm) { delete comm; }

diffattn_code diffattn_parallel_layer_create(diffattn_session* session, const diffattn_layer_desc* desc, int ulysses,
                                             int ring, diffattn_comm* comm, diffattn_parallel_layer** out) {
  return guarded("diffattn_parallel_layer_create", [&]() -> diffattn_code {
    constexpr const char* kFn = "diffattn_parallel_layer_create";
    if (session == nullptr) return null_argument(kFn, "session");
    if (desc == nullptr) return null_argument(kFn, "desc");
    if (comm == nullptr) return null_argument(kFn, "comm");
    if (out == nullptr) return null_argument(kFn, "out");
    auto d = layer_desc_from_c(*desc, kFn);
    if (!d.ok()) return fail(d.status());
    std::shared_lock lock(session->mu);
    auto layer = diffattn::parallel::ParallelAttention::Create(*d, {ulysses, ring}, *comm->comm, session->config,
                                                                *session->selector);
    if (!layer.ok()) return fail(layer.status());
    *out = new diffattn_parallel_layer{std::move(layer).value()};
    return DIFFATTN_OK;
  });
}

void diffattn_parallel_layer_destroy(diffattn_parallel_layer* layer) { delete layer; }

const char* diffattn_parallel_layer_backend(const diffattn_parallel_layer* layer) {
  return layer == nullptr ? "" : layer->layer->resolution().backend.c_str();
}

diffattn_code diffattn_parallel_layer_forward(diffattn_parallel_layer* layer, const DLTensor* q, const DLTensor* k,
                                              const DLTensor* v, DLTensor* out, long long image_tokens,
                                              const DLTensor* joint_q, const DLTensor* joint_k, const DLTensor* joint_v,
                                              DLTensor* joint_out, const DLTensor* joint_mask, int joint_rear,
                                              void* stream) {
  return guarded("diffattn_parallel_layer_forward", [&]() -> diffattn_code {
    constexpr const char* kFn = "diffattn_parallel_layer_forward";
    if (layer == nullptr) return null_argument(kFn, "layer");
    diffattn::parallel::ParallelCall call;
    for (auto [tensor, view, name] : {std::tuple{q, &call.q, "q"}, {k, &call.k, "k"}, {v, &call.v, "v"},
                                      {static_cast<const DLTensor*>(out), &call.out, "out"}}) {
      if (tensor == nullptr) return null_argument(kFn, name);
      auto converted = view_of(tensor, name);
      if (!converted.ok()) return fail(converted.status());
      *view = *converted;
    }
    for (auto [tensor, view, name] :
         {std::tuple{joint_q, &call.joint_q, "joint_q"}, {joint_k, &call.joint_k, "joint_k"},
          {joint_v, &call.joint_v, "joint_v"}, {static_cast<const DLTensor*>(joint_out), &call.joint_out, "joint_out"},
          {joint_mask, &call.joint_key_mask, "joint_mask"}}) {
      if (tensor == nullptr) continue;
      auto converted = view_of(tensor, name);
      if (!converted.ok()) return fail(converted.status());
      *view = *converted;
    }
    call.image_tokens = image_tokens;
    call.joint_placement = joint_rear ? diffattn::parallel::JointPlacement::kRear : diffattn::parallel::JointPlacement::kFront;
    const Status status = layer->layer->forward(call, stream);
    if (!status.ok()) return fail(status);
    return DIFFATTN_OK;
  });
}

}  // extern "C"
