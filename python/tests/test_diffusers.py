"""A real diffusers transformer with its attention routed through diffattn: small configurations with
random weights (no download), output against diffusers' own attention. Skipped without diffusers."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

import diffattn  # noqa: E402
import diffattn.diffusers  # noqa: E402
import diffattn.targets  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32
# bf16 on a GPU: whole-output relative L2 (elementwise bounds are brittle after several bf16 layers).
REL_L2 = 2e-2 if DEVICE == "cuda" else 1e-5
BACKENDS = ["TORCH_SDPA", "FLASH_ATTN", "CUDNN_ATTN"] if DEVICE == "cuda" else ["TORCH_SDPA"]


def small_wan():
    torch.manual_seed(0)
    model = diffusers.WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=64, in_channels=4, out_channels=4,
        text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2, cross_attn_norm=True, rope_max_seq_len=32,
    )
    inputs = dict(
        hidden_states=torch.randn(1, 4, 3, 16, 16),
        timestep=torch.tensor([500]),
        encoder_hidden_states=torch.randn(1, 24, 32),
    )
    return model, inputs


def small_flux():
    torch.manual_seed(0)
    model = diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=64,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32, guidance_embeds=False,
        axes_dims_rope=(16, 24, 24),
    )
    tokens, text = 64, 12
    inputs = dict(
        hidden_states=torch.randn(1, tokens, 16),
        encoder_hidden_states=torch.randn(1, text, 32),
        pooled_projections=torch.randn(1, 32),
        timestep=torch.tensor([0.5]),
        img_ids=torch.randn(tokens, 3),
        txt_ids=torch.zeros(text, 3),
    )
    return model, inputs


def small_sd3():
    """SD3's joint blocks (one with the dual self-attention): JointAttnProcessor2_0 and
    AttnProcessor2_0, which call torch's SDPA rather than diffusers' dispatcher."""
    torch.manual_seed(0)
    model = diffusers.SD3Transformer2DModel(
        sample_size=8, patch_size=1, in_channels=4, num_layers=2, attention_head_dim=64, num_attention_heads=2,
        caption_projection_dim=128, joint_attention_dim=32, pooled_projection_dim=16, out_channels=4,
        pos_embed_max_size=16, dual_attention_layers=(0,), qk_norm="rms_norm",
    )
    inputs = dict(hidden_states=torch.randn(1, 4, 8, 8), encoder_hidden_states=torch.randn(1, 7, 32),
                  pooled_projections=torch.randn(1, 16), timestep=torch.tensor([500]))
    return model, inputs


def small_cogvideox():
    torch.manual_seed(0)
    model = diffusers.CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=64, in_channels=4, out_channels=4, time_embed_dim=4,
        text_embed_dim=16, num_layers=1, sample_width=8, sample_height=8, sample_frames=5, patch_size=2,
        temporal_compression_ratio=4, max_text_seq_length=8,
    )
    inputs = dict(hidden_states=torch.randn(1, 2, 4, 8, 8), encoder_hidden_states=torch.randn(1, 8, 16),
                  timestep=torch.tensor([500]))
    return model, inputs


def small_hunyuan_video():
    """Its token refiner (AttnProcessor2_0, torch's SDPA, with a text mask) and its double- and
    single-stream blocks (diffusers' dispatcher); three of the twelve text tokens are padding."""
    torch.manual_seed(0)
    model = diffusers.HunyuanVideoTransformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=64, num_layers=1,
        num_single_layers=1, num_refiner_layers=1, patch_size=1, patch_size_t=1, text_embed_dim=16,
        pooled_projection_dim=8, rope_axes_dim=(16, 24, 24),
    )
    mask = torch.ones(1, 12, dtype=torch.bool)
    mask[:, 9:] = False
    inputs = dict(hidden_states=torch.randn(1, 4, 2, 8, 8), timestep=torch.tensor([500]),
                  encoder_hidden_states=torch.randn(1, 12, 16), encoder_attention_mask=mask,
                  pooled_projections=torch.randn(1, 8), guidance=torch.tensor([3000.0]))
    return model, inputs


def small_hunyuan_video_15():
    """HunyuanVideo-1.5: its token refiner (torch's SDPA, a padded prompt) and its joint blocks over
    video, two padded prompts and an image context."""
    torch.manual_seed(0)
    model = diffusers.HunyuanVideo15Transformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=64, num_layers=1,
        num_refiner_layers=1, patch_size=1, patch_size_t=1, text_embed_dim=16, text_embed_2_dim=8,
        image_embed_dim=8, rope_axes_dim=(16, 24, 24), target_size=64,
    )
    mask, mask_2 = torch.ones(1, 12), torch.ones(1, 6)
    mask[:, 9:] = 0
    mask_2[:, 4:] = 0
    inputs = dict(hidden_states=torch.randn(1, 4, 2, 8, 8), timestep=torch.tensor([500.0]),
                  encoder_hidden_states=torch.randn(1, 12, 16), encoder_attention_mask=mask,
                  encoder_hidden_states_2=torch.randn(1, 6, 8), encoder_attention_mask_2=mask_2,
                  image_embeds=torch.zeros(1, 5, 8))
    return model, inputs


