#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <vector>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "platform/described_platforms.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;

// Records what the layer handed to the factory and to forward.
struct Recorded {
  BackendInit init;
  int forwards = 0;
  std::optional<float> scale;  // of the last call the backend received
  bool causal = false;
  std::optional<TensorView> mask;
};

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(Recorded* recorded) : recorded_(recorded) {}
  std::string_view name() const override { return "recording"; }
  Status forward(const AttentionProblem& problem, void*) override {
    ++recorded_->forwards;
    recorded_->scale = problem.scale;
    recorded_->causal = problem.causal;
    recorded_->mask = problem.mask;
    return Status::Ok();
  }

 private:
  Recorded* recorded_;
};

class AttentionLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_backends(registry_);
    for (const char* name : {"TORCH_SDPA", "FLASH_ATTN"}) {
      ASSERT_TRUE(registry_.replace_implementation(name, [this](const BackendInit& init) -> Result<std::unique_ptr<Backend>> {
        recorded_.init = init;
        return std::unique_ptr<Backend>(std::make_unique<RecordingBackend>(&recorded_));
      }).ok());
    }
  }
  Selector selector_on(const PlatformInfo& info) { return Selector(make_platform(info, registry_), &registry_); }

  Registry registry_;
  Recorded recorded_;
};

AttentionLayerDesc wan_self_attention() {
  AttentionLayerDesc desc;
  desc.num_heads = 12;
  desc.head_size = 128;
  desc.role = "self";
  desc.category = "self";
  desc.traits.allows_trtllm_default = true;
  return desc;
}

// A small self-attention layer's declaration (4 query heads, 2 kv heads of 16) for calls on the CPU.
AttentionLayerDesc small_self_attention() {
  AttentionLayerDesc desc = wan_self_attention();
  desc.num_heads = 4;
  desc.num_kv_heads = 2;
  desc.head_size = 16;
  return desc;
}

struct Tensors {
  std::vector<float> q, k, v, out;
};

Tensors random_tensors(int heads, int kv_heads, int head_size) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal;
  Tensors t;
  t.q.resize(4 * heads * head_size);
  t.k.resize(6 * kv_heads * head_size);
  t.v.resize(6 * kv_heads * head_size);
  t.out.resize(4 * heads * head_size);
  for (auto* buffer : {&t.q, &t.k, &t.v}) {
    for (float& x : *buffer) x = normal(rng);
  }
  return t;
}

AttentionProblem problem_for(Tensors& t, int heads, int kv_heads, int head_size) {
  AttentionProblem p;
  p.q = TensorView::Contiguous(t.q.data(), DType::kFloat32, {1, 4, heads, head_size});
  p.k = TensorView::Contiguous(t.k.data(), DType::kFloat32, {1, 6, kv_heads, head_size});
  p.v = TensorView::Contiguous(t.v.data(), DType::kFloat32, {1, 6, kv_heads, head_size});
  p.out = TensorView::Contiguous(t.out.data(), DType::kFloat32, {1, 4, heads, head_size});
  return p;
}

TEST_F(AttentionLayerTest, ResolvesOnceAndHandsTheBackendItsInit) {
  Selector selector = selector_on(testing::probed_like(9, 0));
  AttentionConfig config;
  auto layer = Attention::Create(wan_self_attention(), config, selector);
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  EXPECT_EQ(layer->resolution().backend, "FLASH_ATTN");
  EXPECT_EQ(layer->resolution().source, ResolutionSource::kPlatform);
  EXPECT_EQ(recorded_.init.num_heads, 12);
  EXPECT_EQ(recorded_.init.num_kv_heads, 12);
  EXPECT_EQ(recorded_.init.head_size, 128);
  EXPECT_EQ(recorded_.init.role, "self");
  EXPECT_FALSE(recorded_.init.explicit_choice);
  EXPECT_FALSE(recorded_.init.spec.has_value());
  EXPECT_EQ(recorded_.init.platform.sm_string(), "sm_90");
  EXPECT_EQ(layer->desc().num_kv_heads, 12);
  EXPECT_EQ(selector.platform_queries(), 1u);
}

