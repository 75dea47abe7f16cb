#pragma once
// Fresh randomness for tests: every run draws new inputs, and a test prints the seed with a failure
// so that the failing inputs can be drawn again.

#include <cstdint>
#include <random>

namespace diffattn::testing {

// A seed no run repeats.
inline std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

// A generator on a fresh seed, which `seed` receives for the failure message.
inline std::mt19937_64 fresh_rng(std::uint64_t& seed) {
  seed = fresh_seed();
  return std::mt19937_64(seed);
}

}  // namespace diffattn::testing
