/* Uses the installed libdiffattn.so through the C interface: a CPU session, one role resolved,
 * one attention call on fresh random inputs checked against a naive computation. Exits nonzero
 * with a message on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "diffattn/c_api.h"

enum { kBatch = 2, kSeqQ = 4, kSeqKv = 6, kHeads = 2, kHeadSize = 8 };
#define Q_SIZE (kBatch * kSeqQ * kHeads * kHeadSize)
#define KV_SIZE (kBatch * kSeqKv * kHeads * kHeadSize)

static uint64_t rng_state;

/* Uniform in [-1, 1) from a 64-bit linear congruential generator. */
static float next_uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static DLTensor cpu_tensor(float* data, int64_t* shape) {
  DLTensor t;
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = 4;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

static int failed(const char* what, diffattn_code code) {
  fprintf(stderr, "consumer_c: %s: %s: %s\n", what, diffattn_code_name(code), diffattn_last_error());
  return 1;
}

/* expected[b, i, h, :] = softmax(q . k / sqrt(D)) v, in double. */
static void naive_attention(const float* q, const float* k, const float* v, double* expected) {
  int b, h, i, j, d;
  for (b = 0; b < kBatch; ++b)
    for (h = 0; h < kHeads; ++h)
      for (i = 0; i < kSeqQ; ++i) {
        double score[kSeqKv], top = -INFINITY, total = 0;
        for (j = 0; j < kSeqKv; ++j) {
          double dot = 0;
          for (d = 0; d < kHeadSize; ++d)
            dot += (double)q[((b * kSeqQ + i) * kHeads + h) * kHeadSize + d] *
                   k[((b * kSeqKv + j) * kHeads + h) * kHeadSize + d];
          score[j] = dot / sqrt((double)kHeadSize);
          if (score[j] > top) top = score[j];
        }
        for (j = 0; j < kSeqKv; ++j) total += (score[j] = exp(score[j] - top));
        for (d = 0; d < kHeadSize; ++d) {
          double acc = 0;
          for (j = 0; j < kSeqKv; ++j) acc += score[j] * v[((b * kSeqKv + j) * kHeads + h) * kHeadSize + d];
          expected[((b * kSeqQ + i) * kHeads + h) * kHeadSize + d] = acc / total;
        }
      }
}

int main(void) {
  static float q[Q_SIZE], k[KV_SIZE], v[KV_SIZE], out[Q_SIZE];
  static double expected[Q_SIZE];
  int64_t q_shape[4] = {kBatch, kSeqQ, kHeads, kHeadSize}, kv_shape[4] = {kBatch, kSeqKv, kHeads, kHeadSize};
  DLTensor tq, tk, tv, to;
  diffattn_session* session = NULL;
  diffattn_layer* layer = NULL;
  diffattn_layer_desc desc;
  char* resolution = NULL;
  double worst = 0;
  unsigned seed = (unsigned)time(NULL);
  diffattn_code code;
  int i;

  rng_state = seed;
  for (i = 0; i < Q_SIZE; ++i) q[i] = next_uniform(), out[i] = NAN;
  for (i = 0; i < KV_SIZE; ++i) k[i] = next_uniform(), v[i] = next_uniform();

  code = diffattn_session_create("cpu", "{\"per_role\": {\"cross\": {\"backend\": \"TORCH_SDPA\"}}}", &session);
  if (code != DIFFATTN_OK) return failed("creating a session", code);
  code = diffattn_resolve(session, "cross", NULL, kHeadSize, 0, &resolution);
  if (code != DIFFATTN_OK) return failed("resolving role 'cross'", code);
  diffattn_layer_desc_init(&desc);
  desc.num_heads = kHeads;
  desc.head_size = kHeadSize;
  desc.role = "cross";
  code = diffattn_layer_create(session, &desc, &layer);
  diffattn_session_destroy(session);
  if (code != DIFFATTN_OK) return failed("creating the layer", code);

  tq = cpu_tensor(q, q_shape);
  tk = cpu_tensor(k, kv_shape);
  tv = cpu_tensor(v, kv_shape);
  to = cpu_tensor(out, q_shape);
  code = diffattn_layer_forward(layer, &tq, &tk, &tv, &to, NULL, NULL, NULL);
  if (code != DIFFATTN_OK) return failed("running the layer", code);

  naive_attention(q, k, v, expected);
  for (i = 0; i < Q_SIZE; ++i) {
    double error = fabs(out[i] - expected[i]);
    if (error != error || error > worst) worst = error; /* a NaN stays */
  }
  if (!(worst < 1e-4)) {
    fprintf(stderr, "consumer_c: %s differs from the naive attention by %g (seed %u)\n",
            diffattn_layer_backend(layer), worst, seed);
    return 1;
  }
  printf("consumer_c: diffattn %s, resolved %s, layer %s, max |error| %.2g (seed %u)\n", diffattn_version(),
         resolution, diffattn_layer_backend(layer), worst, seed);
  diffattn_string_free(resolution);
  diffattn_layer_destroy(layer);
  return 0;
}
