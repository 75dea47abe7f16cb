// The tile kernel in plain C++ for any CPU: scalar "vectors", which the compiler may still
// vectorise for the baseline instruction set.
#include <cmath>

#include "kernels/cpu/flash_tile_impl.h"

namespace diffattn::cpu {
namespace {

struct Portable {
  using V = float;
  static constexpr int kWidth = 1;
  static constexpr int kRows = 4;
  static constexpr int kVecs = 8;

  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V x) { *p = x; }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V max(V a, V b) { return a > b ? a : b; }
  static float reduce_max(V x) { return x; }
  static float reduce_add(V x) { return x; }
  static V exp2(V x) { return std::exp2(x); }
  static void f16_row(const std::uint16_t* src, std::int64_t n, float* dst) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
  }
};

}  // namespace

TileKernel portable_tile_kernel() { return FlashTile<Portable>::kernel("portable"); }

}  // namespace diffattn::cpu
