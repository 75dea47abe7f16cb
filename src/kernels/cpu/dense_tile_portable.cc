// The tile kernels (dense and SAGE_ATTN's) in portable C++ for any CPU: 4-lane vectors through the
// GCC/Clang vector extension, which map to SSE2 on x86-64 and NEON on AArch64 without target flags.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/dense_tile_impl.h"
#include "kernels/cpu/sage_tile_impl.h"

namespace diffattn::cpu {
namespace {

using Float4 = float __attribute__((vector_size(16)));

struct Portable {
  using V = Float4;
  static constexpr int kWidth = 4;
  static constexpr int kRows = 4;  // 4 rows x 2 vectors: 8 accumulators fit the 16 SSE2 registers
  static constexpr int kVecs = 2;

  static V zero() { return V{0.0f, 0.0f, 0.0f, 0.0f}; }
  static V set1(float x) { return V{x, x, x, x}; }
  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, V x) { std::memcpy(p, &x, sizeof x); }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V max(V a, V b) {
    V r;
    for (int i = 0; i < 4; ++i) r[i] = a[i] > b[i] ? a[i] : b[i];
    return r;
  }
  static float reduce_max(V x) {
    const float a = x[0] > x[1] ? x[0] : x[1], b = x[2] > x[3] ? x[2] : x[3];
    return a > b ? a : b;
  }
  static float reduce_add(V x) { return (x[0] + x[1]) + (x[2] + x[3]); }

  // 2^x as 2^round(x) * p(x - round(x)) with the degree-7 Taylor polynomial of 2^f on [-1/2, 1/2];
  // inputs at or below -127 build a zero exponent field, so masked scores become exact zeros.
  static V exp2(V x) {
    V n, scale;
    for (int i = 0; i < 4; ++i) {
      const float xi = x[i] < -127.0f ? -127.0f : x[i];
      x[i] = xi;
      n[i] = static_cast<float>(static_cast<std::int32_t>(xi < 0.0f ? xi - 0.5f : xi + 0.5f));
      scale[i] = bits_to_float(static_cast<std::uint32_t>(static_cast<std::int32_t>(n[i]) + 127) << 23);
    }
    const V f = x - n;
    V p = set1(1.525273380405984e-05f);
    p = p * f + set1(1.5403530393381606e-04f);
    p = p * f + set1(1.3333558146428443e-03f);
    p = p * f + set1(9.618129107628477e-03f);
    p = p * f + set1(5.550410866482158e-02f);
    p = p * f + set1(2.402265069591007e-01f);
    p = p * f + set1(6.931471805599453e-01f);
    p = p * f + set1(1.0f);
    return p * scale;
  }

  static void f16_row(const std::uint16_t* src, std::int64_t n, float* dst) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
  }
};

}  // namespace

TileKernel portable_tile_kernel() { return DenseTile<Portable>::kernel("portable"); }
SageTileKernel portable_sage_tile_kernel() { return SageTile<Portable>::kernel("portable"); }

}  // namespace diffattn::cpu
