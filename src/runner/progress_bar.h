#pragma once
// A one-line progress bar on stderr for long runs; on a non-terminal, a line every quarter.

#include <cstdint>
#include <string>

namespace diffattn::runner {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled);
  void update(std::int64_t done, std::int64_t total, const std::string& label);
  void finish();

 private:
  bool enabled_;
  bool terminal_;
  int last_quarter_ = -1;
  bool drawn_ = false;
};

}  // namespace diffattn::runner
