#include "runner/sequence_parallel_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include "common/text_table.h"
#include "kernels/cpu/half_convert.h"
#include "parallel/device_memory.h"
#include "parallel/parallel_attention.h"

namespace diffattn::runner {
namespace {

using parallel::DeviceBuffer;

// Counter-based values: any rank makes any rows of a tensor alone, and they agree with the whole.
float value_at(std::uint64_t tag, std::uint64_t index) {
  std::uint64_t z = tag * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 * 4.0 - 2.0);
}

// Host bytes of a [B, rows, inner] tensor; rows [dst_row0, + n) come from rows [src_row0, + n) of the
// tensor `tag` (of `src_rows` rows).
void fill_rows(std::vector<std::byte>& dst, DType dt, std::int64_t b, std::int64_t dst_rows, std::int64_t dst_row0,
               std::uint64_t tag, std::int64_t src_rows, std::int64_t src_row0, std::int64_t n, std::int64_t inner) {
  const std::size_t es = dtype_size(dt);
#pragma omp parallel for collapse(2)
  for (std::int64_t bi = 0; bi < b; ++bi) {
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t e = 0; e < inner; ++e) {
        const float v = value_at(tag, static_cast<std::uint64_t>((bi * src_rows + src_row0 + i) * inner + e));
        std::byte* at = dst.data() + static_cast<std::size_t>((bi * dst_rows + dst_row0 + i) * inner + e) * es;
        if (dt == DType::kFloat32) {
          std::memcpy(at, &v, 4);
        } else {
          const std::uint16_t h = dt == DType::kFloat16 ? cpu::float_to_half(v) : cpu::float_to_bf16(v);
          std::memcpy(at, &h, 2);
        }
      }
    }
  }
}

float load(const std::byte* base, DType dt, std::int64_t i) {
  if (dt == DType::kFloat32) {
    float f;
    std::memcpy(&f, base + i * 4, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, base + i * 2, 2);
  return dt == DType::kFloat16 ? cpu::half_to_float(h) : cpu::bf16_to_float(h);
}

// A tensor on this rank's device, filled from host bytes.
struct RankTensor {
  std::vector<std::byte> host;
  DeviceBuffer buffer;
  TensorView view;
};

Result<RankTensor> make_tensor(DType dt, Device dev, std::initializer_list<std::int64_t> shape) {
  RankTensor t;
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  t.host.resize(static_cast<std::size_t>(n) * dtype_size(dt));
  DIFFATTN_ASSIGN_OR_RETURN(t.buffer, DeviceBuffer::Zeros(dev, t.host.size()));
  t.view = TensorView::Contiguous(t.buffer.data(), dt, shape, dev);
  return t;
}

Status upload(RankTensor& t, void* stream) {
  return parallel::copy_to_device(t.buffer.data(), t.host.data(), t.host.size(), t.view.device.kind, stream);
}
Status download(RankTensor& t, void* stream) {
  return parallel::copy_to_host(t.host.data(), t.buffer.data(), t.host.size(), t.view.device.kind, stream);
}

// Mean milliseconds of `repeats` calls after `warmup`; `fn` leaves its device work finished.
Result<double> time_ms(int warmup, int repeats, const std::function<Status()>& fn) {
  for (int i = 0; i < warmup; ++i) DIFFATTN_RETURN_IF_ERROR(fn());
  double total = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    DIFFATTN_RETURN_IF_ERROR(fn());
    total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return total / repeats;
}

// Every rank's `values` gathered on every rank, through device memory where the engine needs it.
Result<std::vector<double>> gather_doubles(parallel::Communicator& world, const std::vector<double>& values, Device dev) {
  const std::size_t bytes = values.size() * sizeof(double);
  DIFFATTN_ASSIGN_OR_RETURN(DeviceBuffer send, DeviceBuffer::Zeros(dev, bytes));
  DIFFATTN_ASSIGN_OR_RETURN(DeviceBuffer recv, DeviceBuffer::Zeros(dev, bytes * world.size()));
  DIFFATTN_RETURN_IF_ERROR(parallel::copy_to_device(send.data(), values.data(), bytes, dev.kind, nullptr));
  DIFFATTN_RETURN_IF_ERROR(world.all_gather(send.data(), recv.data(), bytes, nullptr));
  std::vector<double> all(values.size() * world.size());
  DIFFATTN_RETURN_IF_ERROR(parallel::copy_to_host(all.data(), recv.data(), bytes * world.size(), dev.kind, nullptr));
  return all;
}

struct Compared {
  double sq_diff = 0, sq_ref = 0, max_abs = 0;
  void add(float got, float want) {
    const double d = static_cast<double>(got) - want;
    sq_diff += d * d;
    sq_ref += static_cast<double>(want) * want;
    max_abs = std::max(max_abs, std::isnan(d) ? INFINITY : std::fabs(d));
  }
};

// rows [got0, + n) of got [B, got_rows, inner] against rows [want0, + n) of want [B, want_rows, inner].
void compare_rows(Compared& c, const RankTensor& got, std::int64_t got_rows, std::int64_t got0, const RankTensor& want,
                  std::int64_t want_rows, std::int64_t want0, std::int64_t b, std::int64_t n, std::int64_t inner, DType dt) {
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t e = 0; e < inner; ++e)
        c.add(load(got.host.data(), dt, (bi * got_rows + got0 + i) * inner + e),
              load(want.host.data(), dt, (bi * want_rows + want0 + i) * inner + e));
}

