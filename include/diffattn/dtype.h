#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace diffattn {

enum class DType { kFloat32, kFloat16, kBFloat16, kFloat8E4M3, kInt8, kInt32, kBool, kFloat64 };

std::size_t dtype_size(DType dtype);
// "float32", "float16", "bfloat16", "fp8_e4m3", "int8", "int32", "bool", "float64".
std::string_view dtype_name(DType dtype);
// Accepts the names above and the aliases fp32/fp16/bf16/half/float/double.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace diffattn
