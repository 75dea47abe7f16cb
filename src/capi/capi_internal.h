#pragma once
// What the C interface's files share: the session and layer behind the opaque handles, the
// per-thread last error, and the guard that keeps exceptions from crossing into C.

#include <exception>
#include <memory>
#include <new>
#include <shared_mutex>
#include <string>

#include "diffattn/attention.h"
#include "diffattn/c_api.h"
#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/schedule.h"
#include "diffattn/selector.h"
#include "diffattn/status.h"

// A session has its own registry (the built-ins plus the plugins loaded into it), so plugins
// loaded by one session are not seen by another. The lock orders plugin loads, which rebuild the
// selector, against resolution and layer creation.
struct diffattn_session {
  std::unique_ptr<diffattn::Registry> registry;
  std::shared_ptr<const diffattn::Platform> platform;
  std::unique_ptr<diffattn::Selector> selector;
  diffattn::AttentionConfig config;
  std::optional<diffattn::AttentionSchedule> schedule;
  std::shared_mutex mu;
};

struct diffattn_layer {
  diffattn::Attention attention;
};

namespace diffattn::capi {

// Records `status` as the thread's last error and returns its code.
diffattn_code fail(const Status& status);
diffattn_code fail(ErrorCode code, std::string message);
diffattn_code null_argument(const char* function, const char* name);
void clear_last_error();
const char* last_error();

// Hands `text` to the caller as a malloc'd copy in *out (released with diffattn_string_free).
diffattn_code return_string(const char* function, const std::string& text, char** out);

// Runs `body` (which returns a diffattn_code) with the last error cleared, turning any exception
// into DIFFATTN_INTERNAL.
template <class F>
diffattn_code guarded(const char* function, F&& body) {
  clear_last_error();
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kInternal, std::string(function) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(ErrorCode::kInternal, std::string(function) + ": unexpected error: " + e.what());
  } catch (...) {
    return fail(ErrorCode::kInternal, std::string(function) + ": unexpected error");
  }
}

}  // namespace diffattn::capi
