#pragma once
// A one-line progress bar on stderr for long runs. On a terminal it redraws a few times a second,
// with the time the current call has taken, so that it moves during long calls; on a
// non-terminal it prints a line every quarter.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace diffattn::runner {

class ProgressBar {
 public:
  using Writer = std::function<void(std::string_view)>;

  explicit ProgressBar(bool enabled);  // stderr; a terminal when stderr is one
  ProgressBar(bool enabled, Writer write, bool terminal, std::chrono::milliseconds redraw_every);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` of `total` calls have run; `label` names the next one.
  void update(std::int64_t done, std::int64_t total, const std::string& label);
  void finish();

 private:
  void draw_locked();
  void redraw_until_finished();

  bool enabled_;
  bool terminal_;
  Writer write_;
  std::chrono::milliseconds redraw_every_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread ticker_;
  bool finished_ = false;
  bool drawn_ = false;
  int last_quarter_ = -1;
  std::int64_t done_ = 0, total_ = 0;
  std::string label_;
  std::chrono::steady_clock::time_point call_started_;
};

}  // namespace diffattn::runner
