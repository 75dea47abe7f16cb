// bench/workloads.csv is the one workload table of the GPU benchmark, bench/peers.py and the
// development harness: it must parse, and the C++ loader and the Python peers must read it alike.

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../../bench/workloads.h"

namespace diffattn::bench {
namespace {

using ::testing::HasSubstr;

// tests/data sits two levels below the repository root.
const std::string kRepoRoot = std::string(DIFFATTN_TEST_DATA_DIR) + "/../..";
const std::string kWorkloadsCsv = kRepoRoot + "/bench/workloads.csv";

std::string to_line(const Workload& w) {
  std::ostringstream s;
  s << w.name << ' ' << w.batch << ' ' << w.heads << ' ' << w.seq_q << ' ' << w.seq_kv << ' ' << w.head_dim;
  return s.str();
}

std::string run_and_capture(const std::string& command, int& status) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  if (pipe == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  status = pclose(pipe);
  return out;
}

TEST(BenchWorkloads, TheRepositoryFileParses) {
  auto workloads = load_workloads(kWorkloadsCsv);
  ASSERT_TRUE(workloads.ok()) << workloads.status().message();
  EXPECT_GE(workloads->size(), 1u);
  for (const Workload& w : *workloads) EXPECT_TRUE(w.head_dim % 8 == 0) << w.name << ": head sizes are multiples of 8";
}

TEST(BenchWorkloads, PythonPeersReadTheSameTable) {
  int status = 0;
  run_and_capture("python3 --version >/dev/null 2>&1", status);
  if (status != 0) GTEST_SKIP() << "python3 is not on PATH";
  const std::string out = run_and_capture("python3 " + kRepoRoot + "/bench/peers.py --print-workloads 2>&1", status);
  ASSERT_EQ(status, 0) << out;
  auto workloads = load_workloads(kWorkloadsCsv);
  ASSERT_TRUE(workloads.ok()) << workloads.status().message();
  std::string expected;
  for (const Workload& w : *workloads) expected += to_line(w) + "\n";
  EXPECT_EQ(out, expected);
}

TEST(BenchWorkloads, RandomTablesRoundTrip) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> size(1, 100000), count(1, 20);
  for (int round = 0; round < 50; ++round) {
    std::vector<Workload> want(count(rng));
    std::string text = "# a comment\n\n" + std::string(kWorkloadsHeader) + "\r\n";
    for (std::size_t i = 0; i < want.size(); ++i) {
      want[i] = {"w" + std::to_string(i) + "-" + std::to_string(size(rng)), size(rng), size(rng), size(rng), size(rng),
                 size(rng)};
      const Workload& w = want[i];
      text += w.name + "," + std::to_string(w.batch) + "," + std::to_string(w.heads) + "," + std::to_string(w.seq_q) +
              "," + std::to_string(w.seq_kv) + "," + std::to_string(w.head_dim) + (rng() % 2 ? "\n" : "\r\n");
      if (rng() % 3 == 0) text += "  # between lines\n";
    }
    auto got = parse_workloads(text, "random.csv");
    ASSERT_TRUE(got.ok()) << got.status().message() << "\n" << text;
    ASSERT_EQ(got->size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(to_line((*got)[i]), to_line(want[i]));
  }
}

TEST(BenchWorkloads, MalformedTablesSayWhichLineAndWhatToGive) {
  const std::string header = std::string(kWorkloadsHeader) + "\n";
  struct Bad {
    std::string text, message;
  } cases[] = {
      {"", "no workloads"},
      {header, "no workloads"},
      {"name,b,h\nx,1,2\n", "expected the header"},
      {header + "x,1,2,3,4\n", "bad.csv:2: expected 6 comma-separated fields"},
      {header + "x,1,2,3,4,5,6\n", "expected 6 comma-separated fields"},
      {header + "x,1,0,3,4,5\n", "give a positive integer"},
      {header + "x,1,2,-3,4,5\n", "give a positive integer"},
      {header + "x,1,2,3,4,5x\n", "give a positive integer"},
      {header + ",1,2,3,4,5\n", "name is empty"},
      {header + "x,1,2,3,4,5\n# c\nx,1,2,3,4,6\n", "bad.csv:4: workload 'x' is listed twice"},
  };
  for (const Bad& bad : cases) {
    auto got = parse_workloads(bad.text, "bad.csv");
    ASSERT_FALSE(got.ok()) << bad.text;
    EXPECT_EQ(got.status().code(), ErrorCode::kInvalidInput);
    EXPECT_THAT(got.status().message(), HasSubstr(bad.message)) << bad.text;
  }
  auto missing = load_workloads(kRepoRoot + "/no-such-workloads.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--workloads-file"));
}

}  // namespace
}  // namespace diffattn::bench
