/* The interface a diffattn plugin implements: a shared library that provides attention backends
 * under names of its own, for example the exact kernel build a model was trained with. Load one
 * into a session with diffattn_session_load_plugin (c_api.h) and select its backends by name, like
 * the built-ins. Plugin backends are never platform defaults: they run only when named.
 *
 * A plugin exports one C symbol, diffattn_plugin_register. diffattn calls it once per load with
 * the ABI version it speaks; the plugin calls `add` once per backend and returns 0, or returns
 * nonzero to refuse the load (for example for an ABI version it does not know).
 */
#ifndef DIFFATTN_PLUGIN_H_
#define DIFFATTN_PLUGIN_H_

#include <stddef.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DIFFATTN_PLUGIN_ABI_VERSION 1

/* Where a backend runs and what it reads (bit sets). */
#define DIFFATTN_PLUGIN_DEVICE_CPU 1u
#define DIFFATTN_PLUGIN_DEVICE_CUDA 2u
#define DIFFATTN_PLUGIN_DTYPE_FLOAT32 1u
#define DIFFATTN_PLUGIN_DTYPE_FLOAT16 2u
#define DIFFATTN_PLUGIN_DTYPE_BFLOAT16 4u

/* One call, already checked by diffattn: the views describe a valid problem in DiT layout
 * (q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D], out [B, Sq, Hq, D]) that is within the backend's
 * declared capabilities. */
typedef struct diffattn_plugin_call {
  const DLTensor* q;
  const DLTensor* k;
  const DLTensor* v;
  DLTensor* out;
  const DLTensor* mask; /* NULL, or a bool keep-mask [B, Skv] or [B|1, H|1, Sq, Skv] */
  DLTensor* lse;        /* NULL, or float32 [B, Hq, Sq], natural log */
  float scale;          /* the softmax scale to use (the layer's, or head_size^-1/2) */
  int causal;           /* top-left aligned */
  void* stream;         /* a cudaStream_t for CUDA views, NULL for the default stream */
} diffattn_plugin_call;

typedef struct diffattn_plugin_backend {
  const char* name;    /* upper case letters, digits and '_'; must not be a built-in name */
  const char* summary; /* one line for listings */
  unsigned devices;    /* DIFFATTN_PLUGIN_DEVICE_* bits */
  unsigned dtypes;     /* DIFFATTN_PLUGIN_DTYPE_* bits */
  int min_head_size;   /* inclusive range of head sizes */
  int max_head_size;
  int gqa, causal, key_padding_mask, dense_mask, lse, cross; /* 1 where supported */
  void* user_data;     /* handed back to forward */
  /* Runs one call. Returns 0, or nonzero after writing a NUL-terminated message of at most
   * error_cap bytes to `error`; on failure it must leave out and lse untouched. */
  int (*forward)(void* user_data, const diffattn_plugin_call* call, char* error, size_t error_cap);
} diffattn_plugin_backend;

/* diffattn copies the strings and the fields; user_data and forward must stay valid while the
 * library is loaded (diffattn keeps it loaded while any session or layer uses it). Returns 0, or
 * nonzero when the backend was refused (bad name, name taken, bad capabilities). */
typedef int (*diffattn_plugin_add_fn)(void* registrar, const diffattn_plugin_backend* backend);

/* The symbol a plugin exports. */
typedef int (*diffattn_plugin_register_fn)(int abi_version, diffattn_plugin_add_fn add, void* registrar);
#define DIFFATTN_PLUGIN_REGISTER_SYMBOL "diffattn_plugin_register"

#ifdef __cplusplus
}
#endif

#endif /* DIFFATTN_PLUGIN_H_ */
