#include "runner/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace diffattn::runner {
namespace {

void write_stderr(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

ProgressBar::ProgressBar(bool enabled)
    : ProgressBar(enabled, write_stderr, isatty(STDERR_FILENO) != 0, std::chrono::milliseconds(250)) {}

ProgressBar::ProgressBar(bool enabled, Writer write, bool terminal, std::chrono::milliseconds redraw_every)
    : enabled_(enabled), terminal_(terminal), write_(std::move(write)), redraw_every_(redraw_every) {
  if (enabled_ && terminal_) ticker_ = std::thread([this] { redraw_until_finished(); });
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(std::int64_t done, std::int64_t total, const std::string& label) {
  if (!enabled_ || total <= 0) return;
  std::lock_guard lock(mu_);
  if (finished_) return;
  done_ = done;
  total_ = total;
  label_ = label;
  call_started_ = std::chrono::steady_clock::now();
  if (terminal_) {
    draw_locked();
    return;
  }
  const int quarter = static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * 4);
  if (quarter > last_quarter_) {
    last_quarter_ = quarter;
    char line[160];
    std::snprintf(line, sizeof line, "progress: %d%% (%lld/%lld calls) ", quarter * 25, static_cast<long long>(done),
                  static_cast<long long>(total));
    write_(std::string(line) + label + "\n");
  }
}

void ProgressBar::draw_locked() {
  if (total_ <= 0) return;
  constexpr int kWidth = 30;
  const double fraction = static_cast<double>(done_) / static_cast<double>(total_);
  const int filled = static_cast<int>(fraction * kWidth);
  const double call_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - call_started_).count();
  char line[256];
  std::snprintf(line, sizeof line, "\r[%.*s%*s] %3d%% %lld/%lld calls, this one %5.1f s: %-40.40s", filled,
                "##############################", kWidth - filled, "", static_cast<int>(fraction * 100),
                static_cast<long long>(done_), static_cast<long long>(total_), call_seconds, label_.c_str());
  write_(line);
  drawn_ = true;
}

void ProgressBar::redraw_until_finished() {
  std::unique_lock lock(mu_);
  while (!finished_) {
    wake_.wait_for(lock, redraw_every_);
    if (!finished_ && drawn_) draw_locked();
  }
}

void ProgressBar::finish() {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
    if (drawn_) write_("\n");
    drawn_ = false;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

}  // namespace diffattn::runner
