#pragma once
// What `diffattn run` was asked to do, before it is checked against the model and the machine.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diffattn/dtype.h"

namespace diffattn::runner {

struct RunRequest {
  std::string model;                 // a model zoo name
  std::optional<int> height, width, frames, steps;  // unset: the model's defaults
  std::uint64_t seed = 0;
  std::string layers;                // "all", a count N (evenly spaced), or indices "0,15,29"; empty: default sample
  int sample_steps = 1;              // how many of the denoising steps get their own activations
  int batch = 1;                     // 2 models classifier-free guidance run as one batch
  DType dtype = DType::kBFloat16;
  std::vector<std::string> compare;  // backend names ("auto" = platform default); empty: the configured run alone
  double quality_bound = 1e-2;       // relL2 against the baseline for a backend to be eligible in a verdict
  std::string activations_dir;       // real Q/K/V dumps (.npy); empty: generated activations
  std::optional<int> warmup, repeats;  // per sampled call; unset: 2/5 on a GPU, 1/3 on a CPU
  double cpu_budget_tflop = 1.0;     // a CPU run larger than this is sampled down or refused
  std::optional<int> prompt_tokens;  // real prompt length; text keys after it are masked. Unset: no mask
};

}  // namespace diffattn::runner