bool runs_sequence_parallel(const ModelRole& role, std::string& why_not) {
  if (role.query_tokens != role.key_tokens || (role.query_tokens != "video" && role.query_tokens != "joint")) {
    why_not = "queries (" + role.query_tokens + ") and keys (" + role.key_tokens +
              ") differ: each rank attends its query shard to the whole keys, without exchange";
    return false;
  }
  if (role.causal) {
    why_not = "causal attention runs on one rank";
    return false;
  }
  return true;
}

// One role on this rank: the parallel call timed, its rows checked against one rank's result.
Status run_role(const WorkloadPlan& plan, const RolePlan& rp, const AttentionConfig& config, Selector& selector,
                const parallel::ParallelDegrees& degrees, parallel::Communicator& world, Device dev, std::uint64_t seed,
                ParallelRoleResult& result, bool& communicator_usable) {
  const ModelRole& role = rp.role;
  const std::int64_t b = plan.batch, t = role.query_tokens == "joint" ? plan.model->text_tokens : 0;
  const std::int64_t s = rp.seqlen_q - t, h = role.num_heads, hkv = role.num_kv_heads ? role.num_kv_heads : h,
                     d = role.head_size;
  const DType dt = plan.dtype;
  result.image_tokens = s;
  result.text_tokens = t;
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(h);
  desc.num_kv_heads = static_cast<int>(hkv);
  desc.head_size = static_cast<int>(d);
  desc.role = role.role;
  desc.category = role.category;
  desc.traits = layer_traits(plan, rp);
  DIFFATTN_ASSIGN_OR_RETURN(auto layer, parallel::ParallelAttention::Create(desc, degrees, world, config, selector));
  result.backend = layer->resolution().backend;
  result.source = std::string(source_name(layer->resolution().source));
  parallel::ParallelCallShape shape{.dtype = dt, .device = dev.kind, .batch = b, .image_tokens = s, .joint_tokens = t,
                                    .head_size_v = d};
  DIFFATTN_RETURN_IF_ERROR(layer->preflight(shape));
  // From here on the ranks exchange: a failure leaves the communicator aborted.
  communicator_usable = false;
  const std::uint64_t tag = seed * 64 + 8 * static_cast<std::uint64_t>(&rp - plan.roles.data());
  const parallel::ShardRange shard = parallel::image_shard(s, degrees.world(), world.rank());
  const std::int64_t len = shard.length;
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor q, make_tensor(dt, dev, {b, len, h, d}));
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor k, make_tensor(dt, dev, {b, len, hkv, d}));
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor v, make_tensor(dt, dev, {b, len, hkv, d}));
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor out, make_tensor(dt, dev, {b, len, h, d}));
  fill_rows(q.host, dt, b, len, 0, tag + 0, s, shard.begin, len, h * d);
  fill_rows(k.host, dt, b, len, 0, tag + 1, s, shard.begin, len, hkv * d);
  fill_rows(v.host, dt, b, len, 0, tag + 2, s, shard.begin, len, hkv * d);
  for (RankTensor* x : {&q, &k, &v}) DIFFATTN_RETURN_IF_ERROR(upload(*x, nullptr));
  parallel::ParallelCall call;
  call.q = q.view;
  call.k = k.view;
  call.v = v.view;
  call.out = out.view;
  call.image_tokens = s;
  RankTensor tq, tk, tv, tout;
  if (t > 0) {
    DIFFATTN_ASSIGN_OR_RETURN(tq, make_tensor(dt, dev, {b, t, h, d}));
    DIFFATTN_ASSIGN_OR_RETURN(tk, make_tensor(dt, dev, {b, t, hkv, d}));
    DIFFATTN_ASSIGN_OR_RETURN(tv, make_tensor(dt, dev, {b, t, hkv, d}));
    DIFFATTN_ASSIGN_OR_RETURN(tout, make_tensor(dt, dev, {b, t, h, d}));
    fill_rows(tq.host, dt, b, t, 0, tag + 3, t, 0, t, h * d);
    fill_rows(tk.host, dt, b, t, 0, tag + 4, t, 0, t, hkv * d);
    fill_rows(tv.host, dt, b, t, 0, tag + 5, t, 0, t, hkv * d);
    for (RankTensor* x : {&tq, &tk, &tv}) DIFFATTN_RETURN_IF_ERROR(upload(*x, nullptr));
    call.joint_q = tq.view;
    call.joint_k = tk.view;
    call.joint_v = tv.view;
    call.joint_out = tout.view;
    call.joint_placement = plan.model->joint_text == "last" ? parallel::JointPlacement::kRear : parallel::JointPlacement::kFront;
  }
  // --prompt-tokens: the text keys past the prompt are padding, masked in the parallel call and the reference alike.
  const bool masked_text = t > 0 && rp.text_keys_masked;
  const std::int64_t prompt = masked_text ? *plan.prompt_tokens : t;
  std::vector<unsigned char> text_keep(static_cast<std::size_t>(b * t), 1), ref_keep;
  DeviceBuffer text_mask, ref_mask;
  if (masked_text) {
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t j = prompt; j < t; ++j) text_keep[bi * t + j] = 0;
    DIFFATTN_ASSIGN_OR_RETURN(text_mask, DeviceBuffer::Zeros(dev, text_keep.size()));
    DIFFATTN_RETURN_IF_ERROR(parallel::copy_to_device(text_mask.data(), text_keep.data(), text_keep.size(), dev.kind, nullptr));
    call.joint_key_mask = TensorView::Contiguous(text_mask.data(), DType::kBool, {b, t}, dev);
    DIFFATTN_RETURN_IF_ERROR(layer->preflight({.dtype = dt, .device = dev.kind, .batch = b, .image_tokens = s,
                                               .joint_tokens = t, .head_size_v = d, .joint_key_mask = true}));
  }
  double parallel_ms = 0;
  {
    DIFFATTN_RETURN_IF_ERROR(world.barrier());
    DIFFATTN_ASSIGN_OR_RETURN(parallel_ms, time_ms(plan.warmup, plan.repeats, [&] { return layer->forward(call); }));
  }
  DIFFATTN_RETURN_IF_ERROR(download(out, nullptr));
  if (t > 0) DIFFATTN_RETURN_IF_ERROR(download(tout, nullptr));
  // One rank, all heads: keys [text; image] whole; rank 0 times the whole sequence, the others
  // compute only their rows.
  DIFFATTN_ASSIGN_OR_RETURN(Attention single, Attention::Create(desc, config, selector));
  const bool whole = world.rank() == 0;
  const std::int64_t ref_rows = whole ? t + s : t + len;
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor rq, make_tensor(dt, dev, {b, ref_rows, h, d}));
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor rk, make_tensor(dt, dev, {b, t + s, hkv, d}));
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor rv, make_tensor(dt, dev, {b, t + s, hkv, d}));
  DIFFATTN_ASSIGN_OR_RETURN(RankTensor ro, make_tensor(dt, dev, {b, ref_rows, h, d}));
  fill_rows(rq.host, dt, b, ref_rows, 0, tag + 3, t, 0, t, h * d);
  fill_rows(rq.host, dt, b, ref_rows, t, tag + 0, s, whole ? 0 : shard.begin, ref_rows - t, h * d);
  fill_rows(rk.host, dt, b, t + s, 0, tag + 4, t, 0, t, hkv * d);
  fill_rows(rk.host, dt, b, t + s, t, tag + 1, s, 0, s, hkv * d);
  fill_rows(rv.host, dt, b, t + s, 0, tag + 5, t, 0, t, hkv * d);
  fill_rows(rv.host, dt, b, t + s, t, tag + 2, s, 0, s, hkv * d);
  for (RankTensor* x : {&rq, &rk, &rv}) DIFFATTN_RETURN_IF_ERROR(upload(*x, nullptr));
  AttentionProblem p;
  p.q = rq.view;
  p.k = rk.view;
  p.v = rv.view;
  p.out = ro.view;
  if (masked_text) {
    ref_keep.assign(static_cast<std::size_t>(b * (t + s)), 1);
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t j = prompt; j < t; ++j) ref_keep[bi * (t + s) + j] = 0;
    DIFFATTN_ASSIGN_OR_RETURN(ref_mask, DeviceBuffer::Zeros(dev, ref_keep.size()));
    DIFFATTN_RETURN_IF_ERROR(parallel::copy_to_device(ref_mask.data(), ref_keep.data(), ref_keep.size(), dev.kind, nullptr));
    p.mask = TensorView::Contiguous(ref_mask.data(), DType::kBool, {b, t + s}, dev);
  }
  auto single_call = [&]() -> Status {
    DIFFATTN_RETURN_IF_ERROR(single.forward(p));
    return parallel::synchronize(dev.kind, nullptr);
  };
  double single_ms = 0;
  if (whole) {
    DIFFATTN_ASSIGN_OR_RETURN(single_ms, time_ms(plan.warmup, plan.repeats, single_call));
  } else {
    DIFFATTN_RETURN_IF_ERROR(single_call());
  }
  DIFFATTN_RETURN_IF_ERROR(download(ro, nullptr));
  Compared c;
  const std::int64_t my_row = whole ? t + shard.begin : t;
  compare_rows(c, out, len, 0, ro, ref_rows, my_row, b, len, h * d, dt);
  if (t > 0) compare_rows(c, tout, t, 0, ro, ref_rows, 0, b, t, h * d, dt);
  const double rel = c.sq_ref > 0 ? std::sqrt(c.sq_diff / c.sq_ref) : std::sqrt(c.sq_diff);
  DIFFATTN_ASSIGN_OR_RETURN(std::vector<double> all, gather_doubles(world, {parallel_ms, rel, c.max_abs, single_ms}, dev));
  for (int r = 0; r < world.size(); ++r) {
    result.rank_ms.push_back(all[4 * r]);
    result.rel_l2 = std::max(result.rel_l2, all[4 * r + 1]);
    result.max_abs = std::max(result.max_abs, all[4 * r + 2]);
  }
  result.single_rank_ms = all[3];
  communicator_usable = true;
  return Status::Ok();
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

