// The tile kernels (dense and SAGE_ATTN's) for AVX-512F machines; this file is compiled with
// -mavx512f -mfma (CpuKernels.cmake) and only entered after a run-time check of the CPU.
#include <immintrin.h>

#include "kernels/cpu/dense_tile_impl.h"
#include "kernels/cpu/sage_tile_impl.h"

namespace diffattn::cpu {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kRows = 8;  // 8 rows x 2 vectors: 16 accumulators of the 32 registers
  static constexpr int kVecs = 2;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float reduce_max(V x) { return _mm512_reduce_max_ps(x); }
  static float reduce_add(V x) { return _mm512_reduce_add_ps(x); }

  // 2^x as 2^round(x) * p(x - round(x)), p the degree-7 Taylor polynomial of 2^f on [-1/2, 1/2]
  // (relative error below 1e-8); scalef turns 2^-150 and below into exact zeros.
  static V exp2(V x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-150.0f));
    const V n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const V f = _mm512_sub_ps(x, n);
    V p = _mm512_set1_ps(1.525273380405984e-05f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530393381606e-04f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618129107628477e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550410866482158e-02f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402265069591007e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471805599453e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
  }

  static void f16_row(const std::uint16_t* src, std::int64_t n, float* dst) {
    std::int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
    for (; i < n; ++i) dst[i] = half_to_float(src[i]);
  }
};

}  // namespace

TileKernel avx512_tile_kernel() { return DenseTile<Avx512>::kernel("avx512"); }
SageTileKernel avx512_sage_tile_kernel() { return SageTile<Avx512>::kernel("avx512"); }

}  // namespace diffattn::cpu
