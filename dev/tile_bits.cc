// Hash of the CPU tiled kernel's outputs and LSEs over every parity case on every instruction set
// this CPU runs, from a fixed seed: built against two versions of the kernel sources
// (dev/tile_bits.sh), equal hashes mean the change left TORCH_SDPA's results bit-identical.
#include <cstdio>
#include <cstring>
#include <random>
#include "kernels/cpu/sdpa_cpu.h"
#include "parity/cases.h"
using namespace diffattn;
int main() {  // prints "runs N hash H"
  std::mt19937_64 rng(12345);
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](const TensorView& t) {
    testing::for_each_offset(t, [&](std::int64_t off) {
      double x = testing::read_element(t, off); std::uint64_t b; std::memcpy(&b, &x, 8);
      h = (h ^ b) * 1099511628211ull; });
  };
  int runs = 0;
  for (const testing::ParityCase& c : testing::parity_cases()) {
    auto data = testing::make_case_data(c, rng);
    if (!validate_problem(data->problem).ok()) { std::printf("invalid %s\n", c.name().c_str()); continue; }
    for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (!cpu_isa_available(isa)) continue;
      if (!run_sdpa_cpu(data->problem, isa).ok()) { std::printf("fail %s\n", c.name().c_str()); continue; }
      mix(data->problem.out); if (data->problem.lse) mix(*data->problem.lse); ++runs;
    }
  }
  std::printf("runs %d hash %016llx\n", runs, (unsigned long long)h);
}
