#pragma once
// The switch of dependent launches (cuda/dependent_launch.cuh), without CUDA headers: the
// environment variable DIFFATTN_DEPENDENT_LAUNCH (dependent_launch.cc).

namespace diffattn::cuda {

// False when DIFFATTN_DEPENDENT_LAUNCH is 0 (read once).
bool dependent_launch_enabled();

// The setting a value of DIFFATTN_DEPENDENT_LAUNCH gives: off for "0", on for "1" or unset; any
// other value warns and leaves it on.
bool dependent_launch_setting(const char* value);

}  // namespace diffattn::cuda
