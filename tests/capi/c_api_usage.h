/* A C translation unit that drives the C interface (tests/capi/c_api_usage.c). */
#ifndef DIFFATTN_TESTS_CAPI_C_API_USAGE_H_
#define DIFFATTN_TESTS_CAPI_C_API_USAGE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a CPU session with `config_json`, a self-attention layer of `heads` heads, runs one call
 * on contiguous float32 [B, S, H, D] buffers and returns the diffattn_code; `backend` receives the
 * layer's backend name. */
int diffattn_c_usage_forward(const char* config_json, float* q, float* k, float* v, float* out, int batch, int seq_q,
                             int seq_kv, int heads, int head_size, int causal, char* backend, size_t backend_cap);

#ifdef __cplusplus
}
#endif

#endif
