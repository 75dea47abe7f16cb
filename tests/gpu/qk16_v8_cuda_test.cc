// FLASHINFER_ATTN's QK16/V8 mode on CUDA (kernels/cuda/sage, kQk16): the kernel against the CPU
// implementation of the same arithmetic (run_sage_attn_cpu with QkMode::k16) and against the
// float64 oracle on fresh random inputs; LSE; fully masked rows; the backend through the registry
// on CUDA tensors; and the calls it refuses, unwritten.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "kernels/cpu/sage_cpu.h"
#include "kernels/cuda/sage/run_sage_attn.h"
#include "kernels/cuda/sage/sage_config.h"
#include "parity/harness.h"
#include "parity/parity_check.h"
#include "parity/properties.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "diffattn/platform.h"
#include "gpu/device_case.h"
#endif

namespace diffattn {
namespace {

#if DIFFATTN_HAVE_CUDA

using testing::ParityCase;

#define SKIP_WITHOUT_HOPPER() \
  if (!testing::hopper_present()) GTEST_SKIP() << "no sm_90 CUDA device here (the QK16/V8 kernel is Hopper's)"

ParityCase fp8_v_case(std::int64_t d, DType dtype, int idx) {
  ParityCase c;
  c.dtype = dtype;
  c.head_size = c.head_size_v = d;
  c.seq_q = 190 + 67 * (idx % 3) + (idx % 4 == 3 ? 640 : 0);
  c.seq_kv = idx % 2 ? 345 : 1090;
  c.heads_q = 4;
  c.heads_kv = idx % 2 ? 2 : 4;
  c.causal = idx % 3 == 0;
  c.mask = idx % 4 == 1 ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
  c.lse = true;
  c.batch = 1 + idx % 2;
  return c;
}

std::vector<double> oracle_out(testing::OracleOutput& t) {
  std::vector<double> v;
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t i = 0; i < t.seq_q; ++i)
      for (std::int64_t h = 0; h < t.heads; ++h)
        for (std::int64_t e = 0; e < t.head_size_v; ++e) v.push_back(t.at(b, i, h, e));
  return v;
}

double cosine(const std::vector<double>& x, const std::vector<double>& y) {
  double dot = 0, nx = 0, ny = 0;
  for (std::size_t i = 0; i < x.size(); ++i) dot += x[i] * y[i], nx += x[i] * x[i], ny += y[i] * y[i];
  return nx > 0 && ny > 0 ? dot / std::sqrt(nx * ny) : 1.0;
}

// The largest |LSE - oracle| over rows the oracle sees keys in; false if a row the oracle calls
// fully masked is not -inf.
bool lse_check(const AttentionProblem& p, testing::OracleOutput& t, double* worst) {
  *worst = 0;
  bool ok = true;
  const TensorView& lse = *p.lse;
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t h = 0; h < t.heads; ++h)
      for (std::int64_t i = 0; i < t.seq_q; ++i) {
        const double got = testing::read_element(lse, b * lse.stride(0) + h * lse.stride(1) + i * lse.stride(2));
        const double want = t.lse_at(b, h, i);
        if (std::isinf(want)) ok = ok && std::isinf(got) && got < 0;
        else *worst = std::max(*worst, std::abs(got - want));
      }
  return ok;
}

// The kernels this file checks: the Hopper kernel with 2, 3 or 4 (hd64) consumer groups, and (0) the Ada
// mma.sync kernel ('fa2'), which the Hopper GPU runs too.
sage::SageKernelChoice kernel_choice(int kernel) {
  sage::SageKernelChoice choice;
  choice.consumer_groups = kernel;
  choice.mma_sync = kernel == 0;
  return choice;
}

// FP8 P*V's budget on the harness's inputs (as SAGE_ATTN's FP8 mode; the 16-bit scores add nothing).
constexpr double kRelL2 = 0.06, kCosine = 0.998;
// The LSE sums the E4M3 P values (the row sums come out of the P*V product), so a row of few keys
// carries their rounding: SAGE_ATTN's FP8 mode has the same budget.
constexpr double kLseTolerance = 0.05;

