#include "runner/quality_metrics.h"

#include <algorithm>
#include <cmath>

namespace diffattn::runner {

QualityMetrics compare_outputs(const HostTensor& out, const HostTensor& ref) {
  const std::int64_t n = ref.numel();
  double diff2 = 0, ref2 = 0, out2 = 0, dot = 0, max_abs = 0, peak2 = 0;
  std::int64_t non_finite = 0;
#pragma omp parallel for reduction(+ : diff2, ref2, out2, dot, non_finite) reduction(max : max_abs, peak2)
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = out.get(i);
    const double b = ref.get(i);
    if (!std::isfinite(a)) {
      ++non_finite;
      continue;
    }
    const double d = a - b;
    diff2 += d * d;
    ref2 += b * b;
    out2 += a * a;
    dot += a * b;
    max_abs = std::max(max_abs, std::abs(d));
    peak2 = std::max(peak2, b * b);
  }
  QualityMetrics m;
  m.elements = n;
  m.non_finite = non_finite;
  m.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  m.cosine = (ref2 > 0 && out2 > 0) ? dot / std::sqrt(ref2 * out2) : (diff2 == 0 ? 1.0 : 0.0);
  m.max_abs = max_abs;
  if (diff2 > 0 && n > 0) m.psnr_db = 10.0 * std::log10(peak2 / (diff2 / static_cast<double>(n)));
  return m;
}

void merge_worst(QualityMetrics& total, const QualityMetrics& one) {
  if (total.elements == 0) {
    total = one;
    return;
  }
  total.rel_l2 = std::max(total.rel_l2, one.rel_l2);
  total.cosine = std::min(total.cosine, one.cosine);
  total.max_abs = std::max(total.max_abs, one.max_abs);
  if (one.psnr_db) total.psnr_db = total.psnr_db ? std::min(*total.psnr_db, *one.psnr_db) : one.psnr_db;
  total.elements += one.elements;
  total.non_finite += one.non_finite;
}

bool within_bound(const QualityMetrics& m, double rel_l2_bound) {
  return m.non_finite == 0 && m.rel_l2 <= rel_l2_bound;
}

nlohmann::json quality_to_json(const QualityMetrics& m) {
  return {{"rel_l2", m.rel_l2},
          {"cosine", m.cosine},
          {"max_abs", m.max_abs},
          {"psnr_db", m.psnr_db ? nlohmann::json(*m.psnr_db) : nlohmann::json(nullptr)},
          {"elements", m.elements},
          {"non_finite", m.non_finite}};
}

}  // namespace diffattn::runner