std::string sci(double v) {
  std::ostringstream s;
  s.precision(2);
  s << std::scientific << v;
  return s.str();
}

}  // namespace

double ParallelRoleResult::speedup() const {
  const double slowest = rank_ms.empty() ? 0 : *std::max_element(rank_ms.begin(), rank_ms.end());
  return slowest > 0 ? single_rank_ms / slowest : 0;
}

double ParallelRoleResult::efficiency() const { return rank_ms.empty() ? 0 : speedup() / rank_ms.size(); }

bool ParallelRunReport::ok() const {
  for (const ParallelRoleResult& r : roles)
    if (!r.error.empty() || (r.skipped.empty() && r.rel_l2 > quality_bound)) return false;
  return true;
}

Result<ParallelRunReport> run_sequence_parallel(const WorkloadPlan& plan, const AttentionConfig& config, Selector& selector,
                                                const parallel::ParallelDegrees& degrees, parallel::Communicator& world,
                                                int device, std::uint64_t seed, double quality_bound) {
  ParallelRunReport report;
  report.degrees = degrees;
  report.engine = std::string(world.engine());
  report.model = plan.model->name;
  report.quality_bound = quality_bound;
  const Device dev{world.device(), world.device() == DeviceKind::kCuda ? device : 0};
  bool usable = true;
  for (const RolePlan& rp : plan.roles) {
    ParallelRoleResult result;
    result.role = rp.role.role;
    if (!runs_sequence_parallel(rp.role, result.skipped)) {
      report.roles.push_back(result);
      continue;
    }
    if (!usable) {
      result.error = "not run: an earlier role failed and aborted the ranks' groups";
      report.roles.push_back(result);
      continue;
    }
    Status s = run_role(plan, rp, config, selector, degrees, world, dev, seed, result, usable);
    if (!s.ok()) {
      result.error = s.message();
      result.error_code = std::string(error_code_name(s.code()));
    }
    report.roles.push_back(result);
  }
  return report;
}

