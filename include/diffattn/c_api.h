/* diffattn's C interface: the same selection and the same backends as the C++ API, for callers in
 * C, Python (ctypes/cffi) or any language with a C foreign-function interface.
 *
 * Every function returns a diffattn_code; DIFFATTN_OK is 0. On an error the calling thread's
 * diffattn_last_error() says what was asked, what failed and what to do instead, and no output
 * argument or caller tensor has been written. Nothing throws across this interface.
 *
 * Typical use:
 *   diffattn_session* s;  diffattn_layer* l;
 *   diffattn_session_create("cpu", "{\"default\": {\"backend\": \"TORCH_SDPA\"}}", &s);
 *   diffattn_layer_desc d;  diffattn_layer_desc_init(&d);
 *   d.num_heads = 24;  d.head_size = 128;  d.role = "self";
 *   diffattn_layer_create(s, &d, &l);
 *   diffattn_layer_forward(l, &q, &k, &v, &out, NULL, NULL, NULL);   (DLPack tensors)
 *   diffattn_layer_destroy(l);  diffattn_session_destroy(s);
 */
#ifndef DIFFATTN_C_API_H_
#define DIFFATTN_C_API_H_

#include <stddef.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The closed set of outcomes (the same as the C++ ErrorCode, in the same order). */
typedef enum diffattn_code {
  DIFFATTN_OK = 0,
  DIFFATTN_INVALID_CONFIG = 1,  /* a configuration value is malformed or inconsistent */
  DIFFATTN_UNKNOWN_BACKEND = 2, /* a backend name that is not registered */
  DIFFATTN_UNSUPPORTED = 3,     /* a valid request that this platform or backend cannot run */
  DIFFATTN_UNAVAILABLE = 4,     /* a dependency (library, kernel build, device) is missing */
  DIFFATTN_INVALID_INPUT = 5,   /* arguments or tensors that do not describe a valid call */
  DIFFATTN_CUDA_ERROR = 6,      /* a CUDA or cuDNN call failed */
  DIFFATTN_INTERNAL = 7         /* a defect in diffattn */
} diffattn_code;

/* The message of the calling thread's last failed call ("" when none has failed). Valid until the
 * thread's next diffattn call. */
const char* diffattn_last_error(void);
/* Stable lower-case name of a code, e.g. "invalid_config". */
const char* diffattn_code_name(diffattn_code code);
/* "0.1.0" */
const char* diffattn_version(void);
/* The exit status the command-line tool gives for a code: 0 ok; 2 invalid configuration or usage
 * (invalid_config, unknown_backend, invalid_input); 3 valid but cannot run here (unsupported,
 * unavailable); 1 anything else. Bindings group their error classes by it. */
int diffattn_exit_code(int code);

/* Validates a configuration object with every rule --diffusion-attention-config applies (the
 * environment is not read) and returns it normalised: {"default": spec or null, "per_role":
 * {dotted role: spec}}, "auto" entries dropped, typed-block defaults filled in. Release *out_json
 * with diffattn_string_free. */
diffattn_code diffattn_config_normalise(const char* config_json, char** out_json);
/* The same for one AttentionSpec (a backend name string or an object); `field` names where it sits
 * in messages, e.g. "per_role['cross']". *out_json is the normalised spec, or "null" for "auto". */
diffattn_code diffattn_spec_normalise(const char* spec_json, const char* field, char** out_json);

/* A platform and an attention configuration: resolves backends for layers.
 *
 * platform: "cpu", "cuda", a path to a JSON platform description, the description itself (text
 *           starting with '{'), or NULL/"" to probe (CUDA when a device answers, else CPU).
 * config_json: the --diffusion-attention-config object, e.g.
 *           {"default": {"backend": "FLASH_ATTN"}, "per_role": {"cross": {"backend": "TORCH_SDPA"}}},
 *           or NULL/"" for none. DIFFUSION_ATTENTION_BACKEND in the environment fills the default
 *           when the configuration sets none, as on the command line. */
typedef struct diffattn_session diffattn_session;
diffattn_code diffattn_session_create(const char* platform, const char* config_json, diffattn_session** out);
void diffattn_session_destroy(diffattn_session* session);
/* The session's configuration as it resolves (after DIFFUSION_ATTENTION_BACKEND), in the form of
 * diffattn_config_normalise. Release with diffattn_string_free. */
