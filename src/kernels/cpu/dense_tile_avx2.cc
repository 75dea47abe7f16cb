// The tile kernels (dense and SAGE_ATTN's) for AVX2 + FMA + F16C machines; compiled with -mavx2
// -mfma -mf16c (CpuKernels.cmake) and only entered after a run-time check of the CPU.
#include <immintrin.h>

#include "kernels/cpu/dense_tile_impl.h"
#include "kernels/cpu/sage_tile_impl.h"

namespace diffattn::cpu {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kRows = 6;  // 6 rows x 2 vectors: 12 accumulators of the 16 registers
  static constexpr int kVecs = 2;

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }

  static float reduce_max(V x) {
    __m128 r = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    r = _mm_max_ps(r, _mm_movehl_ps(r, r));
    r = _mm_max_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
  }
  static float reduce_add(V x) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
  }

  // 2^x as 2^round(x) * p(x - round(x)) with the degree-7 Taylor polynomial of 2^f on [-1/2, 1/2];
  // inputs at or below -127 build a zero exponent field, so masked scores become exact zeros.
  static V exp2(V x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-127.0f));
    const V n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const V f = _mm256_sub_ps(x, n);
    V p = _mm256_set1_ps(1.525273380405984e-05f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381606e-04f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618129107628477e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550410866482158e-02f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402265069591007e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931471805599453e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  }

  static void f16_row(const std::uint16_t* src, std::int64_t n, float* dst) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    for (; i < n; ++i) dst[i] = half_to_float(src[i]);
  }
};

}  // namespace

TileKernel avx2_tile_kernel() { return DenseTile<Avx2>::kernel("avx2"); }
SageTileKernel avx2_sage_tile_kernel() { return SageTile<Avx2>::kernel("avx2"); }

}  // namespace diffattn::cpu
