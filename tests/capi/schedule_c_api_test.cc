// The attention schedule through the C interface: a session takes the schedule's JSON, its layers
// resolve every profile at creation, and diffattn_layer_forward_step gives each call its step.

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "capi/capi_testing.h"
#include "diffattn/c_api.h"
#include "parity/oracle.h"

namespace diffattn {
namespace {

using namespace capi_testing;

constexpr const char* kSdpaConfig = R"({"default": {"backend": "TORCH_SDPA"}})";

diffattn_denoising_step c_step(long long index, bool with_sigma = false, double sigma = 0.0) {
  diffattn_denoising_step s{};
  s.index = index;
  s.num_steps = 8;
  s.has_sigma = with_sigma ? 1 : 0;
  s.sigma = sigma;
  return s;
}

bool has(const char* text, const std::string& part) { return std::string(text).find(part) != std::string::npos; }

TEST(CApiSchedule, LayersOfAScheduledSessionRunAtTheirStep) {
  std::mt19937 rng = seeded_rng();
  Buffer q = random_buffer({1, 9, 2, 32}, rng), k = random_buffer({1, 11, 2, 32}, rng),
         v = random_buffer({1, 11, 2, 32}, rng), out = nan_buffer({1, 9, 2, 32});
  Session session(kSdpaConfig);
  ASSERT_EQ(diffattn_session_set_schedule(session.s, R"({"profiles": {"late": {"default": "TORCH_SDPA"}},
                                                         "steps": [{"start": 2, "end": null, "profile": "late"}]})"),
            DIFFATTN_OK)
      << diffattn_last_error();
  diffattn_layer_desc desc = layer_desc(2, 2, 32);
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();
  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor();

  AttentionProblem p;
  p.q = q.view(), p.k = k.view(), p.v = v.view(), p.out = out.view();
  const testing::OracleOutput want = testing::reference_attention(p, testing::OraclePrecision::kFloat64);
  for (long long step : {0LL, 5LL}) {
    const diffattn_denoising_step s = c_step(step);
    ASSERT_EQ(diffattn_layer_forward_step(layer.l, &tq, &tk, &tv, &to, nullptr, nullptr, &s, nullptr), DIFFATTN_OK)
        << diffattn_last_error();
    EXPECT_LT(rel_l2(out.data, want.out), 1e-5) << step;
  }
  // A scheduled layer needs the step of every call.
  EXPECT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_INVALID_INPUT);
  EXPECT_TRUE(has(diffattn_last_error(), "denoising step")) << diffattn_last_error();

  // Removing the schedule applies to layers created afterwards; they take calls without a step.
  ASSERT_EQ(diffattn_session_set_schedule(session.s, nullptr), DIFFATTN_OK);
  Layer plain;
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &plain.l), DIFFATTN_OK) << diffattn_last_error();
  EXPECT_EQ(diffattn_layer_forward(plain.l, &tq, &tk, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
}

TEST(CApiSchedule, RefusalsCarryTheSchedulesMessages) {
  Session session(kSdpaConfig);
  EXPECT_EQ(diffattn_session_set_schedule(session.s, R"({"profiles": {"late": {"default": "TORCH_SDPA"}},
                                                         "steps": [{"start": 2, "profile": "sparse"}]})"),
            DIFFATTN_INVALID_CONFIG);
  EXPECT_TRUE(has(diffattn_last_error(), "unknown profile 'sparse'")) << diffattn_last_error();

  ASSERT_EQ(diffattn_session_set_schedule(session.s, R"({"profiles": {"fast": {"default": "FLASH_ATTN"}},
                                                         "steps": [{"start": 4, "profile": "fast"}]})"),
            DIFFATTN_OK);
  diffattn_layer_desc desc = layer_desc(2, 2, 32);
  Layer layer;
  EXPECT_EQ(diffattn_layer_create(session.s, &desc, &layer.l), DIFFATTN_UNSUPPORTED);
  EXPECT_TRUE(has(diffattn_last_error(), "schedule profile 'fast' (steps [4, end)), role 'self'"))
      << diffattn_last_error();
  EXPECT_EQ(layer.l, nullptr);

  std::mt19937 rng = seeded_rng();
  Buffer q = random_buffer({1, 4, 2, 32}, rng), out = nan_buffer({1, 4, 2, 32});
  DLTensor tq = q.tensor(), to = out.tensor();
  ASSERT_EQ(diffattn_session_set_schedule(session.s, R"({"profiles": {"late": {"default": "TORCH_SDPA"}},
                                                         "sigma": [{"low": 0, "high": 0.5, "profile": "late"}]})"),
            DIFFATTN_OK);
  Layer by_sigma;
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &by_sigma.l), DIFFATTN_OK) << diffattn_last_error();
  const diffattn_denoising_step without_sigma = c_step(3);
  EXPECT_EQ(diffattn_layer_forward_step(by_sigma.l, &tq, &tq, &tq, &to, nullptr, nullptr, &without_sigma, nullptr),
            DIFFATTN_INVALID_INPUT);
  EXPECT_TRUE(has(diffattn_last_error(), "carries no sigma")) << diffattn_last_error();
  const diffattn_denoising_step with_sigma = c_step(3, true, 0.25);
  EXPECT_EQ(diffattn_layer_forward_step(by_sigma.l, &tq, &tq, &tq, &to, nullptr, nullptr, &with_sigma, nullptr),
            DIFFATTN_OK)
      << diffattn_last_error();
}

}  // namespace
}  // namespace diffattn
