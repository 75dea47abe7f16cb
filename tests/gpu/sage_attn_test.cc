// SAGE_ATTN's CUDA kernels against the float64 oracle: relative L2 error and cosine similarity of
// the output within the 8-bit arithmetic's budget (docs/backends/sage_attn.md), LSE, fully masked
// rows, padding keys that never reach the scales, and the refusals; and the kernels against the CPU
// implementation of the same arithmetic (kernels/cpu/sage_cpu.cc) on the same inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/sage_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cuda/sage/run_sage_attn.h"
#include "kernels/cuda/sage/sage_config.h"
#include "parity/parity_check.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/device_case.h"
#endif

namespace diffattn {
namespace {

#if DIFFATTN_HAVE_CUDA

using testing::ParityCase;

bool sage_device_present() {
  if (!testing::cuda_device_present()) return false;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return sage::sage_cuda_kernel_for(major, minor);
}

#define SKIP_WITHOUT_SAGE_GPU() \
  if (!sage_device_present()) GTEST_SKIP() << "no CUDA device with a SAGE_ATTN kernel (sm_90) here"

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

struct Quality {
  double rel_l2 = 0, cosine = 0, lse_max_diff = 0;
  bool masked_rows_ok = true;  // rows the oracle calls fully masked are 0 with LSE -inf
  std::string error;
};

// Runs `c` through SAGE_ATTN on the GPU (with `groups` consumer warpgroups, 0: the rule's) and
// measures it against the float64 oracle. `misaligned` moves q, k and v 2 bytes off 8-byte
// alignment, so the quantization kernels take their 2-byte loads.
// `ampere` runs the Ampere/Ada kernel instead, in `pv` mode.
// `tweak` edits the generated inputs before they are copied to the GPU.
Quality run_sage(const ParityCase& c, sage::PvMode pv, std::mt19937_64& rng, int groups = 0, bool misaligned = false,
                 bool ampere = false, const std::function<void(testing::CaseData&)>& tweak = nullptr) {
  Quality q;
  auto data = testing::make_case_data(c, rng);
  if (tweak) tweak(*data);
  if (misaligned)
    for (TensorView* t : {&data->problem.q, &data->problem.k, &data->problem.v}) *t = testing::misaligned_copy(*data, *t);
  const AttentionProblem& host = data->problem;
  if (Status valid = validate_problem(host); !valid.ok()) {
    q.error = "invalid case: " + valid.message();
    return q;
  }
  const testing::OracleOutput truth = testing::reference_attention(host, testing::OraclePrecision::kFloat64);
  testing::DeviceCase device(*data);
  if (!device.ok()) {
    q.error = "could not copy the case to the GPU";
    return q;
  }
  const Status run = ampere ? sage::run_sage_attn_ampere_cuda(device.problem(), nullptr, pv)
                            : sage::run_sage_attn_cuda(device.problem(), pv, nullptr, sage::SageKernelChoice{groups});
  if (Status s = run; !s.ok()) {
    q.error = "forward: " + s.ToString();
    return q;
  }
  if (!device.copy_back()) {
    q.error = "could not copy the outputs back";
    return q;
  }
  double dot = 0, nx = 0, ny = 0, diff = 0;
  const std::int64_t B = host.out.size(0), S = host.out.size(1), H = host.out.size(2), D = host.out.size(3);
  testing::OracleOutput& t = const_cast<testing::OracleOutput&>(truth);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < S; ++i)
      for (std::int64_t h = 0; h < H; ++h) {
        const bool masked = host.lse ? std::isinf(t.lse_at(b, h, i)) : false;
        for (std::int64_t e = 0; e < D; ++e) {
          const double x = testing::read_element(host.out, b * host.out.stride(0) + i * host.out.stride(1) +
                                                               h * host.out.stride(2) + e * host.out.stride(3));
          const double y = t.at(b, i, h, e);
          if (masked && x != 0.0) q.masked_rows_ok = false;
          dot += x * y, nx += x * x, ny += y * y, diff += (x - y) * (x - y);
        }
        if (host.lse) {
          const double got = testing::read_element(*host.lse, b * host.lse->stride(0) + h * host.lse->stride(1) +
                                                                  i * host.lse->stride(2));
          const double want = t.lse_at(b, h, i);
          if (std::isinf(want)) {
            if (!(std::isinf(got) && got < 0)) q.masked_rows_ok = false;
          } else {
            q.lse_max_diff = std::max(q.lse_max_diff, std::abs(got - want));
          }
        }
      }
  q.rel_l2 = ny > 0 ? std::sqrt(diff / ny) : std::sqrt(diff);
  q.cosine = nx > 0 && ny > 0 ? dot / std::sqrt(nx * ny) : 1.0;
  return q;
}

ParityCase sage_case(std::int64_t d, DType dtype, int idx) {
  ParityCase c;
  c.dtype = dtype;
  c.head_size = c.head_size_v = d;
  c.seq_q = 200 + 61 * (idx % 3) + (idx % 4 == 3 ? 700 : 0);
  c.seq_kv = idx % 2 ? 333 : 1100;
  c.heads_q = 4;
  c.heads_kv = idx % 2 ? 2 : 4;
  c.causal = idx % 3 == 0;
  c.mask = idx % 4 == 1 ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
  c.lse = true;
  c.batch = 1 + idx % 2;
  return c;
}

// The 8-bit arithmetic's budget on the harness's inputs (normal q/k/v, keys sharing an offset):
// FP8 P*V costs a few per cent of relative L2; the FP16 P*V mode leaves only the INT8 Q*K^T error.
constexpr double kFp8RelL2 = 0.06, kFp8Cosine = 0.998;
constexpr double kFp16RelL2 = 0.02, kFp16Cosine = 0.9998;
constexpr double kLseTolerance = 0.05;

// A run's output, LSE and fully masked rows against the budget of its P*V mode.
void expect_within_budget(const Quality& q, bool fp8, const std::string& what) {
  EXPECT_EQ(q.error, "") << what;
  EXPECT_LE(q.rel_l2, fp8 ? kFp8RelL2 : kFp16RelL2) << what;
  EXPECT_GE(q.cosine, fp8 ? kFp8Cosine : kFp16Cosine) << what;
  EXPECT_LE(q.lse_max_diff, kLseTolerance) << what;
  EXPECT_TRUE(q.masked_rows_ok) << what;
}

// The bytes an output view spans on the device (poisoned between runs), and an LSE's values in
// (batch, head, row) order.
std::size_t output_bytes(const TensorView& out) {
  const std::int64_t last = (out.size(0) - 1) * out.stride(0) + (out.size(1) - 1) * out.stride(1) +
                            (out.size(2) - 1) * out.stride(2) + out.size(3);
  return static_cast<std::size_t>(last) * 2;  // 16-bit elements
}

std::vector<double> lse_values(const TensorView& l) {
  std::vector<double> values;
  for (std::int64_t b = 0; b < l.size(0); ++b)
    for (std::int64_t h = 0; h < l.size(1); ++h)
      for (std::int64_t i = 0; i < l.size(2); ++i)
        values.push_back(testing::read_element(l, b * l.stride(0) + h * l.stride(1) + i * l.stride(2)));
  return values;
}

// One run's output and LSE, read back for bitwise comparison.
struct RunBits {
  std::vector<double> out, lse;
};

// Poisons the device output (NaN in both dtypes), runs `call` on the device problem and reads its
// output and LSE back into `bits`: "" when that worked, else what failed.
std::string run_poisoned(testing::DeviceCase& device, const testing::CaseData& data,
                         const std::function<Status(const AttentionProblem&)>& call, RunBits& bits) {
  const TensorView& out = device.problem().out;
  if (cudaMemset(out.data, 0xff, output_bytes(out)) != cudaSuccess) return "could not poison the output";
  if (const Status st = call(device.problem()); !st.ok()) return "forward: " + st.ToString();
  if (!device.copy_back()) return "could not copy the outputs back";
  bits.out = testing::output_values(data.problem.out);
  bits.lse = lse_values(*data.problem.lse);
  return "";
}

// The shape of a same-bits test's case: batches, heads, rows, keys, causal, and key padding (with
// a batch that keeps no key: fully masked rows).
struct BitsShape {
  std::int64_t batch, heads_q, heads_kv, seq_q, seq_kv;
  bool causal, masked;
};

// sage_case's case (with the LSE) in head size d and `dtype`, of shape `sh`.
ParityCase bits_case(std::int64_t d, DType dtype, const BitsShape& sh) {
  ParityCase c = sage_case(d, dtype, 0);
  c.batch = sh.batch, c.heads_q = sh.heads_q, c.heads_kv = sh.heads_kv;
  c.seq_q = sh.seq_q, c.seq_kv = sh.seq_kv, c.causal = sh.causal;
  c.mask = sh.masked ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
  c.fully_masked_rows = sh.masked;
  c.lse = true;
  return c;
}

// `other` has `first`'s bits, and `first` wrote every output.
void expect_same_bits(const RunBits& first, const RunBits& other, const std::string& what) {
  for (double x : first.out) ASSERT_FALSE(std::isnan(x)) << what << ": an output left unwritten";
  EXPECT_EQ(other.out, first.out) << what;
  EXPECT_EQ(other.lse, first.lse) << what;
}

// Every kernel shape (two overlapping, three in-order consumer warpgroups, and four at hd64 with
// FP8 P V) on every case.
TEST(GpuSageAttn, ShapesMasksAndModesStayWithinTheBudget) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (sage::PvMode pv : {sage::PvMode::kFp8, sage::PvMode::kFp16})
        for (int groups : {2, 3, 4}) {
          const bool fp8 = pv == sage::PvMode::kFp8;
          if (groups == 4 && !sage::sage_four_groups_fit(static_cast<int>(d), fp8)) continue;
          const ParityCase c = sage_case(d, dtype, idx++);
          const Quality q = run_sage(c, pv, rng, groups);
          const std::string what = c.name() + (fp8 ? " fp8" : " fp16") + " groups " + std::to_string(groups) +
                                   " seed " + std::to_string(seed);
          expect_within_budget(q, fp8, what);
          std::printf("[sage] %-60s %s/%d relL2 %.4f cos %.6f lse %.4f\n", c.name().c_str(), fp8 ? "fp8 " : "fp16",
                      groups, q.rel_l2, q.cosine, q.lse_max_diff);
        }
}

