// The layer holds every call to what its backend declares (BackendDescriptor::unsupported_reasons),
// once for all backends, with each call shape's verdict kept: refusals carry the reasons the
// backends gave before the check moved here, nothing reaches a backend that declares it cannot run
// the call, and a kept verdict never answers for another shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/strings.h"
#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "layer/backend_call_check.h"
#include "parity/cases.h"
#include "parity/fresh_rng.h"
#include "parity/harness.h"
#include "parity/properties.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;

const BackendDescriptor& builtin(const char* name) { return **global_registry().find(name); }

// Runs `c` through a layer that names `backend`, with the outputs poisoned first.
struct Refusal {
  Status status;
  std::string untouched;  // empty: the refused call wrote nothing
  ProblemShape shape;
};

Refusal run_through_layer(const char* backend, const testing::ParityCase& c, std::mt19937_64& rng) {
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& p = data->problem;
  testing::poison(p.out);
  if (p.lse) testing::poison(*p.lse);
  auto layer = testing::layer_for(builtin(backend), probe_cpu_platform(), p);
  if (!layer.ok()) return {layer.status(), "", p.shape()};
  const Status status = layer->forward(p, nullptr);
  return {status, testing::check_untouched(p), p.shape()};
}

testing::ParityCase flashinfer_case() {
  testing::ParityCase c;
  c.dtype = DType::kBFloat16, c.head_size = c.head_size_v = 64;
  return c;
}

TEST(BackendCallCheck, FlashInferCallsOutsideItsDeclarationsAreRefusedByTheLayerWithItsReasons) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = testing::fresh_rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::ParityCase fp32 = flashinfer_case();
  fp32.dtype = DType::kFloat32;
  testing::ParityCase causal_masked = flashinfer_case();
  causal_masked.causal = true, causal_masked.mask = testing::MaskShape::kKeyPadding;
  const Refusal dtype = run_through_layer("FLASHINFER_ATTN", fp32, rng);
  EXPECT_EQ(dtype.status.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(dtype.status.message(),
            "FLASHINFER_ATTN cannot run this call: dtype float32 is not supported (supported: float16, bfloat16). "
            "Select TORCH_SDPA instead.");
  EXPECT_EQ(dtype.untouched, "");
  // The message FLASHINFER_ATTN's own check gave, word for word: its reason already names the alternative.
  const Refusal both = run_through_layer("FLASHINFER_ATTN", causal_masked, rng);
  EXPECT_EQ(both.status.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(both.status.message(),
            "FLASHINFER_ATTN cannot run this call: " +
                join(builtin("FLASHINFER_ATTN").unsupported_reasons(both.shape), "; ") + ".");
  EXPECT_THAT(both.status.message(), HasSubstr("causal=true together with an explicit mask is not supported"));
  EXPECT_EQ(both.untouched, "");
  EXPECT_TRUE(run_through_layer("FLASHINFER_ATTN", flashinfer_case(), rng).status.ok());
}

TEST(BackendCallCheck, FastvideoVsaCallsOutsideItsDeclarationsAreRefusedByTheLayerWithItsReasons) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = testing::fresh_rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::ParityCase c;
  c.dtype = DType::kBFloat16, c.head_size = c.head_size_v = 64;
  c.video = VideoGeometry{2, 4, 4};
  c.seq_q = c.seq_kv = c.video->tokens();
  testing::ParityCase with_lse = c;
  with_lse.lse = true;
  const Refusal lse = run_through_layer("FASTVIDEO_VSA", with_lse, rng);
  EXPECT_EQ(lse.status.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(lse.status.message(),
            "FASTVIDEO_VSA cannot run this call: log-sum-exp output is not supported. Select TORCH_SDPA instead.");
  EXPECT_EQ(lse.untouched, "");
  testing::ParityCase masked_causal = c;
  masked_causal.mask = testing::MaskShape::kKeyPadding, masked_causal.causal = true;
  const Refusal two = run_through_layer("FASTVIDEO_VSA", masked_causal, rng);
  EXPECT_EQ(two.status.message(), "FASTVIDEO_VSA cannot run this call: causal attention is not supported; key-padding "
                                  "masks [B, Skv] are not supported. Select TORCH_SDPA instead.");
  EXPECT_EQ(two.untouched, "");
  EXPECT_TRUE(run_through_layer("FASTVIDEO_VSA", c, rng).status.ok());
}

TEST(BackendCallCheck, RainfusionCallsOutsideItsDeclarationsAreRefusedByTheLayerWithItsReasons) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = testing::fresh_rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::ParityCase c;
  c.dtype = DType::kBFloat16, c.head_size = c.head_size_v = 64;
  c.video = VideoGeometry{2, 8, 8};
  c.seq_q = c.seq_kv = c.video->sequence_length();
  testing::ParityCase causal_lse = c;
  causal_lse.causal = true, causal_lse.lse = true;
  const Refusal refused = run_through_layer("RAINFUSION_ATTN", causal_lse, rng);
  EXPECT_EQ(refused.status.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(refused.status.message(), "RAINFUSION_ATTN cannot run this call: causal attention is not supported; "
                                      "log-sum-exp output is not supported. Select TORCH_SDPA instead.");
  EXPECT_EQ(refused.untouched, "");
  const Refusal ran = run_through_layer("RAINFUSION_ATTN", c, rng);
  EXPECT_TRUE(ran.status.ok()) << ran.status.message();
}

// A backend that counts its calls, declared to refuse calls with 3 keys (its extra reason counts
// how often it is asked) and, when named, calls with 5.
struct Counts {
  int asked = 0;
  int forwards = 0;
};

class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(Counts* counts) : counts_(counts) {}
  std::string_view name() const override { return "COUNTED_ATTN"; }
  Status forward(const AttentionProblem&, void*) override {
    ++counts_->forwards;
    return Status::Ok();
  }

 private:
  Counts* counts_;
};

