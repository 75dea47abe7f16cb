#pragma once
// Properties every backend keeps besides matching the oracle, checked by the parity harness for
// each registered backend that can run here: fully masked rows give zeros and LSE -inf (or the
// call is refused), a refused call writes nothing, and (GPU) a captured call replays correctly.

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "parity/cases.h"
#include "parity/harness.h"

namespace diffattn::testing {

// The first case built by `make(dtype, head_size)` that `d` declares it runs on `device` here.
inline std::optional<ParityCase> first_supported_case(const BackendDescriptor& d, const Platform& platform,
                                                      DeviceKind device,
                                                      const std::function<ParityCase(DType, std::int64_t)>& make) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (std::int64_t head_size : {64, 128, 96, 256, 32, 8}) {
      const ParityCase c = make(dtype, head_size);
      ProblemShape shape = case_shape(c);
      shape.device = device;
      if (case_unsupported_reasons(d, platform, shape).empty()) return c;
    }
  return std::nullopt;
}

// Two batches, the second keeping no key, by a key-padding or (per row) a dense mask.
inline ParityCase fully_masked_case(DType dtype, std::int64_t head_size, MaskShape mask, bool lse) {
  ParityCase c;
  c.dtype = dtype;
  c.batch = 2, c.seq_q = 70, c.seq_kv = 90, c.heads_q = 4, c.heads_kv = 2;
  c.head_size = c.head_size_v = head_size;
  c.mask = mask;
  c.lse = lse;
  c.fully_masked_rows = true;
  return c;
}

// A fully masked case `d` runs here, preferring one with LSE; nullopt when it takes no mask.
inline std::optional<ParityCase> fully_masked_case_for(const BackendDescriptor& d, const Platform& platform,
                                                       DeviceKind device) {
  for (MaskShape mask : {MaskShape::kKeyPadding, MaskShape::kDense})
    for (bool lse : {true, false}) {
      auto c = first_supported_case(d, platform, device, [&](DType dtype, std::int64_t head_size) {
        return fully_masked_case(dtype, head_size, mask, lse);
      });
      if (c) return c;
    }
  return std::nullopt;
}

// The fully masked rows of a fully_masked_case: every key of the last batch under a key-padding
// mask, query row 1 of every (batch, head) under a dense one.
inline bool row_is_fully_masked(const ParityCase& c, std::int64_t batch, std::int64_t row) {
  return c.mask == MaskShape::kKeyPadding ? batch == c.batch - 1 : row == 1;
}

// Empty when every fully masked row of `p` is zero with LSE -inf, else the first that is not.
inline std::string check_fully_masked_rows(const ParityCase& c, const AttentionProblem& p) {
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.seq_q; ++i) {
      if (!row_is_fully_masked(c, b, i)) continue;
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        std::ostringstream where;
        where << "batch " << b << ", row " << i << ", head " << h;
        if (p.lse) {
          const double lse = read_element(*p.lse, element_offset(*p.lse, {b, h, i}));
          if (lse != -std::numeric_limits<double>::infinity()) return where.str() + ": lse " + std::to_string(lse) + ", want -inf";
        }
        for (std::int64_t e = 0; e < c.head_size_v; ++e) {
          const double v = read_element(p.out, element_offset(p.out, {b, i, h, e}));
          if (v != 0.0) return where.str() + ": out[" + std::to_string(e) + "] = " + std::to_string(v) + ", want 0";
        }
      }
    }
  return "";
}

// Empty when out (and lse) still hold the NaN poison in every element: nothing was written.
inline std::string check_untouched(const AttentionProblem& p) {
  bool written = false;
  for_each_offset(p.out, [&](std::int64_t off) { written = written || !std::isnan(read_element(p.out, off)); });
  if (written) return "out was written";
  if (p.lse) {
    for_each_offset(*p.lse, [&](std::int64_t off) { written = written || !std::isnan(read_element(*p.lse, off)); });
    if (written) return "lse was written";
  }
  return "";
}

// Calls no backend may run: each shrinks one view of a valid problem so that the shapes disagree
// (memory stays inside the buffers), which validation must refuse before anything is written.
struct InvalidCall {
  std::string name;
  std::function<void(AttentionProblem&)> apply;
};

inline std::vector<InvalidCall> invalid_calls() {
  return {
      {"out with one query row fewer than q", [](AttentionProblem& p) { p.out.shape[1] -= 1; }},
      {"v with one key fewer than k", [](AttentionProblem& p) { p.v.shape[1] -= 1; }},
      {"k with a smaller head size than q", [](AttentionProblem& p) { p.k.shape[3] -= 8; }},
      {"out with one head fewer than q", [](AttentionProblem& p) { p.out.shape[2] -= 1; }},
  };
}

// A plain case `d` runs here, large enough for several tiles of any kernel; for a backend that
// needs the video geometry, self-attention over a latent video.
inline std::optional<ParityCase> plain_case_for(const BackendDescriptor& d, const Platform& platform,
                                                DeviceKind device) {
  auto plain = first_supported_case(d, platform, device, [](DType dtype, std::int64_t head_size) {
    ParityCase c;
    c.dtype = dtype;
    c.seq_q = 300, c.seq_kv = 260, c.heads_q = 4, c.heads_kv = 2;
    c.head_size = c.head_size_v = head_size;
    return c;
  });
  if (plain) return plain;
  return first_supported_case(d, platform, device, [](DType dtype, std::int64_t head_size) {
    ParityCase c;
    c.dtype = dtype;
    c.video = VideoGeometry{5, 6, 10};
    c.seq_q = c.seq_kv = c.video->tokens();
    c.heads_q = 4, c.heads_kv = 2;
    c.head_size = c.head_size_v = head_size;
    return c;
  });
}

}  // namespace diffattn::testing