def small_ltx_video():
    """LTX's cross-attention takes the prompt mask as an additive float mask ((1 - mask) * -10000),
    which the integration reads as the keep-mask it stands for; two of seven text tokens are padding."""
    torch.manual_seed(0)
    model = diffusers.LTXVideoTransformer3DModel(
        in_channels=8, out_channels=8, patch_size=1, patch_size_t=1, num_attention_heads=2, attention_head_dim=64,
        cross_attention_dim=128, num_layers=1, caption_channels=16,
    )
    mask = torch.ones(1, 7)
    mask[:, 5:] = 0
    inputs = dict(hidden_states=torch.randn(1, 2 * 4 * 4, 8), encoder_hidden_states=torch.randn(1, 7, 16),
                  timestep=torch.tensor([500]), encoder_attention_mask=mask, num_frames=2, height=4, width=4)
    return model, inputs


def small_ltx2():
    """LTX-2's audio and video streams: self-attention in each, cross-attention to each prompt (with
    additive masks) and between the streams (audio_to_video_attn, video_to_audio_attn)."""
    torch.manual_seed(0)
    model = diffusers.LTX2VideoTransformer3DModel(
        in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=64, cross_attention_dim=128,
        audio_in_channels=8, audio_out_channels=8, audio_num_attention_heads=2, audio_attention_head_dim=64,
        audio_cross_attention_dim=128, num_layers=1, caption_channels=16, use_prompt_embeddings=False,
    )
    mask = torch.ones(1, 7)
    mask[:, 5:] = 0
    inputs = dict(hidden_states=torch.randn(1, 2 * 4 * 4, 8), audio_hidden_states=torch.randn(1, 5, 8),
                  encoder_hidden_states=torch.randn(1, 7, 128), audio_encoder_hidden_states=torch.randn(1, 7, 128),
                  timestep=torch.tensor([500]), encoder_attention_mask=mask, audio_encoder_attention_mask=mask,
                  num_frames=2, height=4, width=4, audio_num_frames=5)
    return model, inputs


def on_device(inputs):
    """The model inputs on DEVICE, floating point ones in DTYPE (plain integers as they are)."""
    def move(v):
        if not isinstance(v, torch.Tensor):
            return v
        return v.to(DEVICE, DTYPE) if v.is_floating_point() else v.to(DEVICE)

    return {k: move(v) for k, v in inputs.items()}


def assert_matches(got, want):
    err = float((got.float() - want.float()).norm() / want.float().norm())
    assert err <= REL_L2, f"relative L2 error {err:.2e} > {REL_L2:.0e}"