// The Ampere/Ada kernel (compute_80 PTX, so a Hopper GPU runs it too) on the same cases: the
// accurate mode's budget, LSE and fully masked rows.
TEST(GpuSageAttn, TheAmpereKernelStaysWithinTheAccurateModesBudget) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (int rep = 0; rep < 2; ++rep) {
        ParityCase c = sage_case(d, dtype, idx++);
        if (rep == 1) c.mask = testing::MaskShape::kKeyPadding, c.fully_masked_rows = true;
        const Quality q = run_sage(c, sage::PvMode::kFp16, rng, 0, false, /*ampere=*/true);
        const std::string what = c.name() + " ampere seed " + std::to_string(seed);
        EXPECT_EQ(q.error, "") << what;
        EXPECT_LE(q.rel_l2, kFp16RelL2) << what;
        EXPECT_GE(q.cosine, kFp16Cosine) << what;
        EXPECT_LE(q.lse_max_diff, kLseTolerance) << what;
        EXPECT_TRUE(q.masked_rows_ok) << what;
        std::printf("[sage] %-60s ampere relL2 %.4f cos %.6f lse %.4f\n", c.name().c_str(), q.rel_l2, q.cosine,
                    q.lse_max_diff);
      }
}

// `gpu` (a SAGE_ATTN CUDA kernel in `pv` mode) against the CPU implementation of the same
// arithmetic on case `c`. The GPU kernels compute the CPU implementation's quantized values; what
// differs is ex2.approx, the FFMA score, fp32 summation order and the tensor cores' sums. So the GPU
// output must stay closer to the CPU's than either is to exact attention, and its error against
// float64 may exceed the CPU's by at most 10 %.
void expect_agreement_with_the_cpu(const ParityCase& c, sage::PvMode pv, std::mt19937_64& rng,
                                   const std::function<Status(const AttentionProblem&)>& gpu, const std::string& label,
                                   std::uint64_t seed) {
  auto data = testing::make_case_data(c, rng);
  testing::OracleOutput truth = testing::reference_attention(data->problem, testing::OraclePrecision::kFloat64);
  std::vector<double> exact;
  for (std::int64_t b = 0; b < truth.batch; ++b)
    for (std::int64_t i = 0; i < truth.seq_q; ++i)
      for (std::int64_t h = 0; h < truth.heads; ++h)
        for (std::int64_t e = 0; e < truth.head_size_v; ++e) exact.push_back(truth.at(b, i, h, e));
  ASSERT_TRUE(sage::run_sage_attn_cpu(data->problem, pv).ok()) << c.name();
  const std::vector<double> cpu = testing::output_values(data->problem.out);
  testing::DeviceCase device(*data);
  ASSERT_TRUE(device.ok()) << c.name();
  const Status s = gpu(device.problem());
  ASSERT_TRUE(s.ok()) << c.name() << ": " << s.ToString();
  ASSERT_TRUE(device.copy_back()) << c.name();
  const std::vector<double> out = testing::output_values(data->problem.out);
  const double e_cpu = testing::relative_l2(cpu, exact), e_gpu = testing::relative_l2(out, exact);
  const double apart = testing::relative_l2(out, cpu);
  std::printf("[sage] %-60s %s cpu %.4f gpu %.4f (x%.3f) gpu-cpu %.4f\n", c.name().c_str(), label.c_str(), e_cpu, e_gpu,
              e_gpu / e_cpu, apart);
  const std::string what = c.name() + " " + label + " seed " + std::to_string(seed);
  EXPECT_LE(e_gpu, 1.10 * e_cpu) << what;
  EXPECT_LT(apart, e_cpu) << what;
}