// The GPU kernel computes the CPU implementation's quantized V and the same E4M3 P; what differs is
// ex2.approx, fp32 summation order and the tensor cores' sums. So the GPU output stays closer to the
// CPU's than either is to exact attention, and its error against float64 exceeds the CPU's by at
// most 10 %. Both Hopper kernel shapes and the Ada (mma.sync) kernel, both dtypes, both head sizes,
// causal, GQA, key padding, Sq != Skv.
void expect_agreement_with_the_cpu(std::initializer_list<int> kernels) {
  const auto seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (int groups : kernels) {
        if (groups == 4 && !sage::sage_four_groups_fit(static_cast<int>(d), /*pv_fp8=*/true)) continue;
        const ParityCase c = fp8_v_case(d, dtype, idx++);
        auto data = testing::make_case_data(c, rng);
        testing::OracleOutput truth = testing::reference_attention(data->problem, testing::OraclePrecision::kFloat64);
        const std::vector<double> exact = oracle_out(truth);
        ASSERT_TRUE(sage::run_sage_attn_cpu(data->problem, sage::PvMode::kFp8, sage::QkMode::k16).ok()) << c.name();
        const std::vector<double> cpu = testing::output_values(data->problem.out);
        testing::poison(data->problem.out);
        testing::DeviceCase device(*data);
        ASSERT_TRUE(device.ok()) << c.name();
        const Status s = sage::run_qk16_v8_cuda(device.problem(), nullptr, kernel_choice(groups));
        ASSERT_TRUE(s.ok()) << c.name() << ": " << s.ToString();
        ASSERT_TRUE(device.copy_back()) << c.name();
        const std::vector<double> gpu = testing::output_values(data->problem.out);
        const double e_cpu = testing::relative_l2(cpu, exact), e_gpu = testing::relative_l2(gpu, exact);
        const double apart = testing::relative_l2(gpu, cpu);
        double lse_diff = 0;
        const bool lse_ok = lse_check(data->problem, truth, &lse_diff);
        std::printf("[qk16v8] %-60s groups %d cpu %.4f gpu %.4f (x%.3f) gpu-cpu %.4f cos %.6f lse %.4f\n",
                    c.name().c_str(), groups, e_cpu, e_gpu, e_gpu / e_cpu, apart, cosine(gpu, exact), lse_diff);
        const std::string what = c.name() + " groups " + std::to_string(groups) + " seed " + std::to_string(seed);
        EXPECT_LE(e_gpu, 1.10 * e_cpu) << what;
        EXPECT_LT(apart, e_cpu) << what;
        EXPECT_LE(e_gpu, kRelL2) << what;
        EXPECT_GE(cosine(gpu, exact), kCosine) << what;
        EXPECT_TRUE(lse_ok) << what;
        EXPECT_LE(lse_diff, kLseTolerance) << what;
      }
}

TEST(GpuQk16V8, AgreesWithTheCpuImplementationOfTheSameArithmetic) {
  SKIP_WITHOUT_HOPPER();
  expect_agreement_with_the_cpu({2, 3, 4});  // four groups at hd64 only
}

// The Ada kernel (sm_89's, and 'fa2'); run with CUDA_FORCE_PTX_JIT=1 the
// Hopper GPU runs its compute_89 code.
TEST(GpuQk16V8, TheAdaKernelAgreesWithTheCpuImplementation) {
  SKIP_WITHOUT_HOPPER();
  expect_agreement_with_the_cpu({0});
}

void expect_fully_masked_rows_zero(std::initializer_list<int> kernels, std::int64_t head_size = 128) {
  const auto seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  ParityCase c = fp8_v_case(head_size, DType::kBFloat16, 1);
  c.mask = testing::MaskShape::kKeyPadding;
  c.fully_masked_rows = true;
  c.batch = 2;
  for (int groups : kernels) {
    auto data = testing::make_case_data(c, rng);
    testing::DeviceCase device(*data);
    ASSERT_TRUE(device.ok());
    ASSERT_TRUE(sage::run_qk16_v8_cuda(device.problem(), nullptr, kernel_choice(groups)).ok());
    ASSERT_TRUE(device.copy_back());
    EXPECT_EQ(testing::check_fully_masked_rows(c, data->problem), "") << c.name() << " groups " << groups
                                                                       << " seed " << seed;
  }
}

TEST(GpuQk16V8, FullyMaskedRowsAreZeroWithLseMinusInfinity) {
  SKIP_WITHOUT_HOPPER();
  expect_fully_masked_rows_zero({2, 3});
  expect_fully_masked_rows_zero({4}, 64);
}

TEST(GpuQk16V8, TheAdaKernelsFullyMaskedRowsAreZeroWithLseMinusInfinity) {
  SKIP_WITHOUT_HOPPER();
  expect_fully_masked_rows_zero({0});
}