def run(model, inputs):
    with torch.no_grad():
        return model(**inputs, return_dict=False)[0]


@pytest.fixture
def routed_calls(monkeypatch):
    """The roles of the attention calls that reached diffattn, in order."""
    calls = []
    layer_for = diffattn.targets.Route.layer_for

    def counting(self, q, k, scale, causal):
        calls.append(self.role)
        return layer_for(self, q, k, scale, causal)

    monkeypatch.setattr(diffattn.targets.Route, "layer_for", counting)
    return calls


def check_routed(make, calls_per_forward, backend, routed_calls):
    """The model routed through `backend` makes the expected calls per role and matches diffusers' own
    attention; removed, it is diffusers' own again and makes none."""
    model, inputs = make()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = on_device(inputs)
    want = run(model, inputs)
    assert routed_calls == []
    resolutions = diffattn.diffusers.apply(model, config={"default": backend})
    assert set(resolutions) == set(calls_per_forward)
    assert all(r.backend == backend for r in resolutions.values())
    got = run(model, inputs)
    assert {role: routed_calls.count(role) for role in set(routed_calls)} == calls_per_forward
    assert_matches(got, want)
    diffattn.diffusers.remove(model)
    routed_calls.clear()
    torch.testing.assert_close(run(model, inputs), want)
    assert routed_calls == []