// The Ada kernel's FP8 P*V mode (mma.sync e4m3, compute_89; the Hopper GPU runs it too) on the
// same cases: the FP8 mode's budget, LSE and fully masked rows; and against the CPU implementation
// of the same arithmetic as the Hopper kernel is (below): at most 10 % more error than the CPU's,
// and closer to it than either is to exact attention.
TEST(GpuSageAttn, TheAdaKernelsFp8ModeStaysWithinItsBudgetAndAgreesWithTheCpu) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128}) {
      for (int rep = 0; rep < 2; ++rep) {
        ParityCase c = sage_case(d, dtype, idx++);
        if (rep == 1) c.mask = testing::MaskShape::kKeyPadding, c.fully_masked_rows = true;
        const Quality q = run_sage(c, sage::PvMode::kFp8, rng, 0, false, /*ampere=*/true);
        const std::string what = c.name() + " ada fp8 seed " + std::to_string(seed);
        expect_within_budget(q, /*fp8=*/true, what);
        std::printf("[sage] %-60s ada fp8 relL2 %.4f cos %.6f lse %.4f\n", c.name().c_str(), q.rel_l2, q.cosine,
                    q.lse_max_diff);
      }
      expect_agreement_with_the_cpu(
          sage_case(d, dtype, idx++), sage::PvMode::kFp8, rng,
          [](const AttentionProblem& p) { return sage::run_sage_attn_ampere_cuda(p, nullptr, sage::PvMode::kFp8); },
          "ada fp8", seed);
    }
}

// Inputs off 8-byte alignment take the quantization kernels' 2-byte loads, with the same result quality.
TEST(GpuSageAttn, MisalignedInputsStayWithinTheBudget) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (std::int64_t d : {64, 128}) {
    const ParityCase c = sage_case(d, DType::kBFloat16, 1);
    const Quality q = run_sage(c, sage::PvMode::kFp8, rng, 0, /*misaligned=*/true);
    EXPECT_EQ(q.error, "") << c.name();
    EXPECT_LE(q.rel_l2, kFp8RelL2) << c.name() << " seed " << seed;
    EXPECT_GE(q.cosine, kFp8Cosine) << c.name() << " seed " << seed;
    EXPECT_TRUE(q.masked_rows_ok) << c.name();
  }
}

TEST(GpuSageAttn, FullyMaskedRowsAreZeroWithLseMinusInfinity) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  ParityCase c = sage_case(128, DType::kBFloat16, 1);
  c.mask = testing::MaskShape::kKeyPadding;
  c.fully_masked_rows = true;
  c.batch = 2;
  for (int groups : {2, 3}) {
    const Quality q = run_sage(c, sage::PvMode::kFp8, rng, groups);
    EXPECT_EQ(q.error, "") << "groups " << groups;
    EXPECT_TRUE(q.masked_rows_ok) << c.name() << " groups " << groups << " seed " << seed;
    EXPECT_LE(q.rel_l2, kFp8RelL2) << c.name() << " groups " << groups << " seed " << seed;
  }
  // Four groups run hd64 only.
  ParityCase c64 = sage_case(64, DType::kBFloat16, 1);
  c64.mask = testing::MaskShape::kKeyPadding;
  c64.fully_masked_rows = true;
  c64.batch = 2;
  const Quality q = run_sage(c64, sage::PvMode::kFp8, rng, 4);
  EXPECT_EQ(q.error, "") << "groups 4";
  EXPECT_TRUE(q.masked_rows_ok) << c64.name() << " groups 4 seed " << seed;
  EXPECT_LE(q.rel_l2, kFp8RelL2) << c64.name() << " groups 4 seed " << seed;
}

