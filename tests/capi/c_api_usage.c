/* The C interface used from C: this file is compiled as C99 with -pedantic, so the header's C
 * compatibility is checked by the build and its behaviour by tests/capi/c_api_test.cc. */
#include "capi/c_api_usage.h"

#include <stdint.h>

#include "diffattn/c_api.h"

static DLTensor cpu_float_tensor(float* data, int64_t* shape) {
  DLTensor t;
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = 4;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL; /* compact row-major */
  t.byte_offset = 0;
  return t;
}

int diffattn_c_usage_forward(const char* config_json, float* q, float* k, float* v, float* out, int batch, int seq_q,
                             int seq_kv, int heads, int head_size, int causal, char* backend, size_t backend_cap) {
  diffattn_session* session = NULL;
  diffattn_layer* layer = NULL;
  diffattn_layer_desc desc;
  int64_t q_shape[4], kv_shape[4];
  DLTensor tq, tk, tv, to;
  diffattn_code code = diffattn_session_create("cpu", config_json, &session);
  if (code != DIFFATTN_OK) return (int)code;
  diffattn_layer_desc_init(&desc);
  desc.num_heads = heads;
  desc.head_size = head_size;
  desc.causal = causal;
  desc.role = "self";
  code = diffattn_layer_create(session, &desc, &layer);
  diffattn_session_destroy(session); /* the layer keeps what it needs */
  if (code != DIFFATTN_OK) return (int)code;
  if (backend != NULL && backend_cap > 0) {
    const char* name = diffattn_layer_backend(layer);
    size_t i = 0;
    for (; name[i] != '\0' && i + 1 < backend_cap; ++i) backend[i] = name[i];
    backend[i] = '\0';
  }
  q_shape[0] = batch, q_shape[1] = seq_q, q_shape[2] = heads, q_shape[3] = head_size;
  kv_shape[0] = batch, kv_shape[1] = seq_kv, kv_shape[2] = heads, kv_shape[3] = head_size;
  tq = cpu_float_tensor(q, q_shape);
  tk = cpu_float_tensor(k, kv_shape);
  tv = cpu_float_tensor(v, kv_shape);
  to = cpu_float_tensor(out, q_shape);
  code = diffattn_layer_forward(layer, &tq, &tk, &tv, &to, NULL, NULL, NULL);
  diffattn_layer_destroy(layer);
  return (int)code;
}