@pytest.mark.parametrize(
    "make, calls_per_forward",
    [(small_wan, {"self": 2, "cross": 2}), (small_flux, {"joint": 1, "self": 1})],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_routed_transformer_matches_diffusers_attention(make, calls_per_forward, backend, routed_calls):
    check_routed(make, calls_per_forward, backend, routed_calls)


def test_sparse_video_backends_get_the_latent_geometry(routed_calls):
    """FASTVIDEO_VSA keeping every cube is dense attention, so the routed Wan matches diffusers' own;
    it runs only because apply passes each self-attention call its latent (3 x 8 x 8 tokens here)."""
    model, inputs = small_wan()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = on_device(inputs)
    want = run(model, inputs)
    diffattn.diffusers.apply(model, config={"per_role": {"self": {"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 4}}})
    got = run(model, inputs)
    assert routed_calls.count("self") == 2
    err = float((got.float() - want.float()).norm() / want.float().norm())
    assert err <= max(REL_L2, 1e-4), f"relative L2 error {err:.2e}"
    diffattn.diffusers.remove(model)
    assert not hasattr(model, "_diffattn_geometry_hook")


def test_per_role_configuration_reaches_each_role():
    model, inputs = small_wan()
    model = model.to(DEVICE, DTYPE).eval()
    resolutions = diffattn.diffusers.apply(
        model, config={"default": "TORCH_SDPA", "per_role": {"cross": {"backend": "TORCH_SDPA"}}}
    )
    assert resolutions["cross"].source == "per_role" and resolutions["self"].source == "default"
    run(model, {k: v.to(DEVICE, DTYPE) if v.is_floating_point() else v.to(DEVICE) for k, v in inputs.items()})


def test_an_explicit_backend_that_cannot_run_is_refused_at_apply():
    if DEVICE == "cuda":
        pytest.skip("every backend named here can run on a CUDA machine")
    model, _ = small_wan()
    with pytest.raises(diffattn.CannotRunHereError, match="FLASH_ATTN"):
        diffattn.diffusers.apply(model, config={"default": "FLASH_ATTN"}, platform="cpu")


@pytest.mark.parametrize("make", [small_wan, small_sd3, small_hunyuan_video, small_ltx_video])
def test_a_routed_transformer_compiles_without_graph_breaks(make, routed_calls):
    """Through diffusers' dispatcher (Wan), torch's SDPA in the processors (SD3, HunyuanVideo's token
    refiner) and LTX's additive mask (keep_mask_from_additive): one graph each."""
    model, inputs = make()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = on_device(inputs)
    diffattn.diffusers.apply(model, config={"default": "TORCH_SDPA"})
    want = run(model, inputs)
    routed_calls.clear()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager" if DEVICE == "cpu" else "inductor")
    with torch.no_grad():
        got = compiled(**inputs, return_dict=False)[0]
    assert routed_calls  # the compiled graph calls diffattn's op
    assert_matches(got, want)


def test_a_compiled_transformer_passes_the_latent_geometry(routed_calls):
    """Under torch.compile the forward's geometry reaches each self-attention call too: FASTVIDEO_VSA
    keeping 2 of 4 cubes (refused without it) gives the eager routed model's output."""
    model, inputs = small_wan()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = on_device(inputs)
    dense = run(model, inputs)
    diffattn.diffusers.apply(model, config={"per_role": {"self": {"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 2}}})
    want = run(model, inputs)
    routed_calls.clear()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager" if DEVICE == "cpu" else "inductor")
    with torch.no_grad():
        got = compiled(**inputs, return_dict=False)[0]
    assert routed_calls.count("self") == 2
    assert_matches(got, want)
    assert float((want.float() - dense.float()).norm() / dense.float().norm()) > 1e-4  # two cubes of four
    diffattn.diffusers.remove(model)


@pytest.mark.parametrize(
    "make, calls_per_forward",
    [
        (small_sd3, {"joint": 2, "self": 1}),
        (small_cogvideox, {"self": 1}),
        (small_hunyuan_video, {"joint": 1, "self": 1, "text": 1}),
        (small_hunyuan_video_15, {"joint": 1, "text": 1}),
        (small_ltx_video, {"self": 1, "cross": 1}),
        (small_ltx2, {"self": 2, "cross": 4}),
    ],
)
def test_sdpa_calling_and_additive_mask_families_are_routed(make, calls_per_forward, routed_calls):
    """SD3, CogVideoX and HunyuanVideo's refiner call torch's SDPA from their processors; LTX passes an
    additive mask. Each is routed call by call (counted per role) and matches diffusers' own attention.
    TORCH_SDPA only: these families have not run on a GPU backend yet."""
    check_routed(make, calls_per_forward, "TORCH_SDPA", routed_calls)


def test_outside_a_routed_processor_torch_sdpa_is_untouched():
    """The module-level F that routes SDPA calls gives torch's own result to every call that is not
    inside a routed processor (another model in the same process, or a role left out)."""
    model, inputs = small_sd3()
    diffattn.diffusers.apply(model, config={"default": "TORCH_SDPA"}, roles=["self"])
    from diffusers.models import attention_processor

    q, k, v = (torch.randn(1, 2, 9, 16) for _ in range(3))
    got = attention_processor.F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(got, torch.nn.functional.scaled_dot_product_attention(q, k, v), rtol=0, atol=0)


def test_additive_masks_become_keep_masks_or_are_refused():
    keep = torch.rand(2, 3, 1, 11) < 0.6
    keep[..., 0] = True
    keep = keep[:, :1].expand(2, 3, 1, 11)  # one row repeated over the heads, as prepare_attention_mask gives
    additive = (1 - keep.float()) * -10000.0
    got = diffattn.diffusers._mask_for_diffattn(additive)
    assert got.dtype == torch.bool and torch.equal(got, keep[:, 0, 0, :])
    got = diffattn.diffusers._mask_for_diffattn(additive.masked_fill(~keep, float("-inf")))
    assert torch.equal(got, keep[:, 0, 0, :])
    with pytest.raises(diffattn.InvalidInputError, match="not a keep-mask"):
        diffattn.diffusers._mask_for_diffattn(additive - 0.5)  # a bias
    with pytest.raises(diffattn.InvalidInputError, match="not a keep-mask"):
        diffattn.diffusers._mask_for_diffattn(torch.full((2, 1, 1, 11), -10000.0))  # rows that keep nothing
    with pytest.raises(diffattn.InvalidInputError, match="not a keep-mask"):
        diffattn.diffusers._mask_for_diffattn(torch.where(torch.rand(2, 3, 1, 11) < 0.5, 0.0, -1e4))  # heads differ
    torch.library.opcheck(torch.ops.diffattn.keep_mask_from_additive.default, (additive,))


@pytest.mark.parametrize(
    "make, role, spec",
    [
        # CogVideoX: [B, F, C, H, W] latents, text tokens before the video in one sequence.
        (small_cogvideox, "self", {"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 0.0}}),
        # LTX: packed [B, S, C] latents whose sizes come as num_frames, height and width.
        (small_ltx_video, "self", {"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 0.0}}),
        (small_ltx_video, "self", {"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 1}),
    ],
)
def test_other_latent_layouts_and_joint_sequences_get_their_geometry(make, role, spec, routed_calls):
    """Keeping every tile (sparsity 0, or the only cube) is dense attention, so the routed model matches
    diffusers' own; the sparse backends run only because each call carries its geometry."""
    model, inputs = make()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = on_device(inputs)
    want = run(model, inputs)
    resolutions = diffattn.diffusers.apply(model, config={"default": "TORCH_SDPA", "per_role": {role: spec}})
    assert resolutions[role].backend == spec["backend"]
    got = run(model, inputs)
    assert routed_calls.count(role) >= 1
    err = float((got.float() - want.float()).norm() / want.float().norm())
    assert err <= max(REL_L2, 1e-4), f"relative L2 error {err:.2e}"


def test_a_joint_sequence_geometry_places_the_text():
    geometry = diffattn.diffusers._ModelState("after")
    geometry.video = (2, 3, 4)
    assert geometry.for_tokens(24) == (2, 3, 4)
    assert geometry.for_tokens(31) == (2, 3, 4, 0, 7)
    assert geometry.for_tokens(20) is None
    geometry.text = "before"
    assert geometry.for_tokens(30) == (2, 3, 4, 6, 0)
    geometry.text = None
    assert geometry.for_tokens(30) is None  # a model without joint sequences


def test_an_outer_product_padding_mask_runs_as_key_padding():
    """HunyuanVideo-1.5's padding mask (query kept and key kept) becomes key padding plus the query rows
    to zero; any other dense mask stays dense."""
    keys, queries = torch.rand(2, 13) < 0.7, torch.rand(2, 11) < 0.7
    keys[:, 0] = True
    outer = (queries[:, :, None] & keys[:, None, :])[:, None]
    got_keys, got_queries, first_key = diffattn.diffusers._outer_as_key_padding(outer)
    assert torch.equal(got_keys, keys) and torch.equal(got_queries, queries) and not first_key
    every = torch.ones(2, 1, 11, 13, dtype=torch.bool)
    assert diffattn.diffusers._outer_as_key_padding(every) == (None, None, False)
    refiner = outer.clone()
    refiner[..., 0] = True  # HunyuanVideo's token refiner: padded query rows keep key 0
    got_keys, got_queries, first_key = diffattn.diffusers._outer_as_key_padding(refiner)
    assert torch.equal(got_keys, keys) and torch.equal(got_queries, queries) and first_key
    other = outer.clone()
    other[0, 0, int(queries[0].nonzero()[0]), 0] = False  # one kept pair dropped: not an outer product
    assert diffattn.diffusers._outer_as_key_padding(other) is None
    assert diffattn.diffusers._outer_as_key_padding(keys) is None  # already key padding
    per_head = outer.expand(2, 3, 11, 13)  # the same rows in every head, as prepare_attention_mask repeats them
    got_keys, got_queries, _ = diffattn.diffusers._outer_as_key_padding(per_head)
    assert torch.equal(got_keys, keys) and torch.equal(got_queries, queries)
    differing = per_head.clone()
    differing[:, 1] = True
    assert diffattn.diffusers._outer_as_key_padding(differing) is None


@pytest.mark.parametrize("make", [small_hunyuan_video_15, small_hunyuan_video, small_wan])
def test_the_seeds_sage_attn_examples_run_through_diffusers(make):
    """DIFFUSION_ATTENTION_BACKEND=SAGE_ATTN on HunyuanVideo-1.5, HunyuanVideo and Wan, in bf16: every
    call runs the 8-bit backend (the HunyuanVideo models' padding as key padding, which SAGE_ATTN
    takes) within 8-bit error of diffusers' own attention."""
    model, inputs = make()
    model = model.to(DEVICE, torch.bfloat16).eval()
    inputs = {k: (v.to(DEVICE, torch.bfloat16) if v.is_floating_point() else v.to(DEVICE))
              if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    want = run(model, inputs)
    resolutions = diffattn.diffusers.apply(model, config={"default": "SAGE_ATTN"})
    assert {r.backend for r in resolutions.values()} == {"SAGE_ATTN"}
    got = run(model, inputs)
    err = float((got.float() - want.float()).norm() / want.float().norm())
    assert err <= 2e-2, f"relative L2 error {err:.2e}"


def _scheduled_wan():
    """A small Wan routed with a schedule: dense (TORCH_SDPA) for steps 0-1, from step 2 its
    self-attention through RAINFUSION_ATTN at sparsity 0.6."""
    model, inputs = small_wan()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = on_device(inputs)
    dense = run(model, inputs)
    session = diffattn.Session(config={"default": "TORCH_SDPA"}, schedule={
        "profiles": {"sparse": {"default": "TORCH_SDPA", "per_role": {
            "self": {"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 0.6}}}}},
        "steps": [{"start": 2, "end": None, "profile": "sparse"}]})
    diffattn.diffusers.apply(model, session=session)
    return model, inputs, dense


def rel_l2(got, want):
    return float((got.float() - want.float()).norm() / want.float().norm())


def test_a_schedule_follows_the_step_the_model_is_given():
    model, inputs, dense = _scheduled_wan()
    with pytest.raises(diffattn.InvalidInputError, match="denoising step"):
        run(model, inputs)  # a scheduled call must say its step
    for step in range(4):
        diffattn.diffusers.set_step(model, step, num_steps=4)
        err = rel_l2(run(model, inputs), dense)
        assert (err > 1e-3) == (step >= 2), f"step {step}: relative L2 {err:.2e} against dense"
    with pytest.raises(diffattn.UsageError, match="not a step"):
        diffattn.diffusers.set_step(model, 4, num_steps=4)


def test_the_step_callback_advances_through_a_generation_and_starts_over():
    model, inputs, dense = _scheduled_wan()
    second, _, _ = _scheduled_wan()  # a pipeline's second transformer (Wan2.2-A14B has two)
    callback = diffattn.diffusers.step_callback(model, second)

    class Pipe:
        num_timesteps = 3

    seen = []
    for _generation in range(2):
        for i in range(Pipe.num_timesteps):
            seen.append(rel_l2(run(model, inputs), dense) > 1e-3)  # the pipeline's forward of step i
            assert callback(Pipe(), i, None, {}) == {}
    assert seen == [False, False, True] * 2
    assert second._diffattn_state.step == 0 and model._diffattn_state.step == 0
    callback(Pipe(), 1, None, {})
    assert second._diffattn_state.step == 2 and second._diffattn_state.num_steps == 3
    with pytest.raises(diffattn.UsageError, match="routed transformers"):
        diffattn.diffusers.step_callback()


def test_a_compiled_model_follows_the_step():
    model, inputs, dense = _scheduled_wan()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager" if DEVICE == "cpu" else "inductor")
    for step in (0, 2, 1, 3):
        diffattn.diffusers.set_step(model, step, num_steps=4)
        with torch.no_grad():
            got = compiled(**inputs, return_dict=False)[0]
        assert (rel_l2(got, dense) > 1e-3) == (step >= 2), f"step {step}"