// Four groups exist at hd64 with FP8 P V only: asked for anywhere else, the call is refused before
// anything is written.
TEST(GpuSageAttn, FourGroupsElsewhereAreRefusedWithoutWriting) {
  SKIP_WITHOUT_SAGE_GPU();
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major != 9) GTEST_SKIP() << "the consumer groups are the Hopper kernel's";
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (auto [d, pv] : {std::pair{std::int64_t{128}, sage::PvMode::kFp8}, std::pair{std::int64_t{64}, sage::PvMode::kFp16}}) {
    const ParityCase c = sage_case(d, DType::kBFloat16, 0);
    auto data = testing::make_case_data(c, rng);
    testing::DeviceCase device(*data);
    ASSERT_TRUE(device.ok());
    cudaMemset(const_cast<void*>(device.problem().out.data), 0x7f, 2);  // a sentinel in the first element
    const Status s = sage::run_sage_attn_cuda(device.problem(), pv, nullptr, sage::SageKernelChoice{4});
    EXPECT_EQ(s.code(), ErrorCode::kInvalidInput) << c.name() << ": " << s.ToString();
    std::uint16_t first = 0;
    cudaMemcpy(&first, device.problem().out.data, 2, cudaMemcpyDeviceToHost);
    EXPECT_EQ(first, 0x7f7f) << c.name() << ": a refused call wrote to out";
  }
}

// Few query tiles against many keys: the three-group kernel runs each tile as up to eight pieces of
// its key blocks on different CTAs and merges them (sage_config.h, sage_tail_split). Pieces that see
// only padding keys, and rows that see none at all, must merge to the same output and LSE.
TEST(GpuSageAttn, TilesSplitIntoPiecesStayWithinTheBudget) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (std::int64_t d : {64, 128})
    for (sage::PvMode pv : {sage::PvMode::kFp8, sage::PvMode::kFp16})
      for (int masked = 0; masked < 2; ++masked) {
        ParityCase c = sage_case(d, DType::kBFloat16, 2);
        c.seq_q = 500;
        c.seq_kv = 4100;  // 33 key blocks: 8 pieces of 4 or 5 for each of the 6 or 12 tiles
        c.heads_q = c.heads_kv = 2;
        c.batch = 1 + masked;  // masked: the second batch keeps no key at all
        c.causal = false;
        c.mask = masked ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
        c.fully_masked_rows = masked == 1;
        const bool fp8 = pv == sage::PvMode::kFp8;
        for (int groups : {3, 4}) {
          if (groups == 4 && !sage::sage_four_groups_fit(static_cast<int>(d), fp8)) continue;
          const Quality q = run_sage(c, pv, rng, groups);
          const std::string what = c.name() + (fp8 ? " fp8" : " fp16") + " groups " + std::to_string(groups) +
                                   " seed " + std::to_string(seed);
          expect_within_budget(q, fp8, what);
          std::printf("[sage] %-60s %s/%d split relL2 %.4f cos %.6f lse %.4f\n", c.name().c_str(),
                      fp8 ? "fp8 " : "fp16", groups, q.rel_l2, q.cosine, q.lse_max_diff);
        }
      }
}

// The quantization passes add their partials in a fixed order: with many kv heads, masked keys and
// GQA, every run gives the same bits (the output poisoned between runs), the first within the
// budget.
TEST(GpuSageAttn, EveryRunGivesTheSameBits) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (std::int64_t d : {64, 128})
    for (sage::PvMode pv : {sage::PvMode::kFp8, sage::PvMode::kFp16}) {
      ParityCase c = sage_case(d, DType::kBFloat16, 1);
      c.batch = 2;
      c.heads_q = 24;
      c.heads_kv = 12;  // 24 kv heads of 17 statistics chunks each
      c.seq_q = 130;  // few rows: the float64 oracle runs on the CPU
      c.seq_kv = 2100;
      c.causal = false;
      c.mask = testing::MaskShape::kKeyPadding;
      const bool fp8 = pv == sage::PvMode::kFp8;
      const std::string what = c.name() + (fp8 ? " fp8" : " fp16") + " seed " + std::to_string(seed);
      const Quality q = run_sage(c, pv, rng);
      expect_within_budget(q, fp8, what);
      auto data = testing::make_case_data(c, rng);
      testing::DeviceCase device(*data);
      ASSERT_TRUE(device.ok()) << what;
      RunBits runs[3];
      for (RunBits& run : runs)
        ASSERT_EQ(run_poisoned(device, *data,
                               [pv](const AttentionProblem& p) { return sage::run_sage_attn_cuda(p, pv, nullptr); },
                               run),
                  "")
            << what;
      for (int run = 1; run < 3; ++run) expect_same_bits(runs[0], runs[run], what + ", run " + std::to_string(run));
    }
}

