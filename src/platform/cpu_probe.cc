#include <string>
#include <thread>

#include "diffattn/platform.h"

namespace diffattn {
namespace {

std::string cpu_architecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown architecture";
#endif
}

// The vector extensions the CPU kernels can dispatch to at run time.
std::string cpu_vector_features() {
  std::string out;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) out += ", AVX2";
  if (__builtin_cpu_supports("fma")) out += ", FMA";
  if (__builtin_cpu_supports("avx512f")) out += ", AVX-512";
  if (__builtin_cpu_supports("avx512bf16")) out += ", AVX-512 BF16";
#endif
  return out;
}

}  // namespace

PlatformInfo probe_cpu_platform() {
  PlatformInfo info;
  info.kind = PlatformKind::kCpu;
  const unsigned threads = std::thread::hardware_concurrency();
  info.device_name = cpu_architecture() + cpu_vector_features() +
                     (threads > 0 ? ", " + std::to_string(threads) + " threads" : std::string());
  info.features.sage_attn = true;  // SAGE_ATTN's CPU implementation is part of every build
  info.origin = "probe";
  return info;
}

}  // namespace diffattn