TEST_F(AttentionLayerTest, ExplicitSpecReachesTheBackend) {
  Selector selector = selector_on(testing::described_cpu());
  AttentionConfig config;
  config.per_role["cross"].backend = "torch_sdpa";
  AttentionLayerDesc desc = wan_self_attention();
  desc.role = "cross";
  desc.category = "cross";
  desc.num_kv_heads = 4;
  desc.scale = 0.125f;
  desc.causal = true;
  auto layer = Attention::Create(desc, config, selector);
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  EXPECT_EQ(layer->resolution().backend, "TORCH_SDPA");
  EXPECT_EQ(layer->resolution().source, ResolutionSource::kPerRole);
  EXPECT_TRUE(recorded_.init.explicit_choice);
  ASSERT_TRUE(recorded_.init.spec.has_value());
  EXPECT_EQ(recorded_.init.spec->backend, "torch_sdpa");
  EXPECT_EQ(recorded_.init.num_kv_heads, 4);
}

// A dense mask that repeats one row of keys over the queries and heads through zero strides (what
// torch's expand gives) reaches the backend as the key-padding view of the same memory; a mask
// whose rows differ, or that holds its rows in memory, stays dense.
TEST_F(AttentionLayerTest, ADenseMaskThatRepeatsOneRowReachesTheBackendAsKeyPadding) {
  Selector selector = selector_on(testing::described_cpu());
  AttentionLayerDesc desc = small_self_attention();
  auto layer = Attention::Create(desc, AttentionConfig{}, selector);
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  Tensors t = random_tensors(4, 2, 16);
  std::vector<std::uint8_t> keep(4 * 4 * 6, 1);
  keep[3] = 0;
  AttentionProblem p = problem_for(t, 4, 2, 16);

  TensorView repeated = TensorView::Contiguous(keep.data(), DType::kBool, {1, 4, 4, 6});
  repeated.strides = {6, 0, 0, 1};  // one row of 6 keys for every head and query
  p.mask = repeated;
  ASSERT_TRUE(layer->forward(p).ok());
  ASSERT_TRUE(recorded_.mask.has_value());
  EXPECT_EQ(recorded_.mask->ndim, 2);
  EXPECT_EQ(recorded_.mask->shape_string(), "[1, 6]");
  EXPECT_EQ(recorded_.mask->data, keep.data());
  EXPECT_EQ(recorded_.mask->stride(1), 1);

  repeated.shape[1] = 1;  // [1, 1, Sq, Skv], the query dimension through stride 0
  p.mask = repeated;
  ASSERT_TRUE(layer->forward(p).ok());
  EXPECT_EQ(recorded_.mask->ndim, 2);

  TensorView per_head = repeated;
  per_head.shape[1] = 4;
  per_head.strides = {96, 24, 0, 1};  // each head its own row
  p.mask = per_head;
  ASSERT_TRUE(layer->forward(p).ok());
  EXPECT_EQ(recorded_.mask->ndim, 4);

  p.mask = TensorView::Contiguous(keep.data(), DType::kBool, {1, 1, 4, 6});  // rows in memory, maybe different
  ASSERT_TRUE(layer->forward(p).ok());
  EXPECT_EQ(recorded_.mask->ndim, 4);
}

// Only the layer completes a call: the backend receives the layer's scale and causal flag on
// every call, and a call's own scale wins over the layer's.
TEST_F(AttentionLayerTest, TheLayerCompletesEveryCall) {
  Selector selector = selector_on(testing::described_cpu());
  AttentionLayerDesc desc = small_self_attention();
  desc.scale = 0.125f;
  desc.causal = true;
  auto layer = Attention::Create(desc, AttentionConfig{}, selector);
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  Tensors t = random_tensors(4, 2, 16);
  ASSERT_TRUE(layer->forward(problem_for(t, 4, 2, 16)).ok());
  EXPECT_EQ(recorded_.scale, 0.125f);
  EXPECT_TRUE(recorded_.causal);
  AttentionProblem scaled = problem_for(t, 4, 2, 16);
  scaled.scale = 0.5f;
  ASSERT_TRUE(layer->forward(scaled).ok());
  EXPECT_EQ(recorded_.scale, 0.5f);
}