// Key masks on the Hopper kernels walk only the key blocks that keep a key (SageParams::kv_walk):
// the blocks left out would add nothing, so the output and LSE must be the bits of the walk over
// every block reading the mask's bytes (SageKernelChoice::key_walk false), and within the budget
// against the float64 oracle. Three batches: a FLUX.1-style padded prompt (its text keys after the
// first 77-or-so dropped, whole key blocks among them), then random keys with two whole blocks and
// the sequence's last keys dropped, then no key at all. Every kernel shape, both P*V modes,
// QK16/V8. The bits are compared on as many query heads as the GPU has SMs and one query tile a
// head, so that the tiles fill whole waves: a short last wave splits its tiles into pieces by
// their key blocks (sage_tail_split), which the walk counts without the dropped ones, so pieces
// would start at other blocks and round otherwise.
TEST(GpuSageAttn, TheKeyWalkGivesTheByteMasksBits) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  struct Mode {
    const char* name;
    std::int64_t d;
    int groups;
    sage::PvMode pv;
    bool qk16;
    int fuse_q = -1;  // SageKernelChoice::fuse_q
  };
  const Mode modes[] = {{"fp8/2", 128, 2, sage::PvMode::kFp8, false},  {"fp8/3", 128, 3, sage::PvMode::kFp8, false},
                        {"fp8/3 Q in the kernel", 128, 3, sage::PvMode::kFp8, false, 1},
                        {"fp16/3", 128, 3, sage::PvMode::kFp16, false}, {"fp16/2", 64, 2, sage::PvMode::kFp16, false},
                        {"fp8/3", 64, 3, sage::PvMode::kFp8, false},    {"fp8/4", 64, 4, sage::PvMode::kFp8, false},
                        {"qk16/3", 128, 3, sage::PvMode::kFp8, true},   {"qk16/4", 64, 4, sage::PvMode::kFp8, true}};
  int idx = 0;
  for (const Mode& mode : modes) {
    ParityCase c = sage_case(mode.d, idx % 2 ? DType::kFloat16 : DType::kBFloat16, 0);
    c.batch = 3;
    c.heads_q = 4, c.heads_kv = 2;
    c.seq_q = 300 + 61 * idx;
    c.seq_kv = 1500 + 37 * idx;
    c.causal = false;
    c.mask = testing::MaskShape::kKeyPadding;
    c.text_keys = 512, c.prompt_keep = 77 + 3 * idx;
    c.fully_masked_rows = true;  // the last batch keeps no key
    c.lse = true;
    const std::string what = std::string(mode.name) + " " + c.name() + " seed " + std::to_string(seed);
    // Batch 1: random keys, blocks 2 and 5 and the last 50 keys dropped.
    std::bernoulli_distribution keep(0.7);
    std::vector<unsigned char> batch1(static_cast<std::size_t>(c.seq_kv));
    for (std::int64_t j = 0; j < c.seq_kv; ++j)
      batch1[static_cast<std::size_t>(j)] =
          keep(rng) && j / sage::kKvBlock != 2 && j / sage::kKvBlock != 5 && j < c.seq_kv - 50;
    const auto tweak = [&](testing::CaseData& data) {
      for (std::int64_t j = 0; j < c.seq_kv; ++j)
        testing::write_element(*data.problem.mask, c.seq_kv + j, batch1[static_cast<std::size_t>(j)]);
    };
    const auto run = [&](const AttentionProblem& p, bool walk) {
      const sage::SageKernelChoice choice{mode.groups, mode.fuse_q, false, walk};
      return mode.qk16 ? sage::run_qk16_v8_cuda(p, nullptr, choice) : sage::run_sage_attn_cuda(p, mode.pv, nullptr, choice);
    };
    if (!mode.qk16) expect_within_budget(run_sage(c, mode.pv, rng, mode.groups, false, false, tweak),
                                         mode.pv == sage::PvMode::kFp8, what);
    c.heads_q = sms, c.heads_kv = sms % 2 == 0 ? sms / 2 : sms;
    c.seq_q = 100;  // one query tile a head
    const std::string bits_what = std::string(mode.name) + " " + c.name() + " seed " + std::to_string(seed);
    auto data = testing::make_case_data(c, rng);
    tweak(*data);
    testing::DeviceCase device(*data);
    ASSERT_TRUE(device.ok()) << bits_what;
    RunBits bytes, walked;
    ASSERT_EQ(run_poisoned(device, *data, [&](const AttentionProblem& p) { return run(p, false); }, bytes), "")
        << bits_what;
    ASSERT_EQ(run_poisoned(device, *data, [&](const AttentionProblem& p) { return run(p, true); }, walked), "")
        << bits_what;
    expect_same_bits(walked, bytes, bits_what);
    ++idx;
  }
}

// Short key sequences on sm_90 quantize K and V in one read (sage_reads_kv_once: one launch of
// 16-channel slices, a cluster per kv head) instead of the statistics pass, the means and the K/V
// pass; it adds K's channel sums in those passes' order, so both ways give the same bits
// (DIFFATTN_SAGE_KV_SLICES=1 takes the one read, 0 the three launches). Both P*V modes, both
// kernels that read the Q pass and the one that quantizes Q itself, QK16/V8 (V only), both head
// sizes and dtypes, GQA, key padding with a batch that keeps no key, causal, LSE, and the longest
// sequence the slices take.
TEST(GpuSageAttn, ReadingKAndVOnceGivesTheThreeLaunchPassesBits) {
  SKIP_WITHOUT_SAGE_GPU();
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), cudaSuccess);
  if (major != 9 || minor != 0) GTEST_SKIP() << "K and V are read once on sm_90 only";
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  struct Mode {
    const char* name;
    int groups;
    sage::PvMode pv;
    bool qk16;
    int fuse_q;
  };
  const Mode modes[] = {{"fp8/3", 3, sage::PvMode::kFp8, false, 0}, {"fp8/3 Q in the kernel", 3, sage::PvMode::kFp8, false, 1},
                        {"fp8/2", 2, sage::PvMode::kFp8, false, 0}, {"fp16/3", 3, sage::PvMode::kFp16, false, 0},
                        {"qk16/3", 3, sage::PvMode::kFp8, true, 0}};
  const BitsShape shapes[] = {{2, 6, 3, 300, 1500, false, true},  // GQA; the second batch keeps no key
                          {1, 4, 4, 700, 700, true, false},
                          {1, 2, 1, 150, 6144, false, false}};  // the longest the slices take
  int idx = 0;
  for (std::int64_t d : {64, 128})
    for (const Mode& mode : modes)
      for (const BitsShape& sh : shapes) {
        const ParityCase c = bits_case(d, idx++ % 2 ? DType::kFloat16 : DType::kBFloat16, sh);
        const std::string what = std::string(mode.name) + " " + c.name() + " seed " + std::to_string(seed);
        auto data = testing::make_case_data(c, rng);
        testing::DeviceCase device(*data);
        ASSERT_TRUE(device.ok()) << what;
        const sage::SageKernelChoice choice{mode.groups, mode.fuse_q};
        const auto run = [&](const AttentionProblem& p) {
          return mode.qk16 ? sage::run_qk16_v8_cuda(p, nullptr, choice) : sage::run_sage_attn_cuda(p, mode.pv, nullptr, choice);
        };
        RunBits runs[2];  // K and V read once, then the three launches
        for (int three = 0; three < 2; ++three) {
          ASSERT_EQ(setenv("DIFFATTN_SAGE_KV_SLICES", three ? "0" : "1", 1), 0);
          ASSERT_EQ(sage::sage_reads_kv_once(device.problem(), major, minor,
                                             mode.qk16 ? sage::QkMode::k16 : sage::QkMode::kInt8),
                    three == 0)
              << what;
          const std::string ran = run_poisoned(device, *data, run, runs[three]);
          unsetenv("DIFFATTN_SAGE_KV_SLICES");
          ASSERT_EQ(ran, "") << what;
        }
        expect_same_bits(runs[0], runs[1], what);
        EXPECT_EQ(sage::sage_reads_kv_once(device.problem(), major, minor,
                                           mode.qk16 ? sage::QkMode::k16 : sage::QkMode::kInt8),
                  mode.qk16)
            << what << ": by default QK16/V8 reads K and V once, SAGE_ATTN's INT8 K does not";
      }
}