// `variant`: quant.flashinfer_backend, unset when empty.
Result<std::unique_ptr<Backend>> fp8_v_backend(const AttentionProblem& p, const std::string& variant = "") {
  auto platform = probe_cuda_platform(0);
  if (!platform.ok()) return platform.status();
  BackendInit init;
  init.num_heads = static_cast<int>(p.q.size(2));
  init.num_kv_heads = static_cast<int>(p.k.size(2));
  init.head_size = static_cast<int>(p.q.size(3));
  AttentionSpec spec;
  spec.backend = "FLASHINFER_ATTN";
  spec.quant.emplace();
  spec.quant->dtype_vo = "fp8_e4m3";
  if (!variant.empty()) spec.quant->flashinfer_backend = variant;
  init.spec = spec;
  init.platform = *platform;
  return global_registry().create("FLASHINFER_ATTN", init);
}

// The backend created with quant.flashinfer_backend `variant` (unset when empty) on case `c` gives
// the direct call's output with `choice`, bit for bit; the direct call writes a fresh device copy
// whose output is poisoned, so a kernel that wrote nothing would not pass.
void expect_backend_gives_the_direct_calls_bits(const ParityCase& c, const std::string& variant,
                                                const sage::SageKernelChoice& choice, std::mt19937_64& rng,
                                                std::uint64_t seed) {
  auto data = testing::make_case_data(c, rng);
  testing::DeviceCase device(*data);
  ASSERT_TRUE(device.ok());
  auto backend = fp8_v_backend(data->problem, variant);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  ASSERT_TRUE((*backend)->forward(device.problem(), nullptr).ok());
  ASSERT_TRUE(device.copy_back());
  const std::vector<double> through_backend = testing::output_values(data->problem.out);
  testing::poison(data->problem.out);
  testing::DeviceCase direct(*data);
  ASSERT_TRUE(direct.ok());
  ASSERT_TRUE(sage::run_qk16_v8_cuda(direct.problem(), nullptr, choice).ok());
  ASSERT_TRUE(direct.copy_back());
  EXPECT_EQ(testing::output_values(data->problem.out), through_backend) << c.name() << " '" << variant << "' seed " << seed;
}

// With quant.flashinfer_backend 'fa2' the backend runs the Ada (mma.sync) kernel on the Hopper GPU.
TEST(GpuQk16V8, Fa2RunsTheAdaKernelThroughTheBackend) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  expect_backend_gives_the_direct_calls_bits(fp8_v_case(128, DType::kFloat16, 3), "fa2", kernel_choice(0), rng, seed);
}

// Through the registry: quant.dtype_vo = fp8_e4m3 on CUDA tensors runs this kernel (its output is the
// direct call's, bit for bit), and what the kernel does not take is refused with the fix, unwritten.
TEST(GpuQk16V8, TheBackendRunsItOnCudaTensorsAndRefusesDenseMasksUnwritten) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  const ParityCase c = fp8_v_case(128, DType::kBFloat16, 1);
  expect_backend_gives_the_direct_calls_bits(c, "", sage::SageKernelChoice{}, rng, seed);

  ParityCase dense = c;
  dense.mask = testing::MaskShape::kDense;
  auto masked = testing::make_case_data(dense, rng);
  testing::poison(masked->problem.out);
  testing::poison(*masked->problem.lse);
  testing::DeviceCase masked_device(*masked);
  ASSERT_TRUE(masked_device.ok());
  auto backend = fp8_v_backend(masked->problem);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  const Status refused = (*backend)->forward(masked_device.problem(), nullptr);
  EXPECT_EQ(refused.code(), ErrorCode::kUnsupported);
  EXPECT_NE(refused.message().find("leave quant.dtype_vo unset"), std::string::npos) << refused.message();
  ASSERT_TRUE(masked_device.copy_back());
  EXPECT_EQ(testing::check_untouched(masked->problem), "");
}

