#include "diffattn/dtype.h"

namespace diffattn {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kFloat8E4M3: case DType::kInt8: case DType::kBool: return 1;
    case DType::kFloat64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat8E4M3: return "fp8_e4m3";
    case DType::kInt8: return "int8";
    case DType::kInt32: return "int32";
    case DType::kBool: return "bool";
    case DType::kFloat64: return "float64";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "float32" || name == "fp32" || name == "float") return DType::kFloat32;
  if (name == "float16" || name == "fp16" || name == "half") return DType::kFloat16;
  if (name == "bfloat16" || name == "bf16") return DType::kBFloat16;
  if (name == "fp8_e4m3" || name == "float8_e4m3fn") return DType::kFloat8E4M3;
  if (name == "int8") return DType::kInt8;
  if (name == "int32") return DType::kInt32;
  if (name == "bool") return DType::kBool;
  if (name == "float64" || name == "double") return DType::kFloat64;
  return std::nullopt;
}

}  // namespace diffattn
