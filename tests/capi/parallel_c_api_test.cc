#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "capi/capi_testing.h"

namespace diffattn::capi_testing {
namespace {

// Rows [s0, s0 + n) of a contiguous [1, S, H, D] float buffer.
Buffer rows(const Buffer& b, std::int64_t s0, std::int64_t n) {
  const std::int64_t inner = b.shape[2] * b.shape[3];
  Buffer out{std::vector<float>(b.data.begin() + s0 * inner, b.data.begin() + (s0 + n) * inner), {1, n, b.shape[2], b.shape[3]}};
  return out;
}

TEST(ParallelCApi, InProcessRanksEqualOneLayer) {
  Session session("{\"default\": {\"backend\": \"TORCH_SDPA\"}}");
  std::mt19937 rng = seeded_rng();
  const std::int64_t s = 37, h = 4, d = 16;  // 37 tokens over 4 ranks: 10, 10, 10, 7
  Buffer q = random_buffer({1, s, h, d}, rng), k = random_buffer({1, s, h, d}, rng), v = random_buffer({1, s, h, d}, rng);
  Buffer ref = nan_buffer({1, s, h, d});
  diffattn_layer_desc desc = layer_desc(static_cast<int>(h), 0, static_cast<int>(d));
  {
    Layer one;
    ASSERT_EQ(diffattn_layer_create(session.s, &desc, &one.l), DIFFATTN_OK) << diffattn_last_error();
    DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = ref.tensor();
    ASSERT_EQ(diffattn_layer_forward(one.l, &tq, &tk, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_OK);
  }
  std::vector<diffattn_comm*> comms(4, nullptr);
  ASSERT_EQ(diffattn_comm_create_in_process(4, comms.data()), DIFFATTN_OK) << diffattn_last_error();
  std::vector<Buffer> outs(4);
  std::vector<int> codes(4, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      const std::int64_t begin = std::min<std::int64_t>(s, r * 10), n = std::min<std::int64_t>(s - begin, 10);
      Buffer lq = rows(q, begin, n), lk = rows(k, begin, n), lv = rows(v, begin, n);
      outs[r] = nan_buffer({1, n, h, d});
      diffattn_parallel_layer* layer = nullptr;
      codes[r] = diffattn_parallel_layer_create(session.s, &desc, 2, 2, comms[r], &layer);
      if (codes[r] != DIFFATTN_OK) return;
      DLTensor tq = lq.tensor(), tk = lk.tensor(), tv = lv.tensor(), to = outs[r].tensor();
      codes[r] = diffattn_parallel_layer_forward(layer, &tq, &tk, &tv, &to, s, nullptr, nullptr, nullptr, nullptr,
                                                 nullptr, 0, nullptr);
      diffattn_parallel_layer_destroy(layer);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(codes[r], DIFFATTN_OK) << "rank " << r;
    const std::int64_t inner = h * d;
    for (std::size_t i = 0; i < outs[r].data.size(); ++i)
      EXPECT_NEAR(outs[r].data[i], ref.data[r * 10 * inner + i], 2e-5) << "rank " << r << " element " << i;
  }
  for (diffattn_comm* c : comms) diffattn_comm_destroy(c);
}

TEST(ParallelCApi, BadArgumentsAreRefusedWithAMessage) {
  Session session("{\"default\": {\"backend\": \"TORCH_SDPA\"}}");
  diffattn_comm* comm = nullptr;
  ASSERT_EQ(diffattn_comm_create_in_process(1, &comm), DIFFATTN_OK);
  diffattn_layer_desc desc = layer_desc(6, 0, 16);
  diffattn_parallel_layer* layer = nullptr;
  EXPECT_EQ(diffattn_parallel_layer_create(session.s, &desc, 2, 1, comm, &layer), DIFFATTN_INVALID_CONFIG);
  EXPECT_NE(std::string(diffattn_last_error()).find("needs 2 ranks"), std::string::npos) << diffattn_last_error();
  EXPECT_EQ(layer, nullptr);
  EXPECT_EQ(diffattn_parallel_layer_create(session.s, &desc, 1, 1, nullptr, &layer), DIFFATTN_INVALID_INPUT);
  char* id = nullptr;
  const diffattn_code made = diffattn_nccl_unique_id(&id);
  // Without NCCL in the build the answer says so; with it, an id is made (no GPU needed).
  if (made == DIFFATTN_OK) diffattn_string_free(id);
  else EXPECT_NE(std::string(diffattn_last_error()).find("NCCL"), std::string::npos);
  diffattn_comm_destroy(comm);
}

}  // namespace
}  // namespace diffattn::capi_testing
