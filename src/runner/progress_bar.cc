#include "runner/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace diffattn::runner {

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled), terminal_(isatty(STDERR_FILENO) != 0) {}

void ProgressBar::update(std::int64_t done, std::int64_t total, const std::string& label) {
  if (!enabled_ || total <= 0) return;
  const double fraction = static_cast<double>(done) / static_cast<double>(total);
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    std::fprintf(stderr, "\r[%.*s%*s] %3d%% %lld/%lld %-48.48s", filled, "##############################",
                 kWidth - filled, "", static_cast<int>(fraction * 100), static_cast<long long>(done),
                 static_cast<long long>(total), label.c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  const int quarter = static_cast<int>(fraction * 4);
  if (quarter > last_quarter_) {
    last_quarter_ = quarter;
    std::fprintf(stderr, "progress: %d%% (%lld/%lld calls) %s\n", quarter * 25, static_cast<long long>(done),
                 static_cast<long long>(total), label.c_str());
  }
}

void ProgressBar::finish() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace diffattn::runner
