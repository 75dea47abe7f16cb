#pragma once
// Helpers shared by the configuration tests.

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "diffattn/config.h"

namespace diffattn::testing_config {

// Fails unless `status` is an invalid-configuration error whose message contains every fragment.
inline void expect_config_error(const Status& status, std::initializer_list<std::string_view> fragments) {
  ASSERT_FALSE(status.ok()) << "expected an error containing '" << *fragments.begin() << "'";
  EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig) << status.message();
  for (std::string_view fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "message: " << status.message() << "\nmissing: " << fragment;
  }
}

inline ConfigSources dotted(std::vector<std::pair<std::string, std::string>> flags) {
  ConfigSources sources;
  sources.dotted = std::move(flags);
  return sources;
}

}  // namespace diffattn::testing_config