diffattn_code diffattn_session_config(diffattn_session* session, char** out_json);
/* The session's platform as a JSON description (the form a described platform is given in, plus
 * "sm_count", "compiled_archs" and "origin"), and optionally (out_description may be NULL) one
 * readable line such as "NVIDIA H200 (sm_90, 132 SMs, cuDNN 9.19.0)". Release both with
 * diffattn_string_free. */
diffattn_code diffattn_session_platform(diffattn_session* session, char** out_json, char** out_description);
/* Whether the configuration file `config_path` was tuned (diffattn tune) on another platform than
 * the session's: *out_warning is the warning, or "" when its tuning record (FILE.tuning.json beside
 * it) agrees or does not exist. Release with diffattn_string_free. */
diffattn_code diffattn_session_tuning_warning(diffattn_session* session, const char* config_path, char** out_warning);

/* Loads a plugin library (include/diffattn/plugin.h) into this session: its backends become
 * selectable by name in this session's configuration, never as platform defaults. All of the
 * library's backends are added, or none. A name that is taken (a built-in, or another plugin's:
 * the first registration wins) refuses the load. out_names_json (may be NULL) receives the added
 * names as a JSON array; release it with diffattn_string_free. Load plugins before sharing the
 * session between threads' layer creation, or expect layers created meanwhile to resolve without
 * them. */
diffattn_code diffattn_session_load_plugin(diffattn_session* session, const char* path, char** out_names_json);

/* The resolution for one role as JSON (the form `diffattn resolve --json` prints per role):
 * {"role", "category", "head_size", "backend", "source", "spec", "considered"}. category may be
 * NULL. *out_json is allocated by diffattn: release it with diffattn_string_free. */
diffattn_code diffattn_resolve(diffattn_session* session, const char* role, const char* category, int head_size,
                               int allow_trtllm_default, char** out_json);
void diffattn_string_free(char* text);

/* An attention layer as a model declares it. Fill with diffattn_layer_desc_init, then set fields. */
typedef struct diffattn_layer_desc {
  int num_heads;
  int num_kv_heads;  /* 0: as many as num_heads */
  int head_size;
  int has_scale;     /* 0: scale = head_size^-1/2 */
  float scale;
  int causal;        /* top-left aligned, as PyTorch's is_causal */
  const char* role;  /* e.g. "self", "cross"; NULL means "self" */
  const char* category;      /* optional role category; NULL for none */
  int allow_trtllm_default;  /* the model's path satisfies TRTLLM's automatic contract */
} diffattn_layer_desc;
void diffattn_layer_desc_init(diffattn_layer_desc* desc);

/* The attention schedule for the layers this session creates from now on: the JSON object of
 * --diffusion-attention-schedule (profiles over denoising steps; docs/user_guide.md), checked by
 * the same rules. NULL or "" removes it. A layer created under a schedule resolves every profile
 * for its role at creation and needs each call's step (diffattn_layer_forward_step). */
diffattn_code diffattn_session_set_schedule(diffattn_session* session, const char* schedule_json);

/* Where a call sits in the denoising loop. */
typedef struct diffattn_denoising_step {
  long long index;      /* 0-based denoising step */
  long long num_steps;  /* steps of the generation; 0: not known */
  int has_sigma;        /* 0: no sigma */
  double sigma;         /* normalised noise level in [0, 1], for a schedule by sigma */
} diffattn_denoising_step;

/* A layer resolves its backend once, at creation. It keeps no reference to the session. */
typedef struct diffattn_layer diffattn_layer;
diffattn_code diffattn_layer_create(diffattn_session* session, const diffattn_layer_desc* desc, diffattn_layer** out);
void diffattn_layer_destroy(diffattn_layer* layer);
/* The canonical name of the layer's backend, e.g. "FLASH_ATTN"; valid while the layer lives. */
const char* diffattn_layer_backend(const diffattn_layer* layer);
/* The layer's resolution as JSON, in the form of diffattn_resolve. Release with diffattn_string_free. */
diffattn_code diffattn_layer_resolution(const diffattn_layer* layer, char** out_json);

/* One call in DiT layout: q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D], out [B, Sq, Hq, D], strided
 * DLPack views on one device. mask (optional, NULL): bool keep-mask [B, Skv] or
 * [B|1, H|1, Sq, Skv]. lse (optional, NULL): float32 [B, Hq, Sq], natural log. stream: a
 * cudaStream_t for CUDA tensors, NULL for the default stream (ignored on the CPU). The layer's
 * scale and causal flag apply. */
diffattn_code diffattn_layer_forward(const diffattn_layer* layer, const DLTensor* q, const DLTensor* k,
                                     const DLTensor* v, DLTensor* out, const DLTensor* mask, DLTensor* lse,
                                     void* stream);
