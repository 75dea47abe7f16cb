#include "runner/progress_bar.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace diffattn::runner {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::string> writes;
  std::size_t count() {
    std::lock_guard lock(mu);
    return writes.size();
  }
};

TEST(ProgressBar, OnATerminalItRedrawsDuringALongCall) {
  Captured captured;
  {
    ProgressBar bar(
        true,
        [&](std::string_view text) {
          std::lock_guard lock(captured.mu);
          captured.writes.emplace_back(text);
        },
        /*terminal=*/true, std::chrono::milliseconds(10));
    bar.update(1, 4, "self 0 baseline");
    const std::size_t after_update = captured.count();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_GE(captured.count(), after_update + 3) << "the bar did not move while the call ran";
    bar.update(4, 4, "done");
    bar.finish();
  }
  std::lock_guard lock(captured.mu);
  ASSERT_GE(captured.writes.size(), 2u);
  EXPECT_NE(captured.writes[0].find("1/4 calls"), std::string::npos) << captured.writes[0];
  const std::string& last_bar = captured.writes[captured.writes.size() - 2];
  EXPECT_NE(last_bar.find("100%"), std::string::npos) << last_bar;
  EXPECT_EQ(captured.writes.back(), "\n");
}

TEST(ProgressBar, OffATerminalItPrintsQuartersOnly) {
  std::vector<std::string> writes;
  ProgressBar bar(true, [&](std::string_view text) { writes.emplace_back(text); }, /*terminal=*/false,
                  std::chrono::milliseconds(10));
  for (int done = 0; done <= 8; ++done) bar.update(done, 8, "call");
  bar.finish();
  ASSERT_EQ(writes.size(), 5u);
  EXPECT_NE(writes[0].find("progress: 0%"), std::string::npos);
  EXPECT_NE(writes[4].find("progress: 100% (8/8 calls)"), std::string::npos) << writes[4];
}

}  // namespace
}  // namespace diffattn::runner