// The parity harness's cases on the GPU: every case FLASHINFER_ATTN takes here either runs QK16/V8
// within the 8-bit rule against the float64 oracle (parity/quantized_tolerance.h; fully masked rows
// exact), or, where the CUDA kernel does not take it (dense masks, packed batches, head size 256,
// strides TMA cannot load), is refused with nothing written.
TEST(GpuQk16V8, ParityCasesRunWithinTheEightBitRuleOrAreRefusedUnwritten) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  auto info = probe_cuda_platform(0);
  ASSERT_TRUE(info.ok()) << info.status().message();
  const auto platform = make_platform(*info, global_registry());
  const BackendDescriptor& d = **global_registry().find("FLASHINFER_ATTN");
  int ran = 0, refused = 0, masked = 0;
  for (const ParityCase& c : testing::parity_cases()) {
    if (!testing::case_unsupported_reasons(d, *platform, testing::case_shape(c)).empty()) continue;
    auto data = testing::make_case_data(c, rng);
    testing::OracleOutput truth = testing::reference_attention(data->problem, testing::OraclePrecision::kFloat64);
    testing::poison(data->problem.out);
    if (data->problem.lse) testing::poison(*data->problem.lse);
    testing::DeviceCase device(*data);
    ASSERT_TRUE(device.ok()) << c.name();
    auto backend = fp8_v_backend(data->problem);
    ASSERT_TRUE(backend.ok()) << c.name() << ": " << backend.status().message();
    const Status s = (*backend)->forward(device.problem(), nullptr);
    ASSERT_TRUE(device.copy_back()) << c.name();
    const std::string what = c.name() + " (seed " + std::to_string(seed) + ")";
    if (!s.ok()) {
      EXPECT_TRUE(s.code() == ErrorCode::kUnsupported || s.code() == ErrorCode::kInvalidInput) << what << ": " << s.ToString();
      EXPECT_EQ(testing::check_untouched(data->problem), "") << what;
      ++refused;
      continue;
    }
    EXPECT_EQ(testing::compare_quantized(data->problem, truth), "") << what;
    if (c.fully_masked_rows) EXPECT_EQ(testing::check_fully_masked_rows(c, data->problem), "") << what;
    ++ran;
    masked += c.mask != testing::MaskShape::kNone;
  }
  std::printf("[ PARITY   ] FLASHINFER_ATTN QK16/V8 on %s: %d cases within the 8-bit rule (%d masked), %d refused\n",
              info->describe().c_str(), ran, masked, refused);
  EXPECT_GE(ran, 4);
  EXPECT_GE(masked, 1);
}

#else

TEST(GpuQk16V8, AgreesWithTheCpuImplementationOfTheSameArithmetic) {
  GTEST_SKIP() << "this build has no CUDA support";
}

#endif

// The CPU implementation of the kernel's arithmetic is itself close to exact attention: FP8 P*V's
// error only (no INT8 scores), on fresh inputs, and never worse than SAGE_ATTN's FP8 mode by much.
TEST(Qk16V8Cpu, TheKernelsArithmeticStaysWithinTheFp8Budget) {
  const auto seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  std::mt19937_64 rng(seed);
  for (std::int64_t d : {64, 128}) {
    testing::ParityCase c;
    c.dtype = DType::kBFloat16;
    c.head_size = c.head_size_v = d;
    c.seq_q = 150, c.seq_kv = 300, c.heads_q = 2, c.heads_kv = 1, c.lse = true;
    c.mask = testing::MaskShape::kKeyPadding;
    auto data = testing::make_case_data(c, rng);
    testing::OracleOutput truth = testing::reference_attention(data->problem, testing::OraclePrecision::kFloat64);
    std::vector<double> exact;
    for (std::int64_t i = 0; i < truth.seq_q; ++i)
      for (std::int64_t h = 0; h < truth.heads; ++h)
        for (std::int64_t e = 0; e < truth.head_size_v; ++e) exact.push_back(truth.at(0, i, h, e));
    ASSERT_TRUE(sage::run_sage_attn_cpu(data->problem, sage::PvMode::kFp8, sage::QkMode::k16).ok());
    std::vector<double> got;
    for (std::int64_t i = 0; i < truth.seq_q; ++i)
      for (std::int64_t h = 0; h < truth.heads; ++h)
        for (std::int64_t e = 0; e < truth.head_size_v; ++e)
          got.push_back(testing::read_element(data->problem.out, testing::element_offset(data->problem.out, {0, i, h, e})));
    double d2 = 0, r2 = 0;
    for (std::size_t i = 0; i < got.size(); ++i) d2 += (got[i] - exact[i]) * (got[i] - exact[i]), r2 += exact[i] * exact[i];
    const double err = std::sqrt(d2 / r2);
    EXPECT_LE(err, 0.06) << "d " << d << " seed " << seed;
    EXPECT_GT(err, 0.0) << "P and V in FP8 cannot be exact";
    for (std::int64_t h = 0; h < truth.heads; ++h)
      for (std::int64_t i = 0; i < truth.seq_q; ++i) {
        const TensorView& lse = *data->problem.lse;
        const double got_lse = testing::read_element(lse, h * lse.stride(1) + i * lse.stride(2));
        const double want = truth.lse_at(0, h, i);
        if (std::isinf(want)) EXPECT_TRUE(std::isinf(got_lse) && got_lse < 0);
        else EXPECT_NEAR(got_lse, want, 0.02) << "row " << i << " head " << h << " seed " << seed;
      }
  }
}

}  // namespace
}  // namespace diffattn
