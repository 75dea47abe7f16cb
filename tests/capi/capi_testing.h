#pragma once
// Helpers of the C-interface tests: float32 CPU buffers seen as DLPack tensors, fresh random
// inputs, RAII holders of sessions and layers, and the relative L2 distance to the oracle.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "diffattn/c_api.h"
#include "diffattn/tensor.h"

namespace diffattn::capi_testing {

// A contiguous float32 CPU array and its shape.
struct Buffer {
  std::vector<float> data;
  std::vector<std::int64_t> shape;
  DLTensor tensor() {
    DLTensor t{};
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<std::int32_t>(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    return t;
  }
  TensorView view() { return from_dlpack(tensor()).value(); }
};

inline std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

// Fresh random values for every run (the seed is printed, so a failure can be replayed).
inline Buffer random_buffer(std::vector<std::int64_t> shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Buffer b{std::vector<float>(static_cast<std::size_t>(numel(shape))), std::move(shape)};
  for (float& x : b.data) x = u(rng);
  return b;
}

// NaN everywhere: an element the call did not write shows.
inline Buffer nan_buffer(std::vector<std::int64_t> shape) {
  return Buffer{std::vector<float>(static_cast<std::size_t>(numel(shape)), std::nanf("")), std::move(shape)};
}

inline std::mt19937 seeded_rng() {
  const unsigned seed = std::random_device{}();
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("seed %u\n", seed);
  return std::mt19937(seed);
}

// A bool (uint8) CPU tensor over `keep`; `shape` must outlive the returned view.
inline DLTensor bool_tensor(std::vector<std::uint8_t>& keep, std::vector<std::int64_t>& shape) {
  DLTensor t{};
  t.data = keep.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.dtype = {kDLUInt, 8, 1};
  t.shape = shape.data();
  return t;
}

inline double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// A CPU session with `config_json`, destroyed with the holder.
struct Session {
  diffattn_session* s = nullptr;
  explicit Session(const char* config_json) {
    EXPECT_EQ(diffattn_session_create("cpu", config_json, &s), DIFFATTN_OK) << diffattn_last_error();
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { diffattn_session_destroy(s); }
};

struct Layer {
  diffattn_layer* l = nullptr;
  Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;
  ~Layer() { diffattn_layer_destroy(l); }
};

inline diffattn_layer_desc layer_desc(int heads, int kv_heads, int head_size) {
  diffattn_layer_desc d;
  diffattn_layer_desc_init(&d);
  d.num_heads = heads;
  d.num_kv_heads = kv_heads;
  d.head_size = head_size;
  return d;
}

}  // namespace diffattn::capi_testing
