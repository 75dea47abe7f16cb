#pragma once
// How far a backend's output is from the baseline's on the same inputs.

#include <optional>

#include <nlohmann/json.hpp>

#include "runner/host_tensor.h"

namespace diffattn::runner {

struct QualityMetrics {
  double rel_l2 = 0.0;       // ||out - ref|| / ||ref||
  double cosine = 1.0;       // <out, ref> / (||out|| ||ref||)
  double max_abs = 0.0;      // max |out - ref|
  std::optional<double> psnr_db;  // 10 log10(max(ref^2) / mean((out - ref)^2)); absent when identical
  std::int64_t elements = 0;
  std::int64_t non_finite = 0;  // NaN or Inf elements of `out`; any makes the result fail every bound
};

// Requires equal element counts (the caller checks shapes).
QualityMetrics compare_outputs(const HostTensor& out, const HostTensor& ref);

// Folds one comparison into a running aggregate over several calls: the worst of each metric.
void merge_worst(QualityMetrics& total, const QualityMetrics& one);

bool within_bound(const QualityMetrics& m, double rel_l2_bound);

nlohmann::json quality_to_json(const QualityMetrics& m);

}  // namespace diffattn::runner