// The quantization passes take their blocks in either of two orders: the Q pass every head of a
// row block first (the default) or head by head (DIFFATTN_SAGE_Q_ORDER=rows), the statistics and
// K/V passes every kv head of a key chunk first (the default) or head by head
// (DIFFATTN_SAGE_KV_ORDER=heads). A block's
// arithmetic does not depend on the order, so all four give the same bits: several batches and
// heads, GQA, row and key counts that leave part blocks and an odd number of K groups, key padding
// with a batch that keeps no key, causal, both head sizes and dtypes, both P*V modes and QK16/V8
// (its V pass; the one-read slices off).
TEST(GpuSageAttn, TheQuantizationPassesGiveTheSameBitsInEveryOrder) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const BitsShape shapes[] = {{2, 6, 3, 300, 500, false, true}, {1, 5, 5, 1000, 700, true, false}};
  struct Mode {
    const char* name;
    sage::PvMode pv;
    bool qk16;
  };
  const Mode modes[] = {{"fp8", sage::PvMode::kFp8, false}, {"fp16", sage::PvMode::kFp16, false},
                        {"qk16", sage::PvMode::kFp8, true}};
  int idx = 0;
  for (std::int64_t d : {64, 128})
    for (const Mode& mode : modes)
      for (const BitsShape& sh : shapes) {
        const ParityCase c = bits_case(d, idx++ % 2 ? DType::kFloat16 : DType::kBFloat16, sh);
        const std::string what = c.name() + " " + mode.name + " seed " + std::to_string(seed);
        auto data = testing::make_case_data(c, rng);
        testing::DeviceCase device(*data);
        ASSERT_TRUE(device.ok()) << what;
        const auto run = [&](const AttentionProblem& p) {
          return mode.qk16 ? sage::run_qk16_v8_cuda(p, nullptr, sage::SageKernelChoice{3})
                           : sage::run_sage_attn_cuda(p, mode.pv, nullptr, sage::SageKernelChoice{3, 0});  // the Q pass
        };
        RunBits runs[4];  // bit 0: Q head by head, bit 1: K and V head by head
        for (int order = 0; order < 4; ++order) {
          ASSERT_EQ(setenv("DIFFATTN_SAGE_KV_SLICES", "0", 1), 0);
          if (order & 1) ASSERT_EQ(setenv("DIFFATTN_SAGE_Q_ORDER", "rows", 1), 0);
          if (order & 2) ASSERT_EQ(setenv("DIFFATTN_SAGE_KV_ORDER", "heads", 1), 0);
          const std::string ran = run_poisoned(device, *data, run, runs[order]);
          unsetenv("DIFFATTN_SAGE_Q_ORDER");
          unsetenv("DIFFATTN_SAGE_KV_ORDER");
          unsetenv("DIFFATTN_SAGE_KV_SLICES");
          ASSERT_EQ(ran, "") << what << " order " << order;
        }
        for (int order = 1; order < 4; ++order) expect_same_bits(runs[0], runs[order], what + " order " + std::to_string(order));
      }
}

// K and V quantized by the attention kernel's producer warps (DIFFATTN_SAGE_KV_IN_KERNEL=1,
// SageParams::kv_ready) take the K/V pass's arithmetic item by item, so the output and LSE must be
// the bits of the call whose K/V pass quantizes every pair (=0): the three-group kernel at hd128 and
// hd64 with Q from the Q pass and quantized by the kernel itself (its warps then take K/V items
// between tiles' Q), the four-group kernel at hd64, whole tiles and a split tail, GQA, rows and keys that
// leave part blocks and an odd number of K groups, causal, key padding read as bytes (the key walk
// keeps the K/V pass) with a batch that keeps no key, both dtypes. Every shape leaves pairs to the
// kernel on this GPU (sage_kv_in_kernel_pairs).
TEST(GpuSageAttn, KAndVQuantizedInTheKernelGiveTheKvPasssBits) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const BitsShape shapes[] = {{2, 32, 8, 2000, 700, false, false},   // whole tiles
                              {2, 32, 8, 2000, 700, false, true},    // key padding (bytes)
                              {1, 48, 48, 1100, 1500, true, false},  // causal, no GQA
                              {1, 68, 17, 1000, 1500, false, false}};  // a split tail on 132 SMs
  int idx = 0;
  for (std::int64_t d : {64, 128})
    for (int groups : {3, 4})
      for (int fuse_q : {0, 1})
        for (const BitsShape& sh : shapes) {
          if ((groups == 4 && d != 64) || (groups == 4 && fuse_q == 1)) continue;
          const ParityCase c = bits_case(d, idx++ % 2 ? DType::kFloat16 : DType::kBFloat16, sh);
          const std::string what = c.name() + " groups " + std::to_string(groups) + " fused Q " + std::to_string(fuse_q) +
                                   " seed " + std::to_string(seed);
          auto data = testing::make_case_data(c, rng);
          testing::DeviceCase device(*data);
          ASSERT_TRUE(device.ok()) << what;
          ASSERT_GT(sage::sage_kv_in_kernel_pairs(device.problem(), groups, sms), 0) << what;
          sage::SageKernelChoice choice{groups, fuse_q};
          choice.key_walk = false;
          const auto run = [&](const AttentionProblem& p) {
            return sage::run_sage_attn_cuda(p, sage::PvMode::kFp8, nullptr, choice);
          };
          RunBits pass, kernel;
          ASSERT_EQ(setenv("DIFFATTN_SAGE_KV_SLICES", "0", 1), 0);
          ASSERT_EQ(setenv("DIFFATTN_SAGE_KV_IN_KERNEL", "0", 1), 0);
          const std::string ran_pass = run_poisoned(device, *data, run, pass);
          ASSERT_EQ(setenv("DIFFATTN_SAGE_KV_IN_KERNEL", "1", 1), 0);
          const std::string ran_kernel = run_poisoned(device, *data, run, kernel);
          unsetenv("DIFFATTN_SAGE_KV_IN_KERNEL");
          unsetenv("DIFFATTN_SAGE_KV_SLICES");
          ASSERT_EQ(ran_pass, "") << what;
          ASSERT_EQ(ran_kernel, "") << what;
          expect_same_bits(pass, kernel, what);
        }
}