/* diffattn_layer_forward at a denoising step (NULL: none): a layer created under a schedule runs
 * the backend of the profile whose range holds the step. */
diffattn_code diffattn_layer_forward_step(const diffattn_layer* layer, const DLTensor* q, const DLTensor* k,
                                          const DLTensor* v, DLTensor* out, const DLTensor* mask, DLTensor* lse,
                                          const diffattn_denoising_step* step, void* stream);

/* The latent video a self-attention call's tokens form, which the sparse video backends
 * (FASTVIDEO_VSA, RAINFUSION_ATTN) need: frames x height x width tokens after patchifying, in
 * (frame, row, column) order, with text_before / text_after text tokens around them in a joint
 * sequence (Sq = Skv = text_before + frames * height * width + text_after). */
typedef struct diffattn_video_geometry {
  long long frames, height, width;
  long long text_before, text_after;
} diffattn_video_geometry;

/* What a call may carry beyond its tensors. Fill with diffattn_call_extras_init, then set fields. */
typedef struct diffattn_call_extras {
  const diffattn_denoising_step* step;   /* NULL: none (a scheduled layer needs it) */
  const diffattn_video_geometry* video;  /* NULL: none (the sparse video backends need it) */
  long long layer_index;                 /* the model's layer of this call, -1: not given
                                            (RAINFUSION_ATTN's skip_layers need it) */
  const DLTensor* gate;                  /* FASTVIDEO_VSA's gate [B, Sq, Hq, Dv], NULL: none */
} diffattn_call_extras;
void diffattn_call_extras_init(diffattn_call_extras* extras);

/* diffattn_layer_forward_step with everything a call may carry (extras NULL: nothing more). */
diffattn_code diffattn_layer_forward_ex(const diffattn_layer* layer, const DLTensor* q, const DLTensor* k,
                                        const DLTensor* v, DLTensor* out, const DLTensor* mask, DLTensor* lse,
                                        const diffattn_call_extras* extras, void* stream);

/* Sequence parallelism (docs/parallel.md): a layer whose every rank holds a shard of the image tokens.
 *
 * A communicator joins this rank to its group. NCCL, one process per GPU: rank 0 makes the unique id
 * (diffattn_nccl_unique_id; release it with diffattn_string_free) and the caller's process group
 * (torch.distributed, MPI, a file) passes it to every rank. In-process: `world` communicators for
 * threads of this process, out_comms an array of `world` pointers (CPU tensors). */
typedef struct diffattn_comm diffattn_comm;
diffattn_code diffattn_nccl_unique_id(char** out_id);
diffattn_code diffattn_comm_create_nccl(const char* unique_id, int rank, int world, int device, diffattn_comm** out);
diffattn_code diffattn_comm_create_in_process(int world, diffattn_comm** out_comms);
void diffattn_comm_destroy(diffattn_comm* comm);

/* Every rank of `comm` (ulysses x ring ranks) creates the layer together. The layer keeps a
 * reference to `comm`: destroy the layer first. */
typedef struct diffattn_parallel_layer diffattn_parallel_layer;
diffattn_code diffattn_parallel_layer_create(diffattn_session* session, const diffattn_layer_desc* desc, int ulysses,
                                             int ring, diffattn_comm* comm, diffattn_parallel_layer** out);
void diffattn_parallel_layer_destroy(diffattn_parallel_layer* layer);
const char* diffattn_parallel_layer_backend(const diffattn_parallel_layer* layer);

/* Every rank calls it together. q/k/v/out: this rank's image shard, contiguous [B, n, H, D] with
 * n = the tokens of rank r when image_tokens are split in ceil(image_tokens / ranks) blocks
 * (fewer or none on the last ranks). joint_q/k/v/out (all four or NULL): text tokens joined to the
 * image sequence, the same on every rank, [B, T, H, D]; joint_rear: 0 places them before the image
 * tokens, 1 after. joint_mask (NULL or bool [B, T]): text keys kept. */
diffattn_code diffattn_parallel_layer_forward(diffattn_parallel_layer* layer, const DLTensor* q, const DLTensor* k,
                                              const DLTensor* v, DLTensor* out, long long image_tokens,
                                              const DLTensor* joint_q, const DLTensor* joint_k, const DLTensor* joint_v,
                                              DLTensor* joint_out, const DLTensor* joint_mask, int joint_rear,
                                              void* stream);

#ifdef __cplusplus
}
#endif

#endif /* DIFFATTN_C_API_H_ */