BackendDescriptor counted_descriptor(Counts* counts) {
  BackendDescriptor d;
  d.name = "COUNTED_ATTN";
  d.caps.devices = {DeviceKind::kCpu};
  d.caps.dtypes = {DType::kFloat32};
  d.caps.lse = false;
  d.extra_problem_reasons = [counts](const ProblemShape& shape) {
    ++counts->asked;
    std::vector<std::string> reasons;
    if (shape.seqlen_kv == 3) reasons.push_back("3 keys are not supported");
    return reasons;
  };
  d.explicit_problem_reasons = [](const ProblemShape& shape) {
    std::vector<std::string> reasons;
    if (shape.seqlen_kv == 5) reasons.push_back("5 keys are not supported when named");
    return reasons;
  };
  d.create = [counts](const BackendInit&) -> Result<std::unique_ptr<Backend>> {
    return std::unique_ptr<Backend>(std::make_unique<CountingBackend>(counts));
  };
  return d;
}

class CountedLayerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.add(counted_descriptor(&counts_)).ok()); }

  Result<Attention> layer() {
    AttentionLayerDesc desc;
    desc.num_heads = desc.num_kv_heads = 2;
    desc.head_size = 16;
    AttentionConfig config;
    config.default_spec = AttentionSpec{};
    config.default_spec->backend = "COUNTED_ATTN";
    Selector selector(make_platform(probe_cpu_platform(), registry_), &registry_);
    return Attention::Create(desc, config, selector);
  }
  Status call(const Attention& layer, std::int64_t keys, bool lse = false) {
    testing::ParityCase c;
    c.seq_q = 4, c.seq_kv = keys, c.head_size = c.head_size_v = 16, c.lse = lse;
    auto data = testing::make_case_data(c, rng_);
    return layer.forward(data->problem, nullptr);
  }

  Registry registry_;
  Counts counts_;
  std::mt19937_64 rng_{testing::fresh_seed()};  // inputs only sized here: their values do not matter
};

TEST_F(CountedLayerTest, AShapeIsCheckedOnceAndARefusedOneNeverReachesTheBackend) {
  auto l = layer();
  ASSERT_TRUE(l.ok()) << l.status().message();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(call(*l, 7).ok());
  EXPECT_EQ(counts_.asked, 1);
  EXPECT_EQ(counts_.forwards, 3);
  for (int i = 0; i < 2; ++i) {
    const Status refused = call(*l, 3);
    EXPECT_EQ(refused.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(refused.message(), "COUNTED_ATTN cannot run this call: 3 keys are not supported. Select TORCH_SDPA instead.");
  }
  EXPECT_EQ(counts_.asked, 2);
  EXPECT_EQ(counts_.forwards, 3);
  const Status lse = call(*l, 7, true);  // the shape kept as runnable, with an lse asked for: another shape
  EXPECT_EQ(lse.message(), "COUNTED_ATTN cannot run this call: log-sum-exp output is not supported. Select TORCH_SDPA "
                           "instead.");
  ASSERT_TRUE(call(*l, 7).ok());
  EXPECT_EQ(counts_.forwards, 4);
}

TEST_F(CountedLayerTest, KeptVerdictsAreBoundedAndAnEvictedShapeIsCheckedAgain) {
  auto l = layer();
  ASSERT_TRUE(l.ok()) << l.status().message();
  const std::int64_t shapes = static_cast<std::int64_t>(BackendCallCheck::kMaxVerdicts) + 1;
  for (std::int64_t keys = 6; keys < 6 + shapes; ++keys) ASSERT_TRUE(call(*l, keys).ok()) << keys;
  EXPECT_EQ(counts_.asked, shapes);
  ASSERT_TRUE(call(*l, 6).ok());  // the oldest verdict made room for the newest
  EXPECT_EQ(counts_.asked, shapes + 1);
  EXPECT_EQ(call(*l, 3).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(counts_.forwards, shapes + 1);
}

TEST_F(CountedLayerTest, ReasonsForNamedChoicesHoldOnlyWhenTheBackendWasNamed) {
  const BackendDescriptor& d = **registry_.find("COUNTED_ATTN");
  ProblemShape five;
  five.dtype = DType::kFloat32, five.seqlen_q = 4, five.seqlen_kv = 5, five.heads_q = five.heads_kv = 2;
  five.head_size = five.head_size_v = 16;
  EXPECT_TRUE(BackendCallCheck(d, /*explicit_choice=*/false).check(five).ok());
  EXPECT_EQ(BackendCallCheck(d, /*explicit_choice=*/true).check(five).message(),
            "COUNTED_ATTN cannot run this call: 5 keys are not supported when named. Select TORCH_SDPA instead.");
  EXPECT_THAT(d.unsupported_reasons(five), ::testing::ElementsAre("5 keys are not supported when named"));
  EXPECT_THAT(d.unsupported_reasons(five, /*explicit_choice=*/false), ::testing::IsEmpty());
  auto l = layer();  // named in the configuration
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(call(*l, 5).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(counts_.forwards, 0);
}

}  // namespace
}  // namespace diffattn