// The Q quantization's divisions avoid IEEE division's slow-path call (sage_quant.cuh): for every
// non-negative float, and a NaN, they give IEEE division's bits.
TEST(GpuSageAttn, CallFreeDivisionsGiveIeeeDivisionsBitsForEveryFloat) {
  SKIP_WITHOUT_SAGE_GPU();
  std::uint64_t mismatches[3] = {1, 1, 1};
  const Status st = sage::count_division_mismatches(mismatches);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(mismatches[0], 0u) << "127 / amax";
  EXPECT_EQ(mismatches[1], 0u) << "amax / 127";
  EXPECT_EQ(mismatches[2], 0u) << "1 / x";
}

// The three-group FP8 kernel quantizes Q itself (its producer's spare warps) unless told to read the
// Q pass's codes; both use the same operations, so the outputs and LSEs must be the same bits: whole
// tiles taken two or more per CTA (both Q buffers), split tiles, rows past the last whole tile, GQA,
// key padding with a batch that keeps no key, causal, both head sizes and dtypes.
TEST(GpuSageAttn, TheKernelsOwnQuantizationOfQGivesTheQPasssBits) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const BitsShape shapes[] = {{1, 24, 8, 1000, 300, false, false},  // 144 whole tiles: two per CTA
                          {2, 6, 3, 130, 2100, false, true},     // 12 tiles, each split into pieces
                          {1, 4, 4, 700, 700, true, false}};
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (const BitsShape& sh : shapes) {
        const ParityCase c = bits_case(d, dtype, sh);
        const std::string what = c.name() + " seed " + std::to_string(seed);
        auto data = testing::make_case_data(c, rng);
        testing::DeviceCase device(*data);
        ASSERT_TRUE(device.ok()) << what;
        RunBits runs[2];  // the Q pass, then the kernel's own quantization of Q
        for (int fused = 0; fused < 2; ++fused)
          ASSERT_EQ(run_poisoned(device, *data,
                                 [fused](const AttentionProblem& p) {
                                   return sage::run_sage_attn_cuda(p, sage::PvMode::kFp8, nullptr,
                                                                   sage::SageKernelChoice{3, fused});
                                 },
                                 runs[fused]),
                    "")
              << what;
        expect_same_bits(runs[1], runs[0], what);
      }
}

// The Hopper kernels in both P*V modes against the CPU implementation (expect_agreement_with_the_cpu).
TEST(GpuSageAttn, AgreesWithTheCpuImplementationOfTheSameArithmetic) {
  SKIP_WITHOUT_SAGE_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (sage::PvMode pv : {sage::PvMode::kFp8, sage::PvMode::kFp16})
        expect_agreement_with_the_cpu(
            sage_case(d, dtype, idx++), pv, rng,
            [pv](const AttentionProblem& p) { return sage::run_sage_attn_cuda(p, pv, nullptr); },
            pv == sage::PvMode::kFp8 ? "fp8 " : "fp16", seed);
}

// Block-sparse lists of 128 x 128 tiles: each (batch, head, query tile) lists about half of the key
// tiles at random; every fifth row lists none.
BlockSparseLayout half_lists(const ParityCase& c, std::mt19937_64& rng) {
  BlockSparseLayout l;
  l.q_tile = l.k_tile = sage::kKvBlock;
  l.batch = c.batch, l.heads = c.heads_q;
  l.q_tiles = tile_count(c.seq_q, l.q_tile), l.k_tiles = tile_count(c.seq_kv, l.k_tile);
  l.offsets.push_back(0);
  for (std::int64_t r = 0; r < l.batch * l.heads * l.q_tiles; ++r) {
    if (r % 5 != 4)
      for (std::int32_t j = 0; j < l.k_tiles; ++j)
        if (rng() % 2 == 0 || j == r % l.k_tiles) l.indices.push_back(j);
    l.offsets.push_back(static_cast<std::int32_t>(l.indices.size()));
  }
  return l;
}

// The layout's arrays on the device, freed with the object.
struct DeviceLists {
  std::int32_t *offsets = nullptr, *indices = nullptr, *tile_rows = nullptr;
  explicit DeviceLists(const BlockSparseLayout& l) {
    const std::pair<std::int32_t**, const std::vector<std::int32_t>*> parts[] = {
        {&offsets, &l.offsets}, {&indices, &l.indices}, {&tile_rows, &l.tile_rows}};
    for (const auto& [at, host] : parts) {
      if (host->empty()) continue;
      cudaMalloc(at, host->size() * sizeof(std::int32_t));
      cudaMemcpy(*at, host->data(), host->size() * sizeof(std::int32_t), cudaMemcpyHostToDevice);
    }
  }
  ~DeviceLists() {
    for (std::int32_t* p : {offsets, indices, tile_rows}) cudaFree(p);
  }
  flash::DeviceBlockSparseLists view(int tile) const { return {tile, tile, offsets, indices, tile_rows}; }
};

