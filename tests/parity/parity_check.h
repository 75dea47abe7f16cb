#pragma once
// FlashAttention-3's tolerance rule: a backend's error against the float64 oracle may be at most
// twice the error of a plain computation in the inputs' precision, plus a small absolute floor.

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "diffattn/registry.h"
#include "parity/cases.h"
#include "parity/oracle.h"
#include "parity/quantized_tolerance.h"

namespace diffattn::testing {

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

inline double absolute_floor(DType dtype) { return dtype == DType::kFloat32 ? 2e-6 : 2e-4; }

// The oracle and the plain same-precision result for a case's inputs, computed before a run.
struct Expectation {
  OracleOutput truth;
  double out_tolerance = 0.0;
  double lse_tolerance = 0.0;
};

inline Expectation expect(const AttentionProblem& p) {
  Expectation e;
  e.truth = reference_attention(p, OraclePrecision::kFloat64);
  const OracleOutput plain = reference_attention(p, OraclePrecision::kSameAsInputs);
  e.out_tolerance = 2.0 * max_abs_diff(plain.out, e.truth.out) + absolute_floor(p.q.dtype);
  e.lse_tolerance = 2.0 * max_abs_diff(plain.lse, e.truth.lse) + 1e-5;
  return e;
}

// Empty when the outputs in `p` are within tolerance, else what differs.
inline std::string compare(const AttentionProblem& p, Expectation& e) {
  const Errors err = max_errors(p, e.truth);
  std::ostringstream why;
  if (!(err.out <= e.out_tolerance))
    why << "out error " << err.out << " exceeds " << e.out_tolerance << " (2x plain same-precision error + floor). ";
  if (!(err.lse <= e.lse_tolerance)) why << "lse error " << err.lse << " exceeds " << e.lse_tolerance << ".";
  return why.str();
}

// The rule a backend with `caps` is held to: the 8-bit rule (parity/quantized_tolerance.h) for
// quantized backends, FlashAttention-3's otherwise.
inline std::string compare(const Capabilities& caps, const AttentionProblem& p, Expectation& e) {
  return caps.quantized ? compare_quantized(p, e.truth) : compare(p, e);
}

}  // namespace diffattn::testing