std::string parallel_report_text(const ParallelRunReport& report) {
  std::ostringstream out;
  out << "sequence parallel: " << report.degrees.describe() << " = " << report.degrees.world() << " ranks ("
      << (report.engine == "nccl" ? "NCCL, one process per GPU" : "in-process threads") << "), model " << report.model
      << "\n";
  TextTable table({"role", "backend", "image+text tokens", "1 rank ms", "per-rank ms", "speedup", "efficiency",
               "relL2 vs 1 rank", "max abs"});
  std::vector<std::string> notes;
  for (const ParallelRoleResult& r : report.roles) {
    if (!r.skipped.empty()) {
      notes.push_back(r.role + ": not sequence-parallel (" + r.skipped + ")");
      continue;
    }
    if (!r.error.empty()) {
      table.add_row({r.role, r.backend.empty() ? "-" : r.backend, std::to_string(r.image_tokens) + "+" + std::to_string(r.text_tokens),
                     "-", "-", "-", "-", "-", "-"});
      notes.push_back(r.role + ": " + r.error);
      continue;
    }
    std::string per_rank;
    for (double ms : r.rank_ms) per_rank += (per_rank.empty() ? "" : " ") + fixed(ms, 2);
    table.add_row({r.role, r.backend, std::to_string(r.image_tokens) + "+" + std::to_string(r.text_tokens),
                   fixed(r.single_rank_ms, 2), per_rank, fixed(r.speedup(), 2) + "x", fixed(100 * r.efficiency(), 1) + " %",
                   sci(r.rel_l2) + (r.rel_l2 <= report.quality_bound ? "" : " (over bound)"), sci(r.max_abs)});
  }
  out << table.render();
  for (const std::string& n : notes) out << n << "\n";
  out << "speedup: one rank over the whole sequence / the slowest rank; efficiency: speedup / ranks; quality: the "
         "worst rank's rows against the same backend on one rank (bound "
      << sci(report.quality_bound) << ")\n";
  return out.str();
}

nlohmann::json parallel_report_json(const ParallelRunReport& report) {
  nlohmann::json roles = nlohmann::json::array();
  for (const ParallelRoleResult& r : report.roles) {
    nlohmann::json j = {{"role", r.role}, {"backend", r.backend}, {"source", r.source}, {"image_tokens", r.image_tokens},
                        {"text_tokens", r.text_tokens}};
    if (!r.skipped.empty()) j["skipped"] = r.skipped;
    if (!r.error.empty()) j["error"] = {{"code", r.error_code}, {"message", r.error}};
    if (r.skipped.empty() && r.error.empty()) {
      j["single_rank_ms"] = r.single_rank_ms;
      j["rank_ms"] = r.rank_ms;
      j["speedup"] = r.speedup();
      j["efficiency"] = r.efficiency();
      j["rel_l2"] = r.rel_l2;
      j["max_abs"] = r.max_abs;
    }
    roles.push_back(j);
  }
  return {{"ulysses", report.degrees.ulysses}, {"ring", report.degrees.ring}, {"ranks", report.degrees.world()},
          {"engine", report.engine}, {"model", report.model}, {"quality_bound", report.quality_bound},
          {"roles", roles}, {"ok", report.ok()}};
}

}  // namespace diffattn::runner