// The block-sparse walk (RAINFUSION_ATTN's 8-bit fine pass) against the CPU walk of the same
// arithmetic on the same lists, with block-sparse attention in the inputs' precision as the exact
// result: the GPU adds at most 10 % to the CPU's error. Padded tiles on the self-attention cases;
// rows past a tile's valid rows are not compared (the GPU computes them, the CPU leaves them).
TEST(GpuSageAttn, BlockSparseWalkAgreesWithTheCpuWalk) {
  SKIP_WITHOUT_SAGE_GPU();
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major != 9) GTEST_SKIP() << "the block-sparse walk is Hopper's";
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (sage::PvMode pv : {sage::PvMode::kFp8, sage::PvMode::kFp16}) {
        ParityCase c;
        c.dtype = dtype, c.head_size = c.head_size_v = d, c.batch = 1 + idx % 2;
        c.heads_q = 4, c.heads_kv = idx % 2 ? 2 : 4, c.lse = true;
        const bool padded = idx % 2 == 0;
        c.seq_q = 128 * 6 + 37, c.seq_kv = padded ? c.seq_q : 128 * 4 + 5;
        ++idx;
        auto data = testing::make_case_data(c, rng);
        BlockSparseLayout lists = half_lists(c, rng);
        if (padded)
          for (std::int64_t t = 0; t < lists.q_tiles; ++t) {
            const auto rows = static_cast<std::int32_t>(std::min<std::int64_t>(128, c.seq_q - t * 128));
            lists.tile_rows.push_back(t % 3 == 1 ? 1 + static_cast<std::int32_t>(rng() % rows) : rows);
          }
        const auto valid_row = [&](std::int64_t i) {
          const std::int64_t t = i / 128;
          return lists.tile_rows.empty() || i - t * 128 < lists.tile_rows[static_cast<std::size_t>(t)];
        };
        const auto values = [&](const TensorView& out) {
          std::vector<double> v;
          for (std::int64_t b = 0; b < c.batch; ++b)
            for (std::int64_t i = 0; i < c.seq_q; ++i)
              for (std::int64_t h = 0; h < c.heads_q; ++h)
                for (std::int64_t e = 0; valid_row(i) && e < d; ++e)
                  v.push_back(testing::read_element(out, testing::element_offset(out, {b, i, h, e})));
          return v;
        };
        const Status exact_run = run_block_sparse_cpu(data->problem, lists);
        ASSERT_TRUE(exact_run.ok()) << c.name() << ": " << exact_run.message();
        const std::vector<double> exact = values(data->problem.out);
        const Status cpu_run = sage::run_sage_block_sparse_cpu(data->problem, lists, pv);
        ASSERT_TRUE(cpu_run.ok()) << c.name() << ": " << cpu_run.message();
        const std::vector<double> cpu = values(data->problem.out);
        testing::DeviceCase device(*data);
        ASSERT_TRUE(device.ok()) << c.name();
        const DeviceLists on_device(lists);
        const Status s = sage::run_sage_block_sparse_cuda(device.problem(), on_device.view(128), pv, nullptr);
        ASSERT_TRUE(s.ok()) << c.name() << ": " << s.ToString();
        ASSERT_TRUE(device.copy_back()) << c.name();
        const std::vector<double> gpu = values(data->problem.out);
        const double e_cpu = testing::relative_l2(cpu, exact), e_gpu = testing::relative_l2(gpu, exact);
        const double apart = testing::relative_l2(gpu, cpu);
        const bool fp8 = pv == sage::PvMode::kFp8;
        std::printf("[sage-bs] %-52s %s cpu %.4f gpu %.4f (x%.3f) gpu-cpu %.4f\n", c.name().c_str(),
                    fp8 ? "fp8 " : "fp16", e_cpu, e_gpu, e_gpu / e_cpu, apart);
        const std::string what = c.name() + (fp8 ? " fp8" : " fp16") + " seed " + std::to_string(seed);
        EXPECT_LE(e_gpu, 1.10 * e_cpu) << what;
        EXPECT_LT(apart, e_cpu) << what;
        // Rows with an empty list: zeros (the lists' fifth rows).
        for (std::int64_t h = 0; h < c.heads_q; ++h)
          for (std::int64_t t = 0; t < lists.q_tiles; ++t) {
            const std::int64_t r = lists.row(0, h, t);
            if (lists.offsets[r] != lists.offsets[r + 1]) continue;
            const std::int64_t i = t * 128;
            EXPECT_EQ(testing::read_element(data->problem.out, testing::element_offset(data->problem.out, {0, i, h, 0})),
                      0.0) << what;
          }
      }
  // Lists of other tiles are refused before anything runs.
  ParityCase c;
  c.dtype = DType::kBFloat16, c.head_size = c.head_size_v = 128, c.seq_q = c.seq_kv = 300;
  auto data = testing::make_case_data(c, rng);
  testing::DeviceCase device(*data);
  ASSERT_TRUE(device.ok());
  const BlockSparseLayout small = full_block_sparse_layout(1, c.heads_q, 300, 300, 64, 64);
  const DeviceLists on_device(small);
  EXPECT_EQ(sage::run_sage_block_sparse_cuda(device.problem(), on_device.view(64), sage::PvMode::kFp8, nullptr).code(),
            ErrorCode::kInvalidInput);
}

TEST(GpuSageAttn, HeadSizesWithoutAKernelAreRefusedWithoutWriting) {
  SKIP_WITHOUT_SAGE_GPU();
  std::mt19937_64 rng(fresh_seed());
  ParityCase c = sage_case(96, DType::kBFloat16, 0);
  auto data = testing::make_case_data(c, rng);
  testing::DeviceCase device(*data);
  ASSERT_TRUE(device.ok());
  cudaMemset(const_cast<void*>(device.problem().out.data), 0x7f, 2);  // a sentinel in the first element
  const Status s = sage::run_sage_attn_cuda(device.problem(), sage::PvMode::kFp8, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("64 and 128"), std::string::npos) << s.message();
  std::uint16_t first = 0;
  cudaMemcpy(&first, device.problem().out.data, 2, cudaMemcpyDeviceToHost);
  EXPECT_EQ(first, 0x7f7f) << "a refused call wrote to out";
}

#endif  // DIFFATTN_HAVE_CUDA

TEST(GpuSageAttn, KernelArchitecturesAreStated) {
#if DIFFATTN_HAVE_CUDA
  EXPECT_TRUE(sage::sage_cuda_kernel_for(9, 0));
  EXPECT_TRUE(sage::sage_cuda_kernel_for(8, 0));
  EXPECT_TRUE(sage::sage_cuda_kernel_for(8, 9));
  EXPECT_FALSE(sage::sage_cuda_kernel_for(7, 5));
  EXPECT_FALSE(sage::sage_cuda_kernel_for(10, 0));
#else
  EXPECT_FALSE(sage::sage_cuda_kernel_for(9, 0));
#endif
}

}  // namespace
}  // namespace diffattn
