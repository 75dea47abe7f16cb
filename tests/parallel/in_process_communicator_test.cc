#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "parallel/in_process_communicator.h"

namespace diffattn::parallel {
namespace {

using ::testing::HasSubstr;

// Runs `body(rank, comm)` on one thread per rank and returns each rank's status.
std::vector<Status> run_ranks(std::vector<std::unique_ptr<Communicator>>& comms,
                              const std::function<Status(int, Communicator&)>& body) {
  std::vector<Status> results(comms.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] { results[r] = body(static_cast<int>(r), *comms[r]); });
  for (auto& t : threads) t.join();
  return results;
}

std::vector<std::unique_ptr<Communicator>> group(int size, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto comms = make_in_process_group(size, timeout);
  EXPECT_TRUE(comms.ok()) << comms.status().ToString();
  return std::move(comms).value();
}

TEST(InProcessCommunicator, AllToAllDeliversBlockJOfRankIToBlockIOfRankJ) {
  for (int size : {1, 2, 3, 4}) {
    auto comms = group(size);
    std::vector<std::vector<int>> received(size);
    auto results = run_ranks(comms, [&](int r, Communicator& c) {
      std::vector<int> send(size * 3);
      for (int j = 0; j < size; ++j)
        for (int e = 0; e < 3; ++e) send[j * 3 + e] = 1000 * r + 10 * j + e;
      received[r].assign(size * 3, -1);
      return c.all_to_all(send.data(), received[r].data(), 3 * sizeof(int), nullptr);
    });
    for (int r = 0; r < size; ++r) {
      ASSERT_TRUE(results[r].ok()) << results[r].ToString();
      for (int i = 0; i < size; ++i)
        for (int e = 0; e < 3; ++e) EXPECT_EQ(received[r][i * 3 + e], 1000 * i + 10 * r + e);
    }
  }
}

TEST(InProcessCommunicator, AllGatherAndRingShift) {
  const int size = 4;
  auto comms = group(size);
  std::vector<std::vector<double>> gathered(size), shifted(size);
  auto results = run_ranks(comms, [&](int r, Communicator& c) {
    const std::vector<double> mine = {r + 0.5, -r - 0.25};
    gathered[r].assign(2 * size, 0);
    DIFFATTN_RETURN_IF_ERROR(c.all_gather(mine.data(), gathered[r].data(), sizeof(double) * 2, nullptr));
    shifted[r].assign(2, 0);
    DIFFATTN_RETURN_IF_ERROR(send_recv(c, mine.data(), (r + 1) % size, shifted[r].data(), (r + size - 1) % size,
                                       sizeof(double) * 2, nullptr));
    return c.barrier();
  });
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].ToString();
    for (int j = 0; j < size; ++j) {
      EXPECT_EQ(gathered[r][2 * j], j + 0.5);
      EXPECT_EQ(gathered[r][2 * j + 1], -j - 0.25);
    }
    const int from = (r + size - 1) % size;
    EXPECT_EQ(shifted[r][0], from + 0.5);
  }
}

TEST(InProcessCommunicator, SplitFormsGroupsByColourOrderedByKey) {
  const int size = 6;
  auto comms = group(size);
  std::vector<int> sub_rank(size), sub_size(size), sum(size);
  auto results = run_ranks(comms, [&](int r, Communicator& c) {
    // Colour r % 2, reversed order inside each group.
    DIFFATTN_ASSIGN_OR_RETURN(auto sub, c.split(r % 2, -r));
    sub_rank[r] = sub->rank();
    sub_size[r] = sub->size();
    std::vector<int> all(sub->size());
    DIFFATTN_RETURN_IF_ERROR(sub->all_gather(&r, all.data(), sizeof(int), nullptr));
    sum[r] = std::accumulate(all.begin(), all.end(), 0);
    return Status::Ok();
  });
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].ToString();
    EXPECT_EQ(sub_size[r], 3);
    EXPECT_EQ(sub_rank[r], 2 - r / 2);  // key -r: the highest world rank comes first
    EXPECT_EQ(sum[r], r % 2 == 0 ? 0 + 2 + 4 : 1 + 3 + 5);
  }
}

TEST(InProcessCommunicator, AFailedRankStopsTheOthersWithItsReasonWellBeforeTheTimeout) {
  const int size = 4;
  auto comms = group(size, std::chrono::seconds(30));
  const auto start = std::chrono::steady_clock::now();
  auto results = run_ranks(comms, [&](int r, Communicator& c) -> Status {
    DIFFATTN_ASSIGN_OR_RETURN(auto sub, c.split(r / 2, r));
    if (r == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      c.abort("injected failure: out of memory");
      return Internal("injected");
    }
    // Rank 2 waits in the subgroup rank 3 left, ranks 0 and 1 in the world.
    if (r == 2) {
      int x = 0, y = 0;
      return sub->all_gather(&x, &y, 0, nullptr);
    }
    return c.barrier();
  });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, std::chrono::seconds(10));
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(results[r].ok()) << "rank " << r;
    EXPECT_THAT(results[r].message(), HasSubstr("injected failure: out of memory")) << "rank " << r;
  }
}

TEST(InProcessCommunicator, ACollectiveThatCompletedStandsWhenARankFailsRightAfter) {
  // Rank 1 waits at the barrier; rank 0 arrives last and fails at once: rank 1's barrier did complete.
  int completed = 0;
  for (int round = 0; round < 50; ++round) {
    auto comms = group(2);
    auto results = run_ranks(comms, [&](int r, Communicator& c) -> Status {
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      DIFFATTN_RETURN_IF_ERROR(c.barrier());
      if (r == 0) c.abort("failed after the barrier");
      return Status::Ok();
    });
    completed += results[1].ok();
  }
  EXPECT_EQ(completed, 50);
}

TEST(InProcessCommunicator, ARankThatNeverArrivesEndsTheCollectiveAtTheTimeout) {
  auto comms = group(2, std::chrono::milliseconds(200));
  auto results = run_ranks(comms, [&](int r, Communicator& c) -> Status {
    if (r == 1) return Status::Ok();  // takes another path
    return c.barrier();
  });
  EXPECT_FALSE(results[0].ok());
  EXPECT_THAT(results[0].message(), HasSubstr("waited 200 ms"));
}

TEST(InProcessCommunicator, MismatchedRingPeersAreAnErrorOnEveryRank) {
  auto comms = group(3);
  auto results = run_ranks(comms, [&](int r, Communicator& c) {
    int send = r, recv = -1;
    // Every rank sends to its right neighbour but rank 0 listens to rank 1 instead of rank 2.
    const int from = r == 0 ? 1 : (r + 2) % 3;
    return send_recv(c, &send, (r + 1) % 3, &recv, from, sizeof(int), nullptr);
  });
  for (const Status& s : results) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("matching peer"));
  }
  auto bad = make_in_process_group(0);
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace diffattn::parallel