// Only the layer checks a call: an invalid one never reaches the backend.
TEST_F(AttentionLayerTest, InvalidCallsStopAtTheLayer) {
  Selector selector = selector_on(testing::described_cpu());
  AttentionLayerDesc desc = small_self_attention();
  auto layer = Attention::Create(desc, AttentionConfig{}, selector);
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  Tensors t = random_tensors(4, 2, 16);
  AttentionProblem short_out = problem_for(t, 4, 2, 16);
  short_out.out.shape[1] = 3;  // out must have q's sequence length
  const Status s = layer->forward(short_out);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidInput) << s.ToString();
  AttentionProblem mixed = problem_for(t, 4, 2, 16);
  mixed.k.dtype = DType::kFloat16;  // q, k and v must share a dtype
  EXPECT_EQ(layer->forward(mixed).code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(recorded_.forwards, 0);
}

TEST_F(AttentionLayerTest, ForwardChecksTheProblemMatchesTheLayer) {
  Selector selector = selector_on(testing::described_cpu());
  AttentionLayerDesc desc = small_self_attention();
  auto layer = Attention::Create(desc, AttentionConfig{}, selector);
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();

  Tensors good = random_tensors(4, 2, 16);
  EXPECT_TRUE(layer->forward(problem_for(good, 4, 2, 16)).ok());
  EXPECT_EQ(recorded_.forwards, 1);

  Tensors wrong_heads = random_tensors(8, 2, 16);
  Status heads = layer->forward(problem_for(wrong_heads, 8, 2, 16));
  EXPECT_EQ(heads.code(), ErrorCode::kInvalidInput);
  EXPECT_THAT(heads.message(), HasSubstr("q heads 8 (the layer declares 4)"));

  Tensors wrong_kv = random_tensors(4, 4, 16);
  EXPECT_THAT(layer->forward(problem_for(wrong_kv, 4, 4, 16)).message(), HasSubstr("k/v heads 4 (the layer declares 2)"));

  Tensors wrong_head_size = random_tensors(4, 2, 32);
  EXPECT_THAT(layer->forward(problem_for(wrong_head_size, 4, 2, 32)).message(),
              HasSubstr("head size 32 (the layer declares 16)"));
  EXPECT_EQ(recorded_.forwards, 1);
}

TEST_F(AttentionLayerTest, InvalidDescriptionsAndResolutionErrorsFailCreate) {
  Selector selector = selector_on(testing::described_cpu());
  AttentionLayerDesc bad = wan_self_attention();
  bad.num_kv_heads = 5;
  auto gqa = Attention::Create(bad, AttentionConfig{}, selector);
  ASSERT_FALSE(gqa.ok());
  EXPECT_THAT(gqa.status().message(), HasSubstr("must be a multiple of num_kv_heads (5)"));

  bad = wan_self_attention();
  bad.head_size = 0;
  EXPECT_EQ(Attention::Create(bad, AttentionConfig{}, selector).status().code(), ErrorCode::kInvalidInput);

  AttentionConfig flash;
  flash.default_spec = AttentionSpec{};
  flash.default_spec->backend = "FLASH_ATTN";
  auto on_cpu = Attention::Create(wan_self_attention(), flash, selector);
  ASSERT_FALSE(on_cpu.ok());
  EXPECT_EQ(on_cpu.status().code(), ErrorCode::kUnsupported);
  EXPECT_THAT(on_cpu.status().message(), HasSubstr("FLASH_ATTN runs on CUDA only"));
}

TEST_F(AttentionLayerTest, FactoryErrorsSurfaceFromCreate) {
  Selector selector = selector_on(testing::described_cuda({.major = 10, .minor = 0, .cudnn_version = 91000,
                                                           .trtllm_gen = true}));
  AttentionConfig config;
  config.default_spec = AttentionSpec{};
  config.default_spec->backend = "TRTLLM_ATTN";
  auto layer = Attention::Create(wan_self_attention(), config, selector);
  ASSERT_FALSE(layer.ok());
  EXPECT_EQ(layer.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(layer.status().message(), HasSubstr("not part of this diffattn build"));
}

}  // namespace
}  // namespace diffattn
