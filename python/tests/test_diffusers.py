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


@pytest.mark.parametrize(
    "make, calls_per_forward",
    [(small_wan, {"self": 2, "cross": 2}), (small_flux, {"joint": 1, "self": 1})],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_routed_transformer_matches_diffusers_attention(make, calls_per_forward, backend, routed_calls):
    model, inputs = make()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = {k: v.to(DEVICE, DTYPE) if v.is_floating_point() else v.to(DEVICE) for k, v in inputs.items()}
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


def test_sparse_video_backends_get_the_latent_geometry(routed_calls):
    """FASTVIDEO_VSA keeping every cube is dense attention, so the routed Wan matches diffusers' own;
    it runs only because apply passes each self-attention call its latent (3 x 8 x 8 tokens here)."""
    model, inputs = small_wan()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = {k: v.to(DEVICE, DTYPE) if v.is_floating_point() else v.to(DEVICE) for k, v in inputs.items()}
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


def test_a_routed_transformer_compiles_without_graph_breaks(routed_calls):
    model, inputs = small_wan()
    model = model.to(DEVICE, DTYPE).eval()
    inputs = {k: v.to(DEVICE, DTYPE) if v.is_floating_point() else v.to(DEVICE) for k, v in inputs.items()}
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
    inputs = {k: v.to(DEVICE, DTYPE) if v.is_floating_point() else v.to(DEVICE) for k, v in inputs.items()}
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
