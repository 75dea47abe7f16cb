/* A diffattn plugin for the tests: float32 attention on the CPU, written against
 * include/diffattn/plugin.h alone. DIFFATTN_TEST_PLUGIN_MODE in the environment makes the
 * registration misbehave on purpose: "shadow" claims a built-in name, "refuse" declines the ABI,
 * "partial" adds one good backend and then one without a forward function. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/plugin.h"

static int64_t stride_of(const DLTensor* t, int dim) {
  int64_t s = 1;
  int i;
  if (t->strides != NULL) return t->strides[dim];
  for (i = t->ndim - 1; i > dim; --i) s *= t->shape[i];
  return s;
}

static float* at4(const DLTensor* t, int64_t a, int64_t b, int64_t c, int64_t d) {
  float* base = (float*)((char*)t->data + t->byte_offset);
  return base + a * stride_of(t, 0) + b * stride_of(t, 1) + c * stride_of(t, 2) + d * stride_of(t, 3);
}

static int keeps(const DLTensor* mask, int64_t b, int64_t h, int64_t i, int64_t j) {
  const unsigned char* base;
  if (mask == NULL) return 1;
  base = (const unsigned char*)mask->data + mask->byte_offset;
  if (mask->ndim == 2) return base[b * stride_of(mask, 0) + j * stride_of(mask, 1)] != 0;
  return base[(mask->shape[0] == 1 ? 0 : b) * stride_of(mask, 0) + (mask->shape[1] == 1 ? 0 : h) * stride_of(mask, 1) +
              i * stride_of(mask, 2) + j * stride_of(mask, 3)] != 0;
}

static int naive_forward(void* user_data, const diffattn_plugin_call* call, char* error, size_t error_cap) {
  const int64_t B = call->q->shape[0], Sq = call->q->shape[1], H = call->q->shape[2], D = call->q->shape[3];
  const int64_t Skv = call->k->shape[1], group = H / call->k->shape[2];
  int64_t b, h, i, j, e;
  double* p = (double*)malloc((size_t)Skv * sizeof(double));
  int* counter = (int*)user_data;
  if (p == NULL) {
    strncpy(error, "out of memory", error_cap - 1);
    return 1;
  }
  ++*counter;
  for (b = 0; b < B; ++b)
    for (h = 0; h < H; ++h)
      for (i = 0; i < Sq; ++i) {
        double mx = -INFINITY, sum = 0.0;
        for (j = 0; j < Skv; ++j) {
          double dot = 0.0;
          if ((call->causal && j > i) || !keeps(call->mask, b, h, i, j)) {
            p[j] = -INFINITY;
            continue;
          }
          for (e = 0; e < D; ++e) dot += (double)*at4(call->q, b, i, h, e) * *at4(call->k, b, j, h / group, e);
          p[j] = dot * call->scale;
          if (p[j] > mx) mx = p[j];
        }
        for (j = 0; j < Skv; ++j) {
          p[j] = mx == -INFINITY ? 0.0 : exp(p[j] - mx);
          sum += p[j];
        }
        for (e = 0; e < D; ++e) {
          double acc = 0.0;
          for (j = 0; j < Skv; ++j) acc += p[j] * *at4(call->v, b, j, h / group, e);
          *at4(call->out, b, i, h, e) = sum > 0.0 ? (float)(acc / sum) : 0.0f;
        }
        if (call->lse != NULL) {
          float* l = (float*)((char*)call->lse->data + call->lse->byte_offset);
          l[b * stride_of(call->lse, 0) + h * stride_of(call->lse, 1) + i * stride_of(call->lse, 2)] =
              sum > 0.0 ? (float)(mx + log(sum)) : -INFINITY;
        }
      }
  free(p);
  return 0;
}

static int refusing_forward(void* user_data, const diffattn_plugin_call* call, char* error, size_t error_cap) {
  (void)user_data;
  (void)call;
  strncpy(error, "this backend refuses every call", error_cap - 1);
  return 7;
}

static int g_calls = 0;

int diffattn_test_plugin_calls(void) { return g_calls; }

int diffattn_plugin_register(int abi_version, diffattn_plugin_add_fn add, void* registrar) {
  const char* mode = getenv("DIFFATTN_TEST_PLUGIN_MODE");
  diffattn_plugin_backend b;
  if (mode == NULL) mode = "";
  if (abi_version != DIFFATTN_PLUGIN_ABI_VERSION || strcmp(mode, "refuse") == 0) return 1;
  memset(&b, 0, sizeof b);
  b.name = strcmp(mode, "shadow") == 0 ? "FLASH_ATTN" : "TEST_NAIVE_ATTN";
  b.summary = "float64-accumulating CPU attention for the tests";
  b.devices = DIFFATTN_PLUGIN_DEVICE_CPU;
  b.dtypes = DIFFATTN_PLUGIN_DTYPE_FLOAT32;
  b.min_head_size = 8;
  b.max_head_size = 256;
  b.gqa = b.causal = b.key_padding_mask = b.lse = b.cross = 1;
  b.dense_mask = 0;
  b.user_data = &g_calls;
  b.forward = naive_forward;
  if (add(registrar, &b) != 0) return 1;
  b.name = "TEST_REFUSING_ATTN";
  b.summary = "fails every call";
  b.forward = strcmp(mode, "partial") == 0 ? NULL : refusing_forward;
  if (add(registrar, &b) != 0) return 1;
  return 0;
}
