#pragma once
// Writes safetensors files for tests: whole files from typed tensors of fresh random values, or
// from a hand-written header for files that must be wrong in one precise way.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffattn/dtype.h"
#include "kernels/cpu/half_convert.h"

namespace diffattn::test_files {

struct StoredTensor {
  std::string name;
  DType dtype = DType::kFloat32;  // kFloat32, kFloat16 or kBFloat16
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // exactly representable in dtype
  std::string bytes;          // as stored in the file
};

// A tensor of standard normal values rounded to `dtype`, never all zeros.
inline StoredTensor random_tensor(const std::string& name, DType dtype, std::vector<std::int64_t> shape, std::mt19937& rng) {
  StoredTensor t{name, dtype, std::move(shape), {}, {}};
  std::int64_t n = 1;
  for (auto s : t.shape) n *= s;
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = normal(rng);
    if (dtype == DType::kFloat32) {
      t.values.push_back(x);
      t.bytes.append(reinterpret_cast<const char*>(&x), 4);
      continue;
    }
    const std::uint16_t bits = dtype == DType::kFloat16 ? cpu::float_to_half(x) : cpu::float_to_bf16(x);
    t.values.push_back(dtype == DType::kFloat16 ? cpu::half_to_float(bits) : cpu::bf16_to_float(bits));
    t.bytes.append(reinterpret_cast<const char*>(&bits), 2);
  }
  return t;
}

// The 8-byte little-endian header length, the header, then the data.
inline std::string safetensors_image(const std::string& header, const std::string& data) {
  std::string image;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) image += static_cast<char>((n >> (8 * i)) & 0xff);
  return image + header + data;
}

// A well-formed file holding `tensors` back to back, the header padded with spaces to a multiple of 8 bytes.
inline std::string safetensors_image(const std::vector<StoredTensor>& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const StoredTensor& t : tensors) {
    const char* dtype = t.dtype == DType::kFloat32 ? "F32" : t.dtype == DType::kFloat16 ? "F16" : "BF16";
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return safetensors_image(text, data);
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace diffattn::test_files
