"""The PyTorch custom ops: results against PyTorch's SDPA, torch.compile without graph breaks, CUDA
graph capture, preallocated outputs, the caller's stream. Skipped without PyTorch (CUDA parts without a GPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import diffattn  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
CUDA_BACKENDS = ["TORCH_SDPA", "FLASH_ATTN", "CUDNN_ATTN"]


def sdpa_reference(q, k, v, mask=None, scale=None, causal=False):
    """PyTorch SDPA in float32 on DiT-layout tensors."""
    heads, kv_heads = q.shape[2], k.shape[2]
    qt, kt, vt = (x.float().transpose(1, 2) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(heads // kv_heads, 1), vt.repeat_interleave(heads // kv_heads, 1)
    attn_mask = None if mask is None else (mask[:, None, None, :] if mask.dim() == 2 else mask)
    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=attn_mask, scale=scale, is_causal=causal).transpose(1, 2)


def qkv(device, dtype, batch=2, sq=77, skv=77, heads=4, kv_heads=4, dim=64, generator=None):
    def draw(*shape):
        return torch.randn(*shape, device=device, dtype=torch.float32, generator=generator).to(dtype)

    return draw(batch, sq, heads, dim), draw(batch, skv, kv_heads, dim), draw(batch, skv, kv_heads, dim)


def test_cpu_tensors_match_sdpa_with_mask_gqa_and_lse():
    q, k, v = qkv("cpu", torch.float32, sq=33, skv=41, heads=4, kv_heads=2, dim=32)
    mask = torch.rand(2, 41) < 0.7
    mask[:, 0] = True
    out, lse = diffattn.attention(q, k, v, mask=mask, scale=0.2, return_lse=True,
                                  config={"default": "TORCH_SDPA"}, platform="cpu")
    torch.testing.assert_close(out, sdpa_reference(q, k, v, mask, 0.2), rtol=1e-4, atol=1e-5)
    assert lse.shape == (2, 4, 33) and lse.dtype == torch.float32 and torch.isfinite(lse).all()


def test_the_ops_pass_torch_library_opcheck():
    layer = diffattn.Attention(num_heads=4, head_size=32, config={"default": "TORCH_SDPA"}, platform="cpu")
    q, k, v = qkv("cpu", torch.float32, sq=9, skv=11, heads=4, dim=32)
    torch.library.opcheck(torch.ops.diffattn.attention.default, (q, k, v, None, layer.key, None, False))
    torch.library.opcheck(torch.ops.diffattn.attention_lse.default, (q, k, v, None, layer.key, None, False))
    out = torch.empty_like(q)
    torch.library.opcheck(torch.ops.diffattn.attention_out.default, (q, k, v, None, out, None, layer.key, None, False))


def test_compiles_without_graph_breaks_on_the_cpu():
    layer = diffattn.Attention(num_heads=4, head_size=32, config={"default": "TORCH_SDPA"}, platform="cpu")

    def block(x, w):
        h = (x @ w).unflatten(-1, (4, 32))
        return layer(h, h, h).flatten(2) + x

    x, w = torch.randn(2, 19, 128), torch.randn(128, 128) * 0.05
    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, w), block(x, w), rtol=1e-5, atol=1e-5)


def _video_layer(spec, heads=2, head_size=64, schedule=None):
    session = diffattn.Session(config={"default": "TORCH_SDPA", "per_role": {"self": spec}}, platform="cpu",
                               schedule=schedule)
    return session.layer(num_heads=heads, head_size=head_size)


def test_video_geometry_and_gate_compile_without_graph_breaks():
    """FASTVIDEO_VSA keeping 2 of 4 cubes needs the geometry (a call without it is refused), so the
    compiled call equals the eager one only if video= and gate= reach the op."""
    frames, height, width = 4, 8, 8
    q, k, v = qkv("cpu", torch.float32, batch=1, sq=frames * height * width, skv=frames * height * width,
                  heads=2, kv_heads=2, dim=64)
    gate = torch.rand(q.shape) + 0.5
    layer = _video_layer({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 2})

    def call(q, k, v, gate):
        return layer(q * 1.0, k, v, video=(frames, height, width), gate=gate) + 0.0

    want = call(q, k, v, gate)
    torch.testing.assert_close(torch.compile(call, backend="aot_eager", fullgraph=True)(q, k, v, gate), want,
                               rtol=1e-5, atol=1e-6)
    dense = sdpa_reference(q, k, v)
    assert (layer(q, k, v, video=(frames, height, width)) - dense).abs().max() > 1e-3  # the sparse path ran


def test_a_geometry_from_a_traced_shape_and_the_layer_index_compile():
    """The geometry comes from a tensor's shape inside the compiled function (symbolic under dynamic
    shapes); RAINFUSION_ATTN's skip_layers reads layer_index: layer 3 is dense, layer 4 is not."""
    layer = _video_layer({"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 0.6, "skip_layers": "3"}})

    def call(latent, q, k, v, index):
        frames, height, width = latent.shape[2:]
        return layer(q, k, v, video=(frames, height, width), layer_index=index)

    compiled = torch.compile(call, backend="aot_eager", fullgraph=True, dynamic=True)
    for frames, height, width in [(3, 8, 16), (2, 8, 24)]:
        tokens = frames * height * width
        latent = torch.empty(1, 4, frames, height, width)
        q, k, v = qkv("cpu", torch.float32, batch=1, sq=tokens, skv=tokens, heads=2, kv_heads=2, dim=64)
        dense = sdpa_reference(q, k, v)
        torch.testing.assert_close(compiled(latent, q, k, v, 3), dense, rtol=1e-4, atol=1e-5)
        sparse = compiled(latent, q, k, v, 4)
        torch.testing.assert_close(sparse, call(latent, q, k, v, 4), rtol=1e-5, atol=1e-6)
        assert (sparse - dense).abs().max() > 1e-3


def test_a_scheduled_layer_compiles_with_the_step():
    """Steps 0-1 run the default (TORCH_SDPA, dense), steps from 2 the sparse profile: the compiled
    calls follow the schedule as the step changes."""
    schedule = {"profiles": {"sparse": {"default": {"backend": "RAINFUSION_ATTN",
                                                    "block_sparse": {"sparsity": 0.6}}}},
                "steps": [{"start": 2, "end": None, "profile": "sparse"}]}
    layer = _video_layer("TORCH_SDPA", schedule=schedule)
    frames, height, width = 3, 8, 16
    q, k, v = qkv("cpu", torch.float32, batch=1, sq=frames * height * width, skv=frames * height * width,
                  heads=2, kv_heads=2, dim=64)

    def call(q, k, v, step):
        return layer(q, k, v, step=step, video=(frames, height, width))

    compiled = torch.compile(call, backend="aot_eager", fullgraph=True)
    dense = sdpa_reference(q, k, v)
    for step in range(4):
        got = compiled(q, k, v, step)
        torch.testing.assert_close(got, call(q, k, v, step), rtol=1e-5, atol=1e-6)
        assert ((got - dense).abs().max() > 1e-3) == (step >= 2), f"step {step}"


def test_a_bad_geometry_is_refused_under_compile():
    layer = _video_layer({"backend": "FASTVIDEO_VSA"})
    q, k, v = qkv("cpu", torch.float32, batch=1, sq=24, skv=24, heads=2, kv_heads=2, dim=64)
    compiled = torch.compile(lambda q, k, v: layer(q, k, v, video=(2, 12)), backend="aot_eager")
    with pytest.raises(diffattn.UsageError, match=r"video= takes \(frames, height, width\)"):
        compiled(q, k, v)


def test_the_call_op_with_its_extras_passes_opcheck():
    layer = _video_layer({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 2})
    q, k, v = qkv("cpu", torch.float32, batch=1, sq=4 * 4 * 8, skv=4 * 4 * 8, heads=2, kv_heads=2, dim=64)
    gate, out = torch.rand(q.shape), torch.empty_like(q)
    torch.library.opcheck(torch.ops.diffattn.attention_ex_out.default,
                          (q, k, v, None, gate, out, None, layer.key, None, False, [4, 4, 8], None, None, None))


@needs_cuda
@pytest.mark.parametrize("backend", CUDA_BACKENDS)
def test_cuda_bf16_matches_sdpa(backend):
    q, k, v = qkv("cuda", torch.bfloat16, sq=300, skv=520, heads=8, kv_heads=8, dim=128)
    out = diffattn.attention(q, k, v, config={"default": backend})
    want = sdpa_reference(q, k, v)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)


@needs_cuda
def test_cuda_runs_on_the_callers_stream_into_a_preallocated_output():
    layer = diffattn.Attention(num_heads=8, head_size=128, config={"default": "FLASH_ATTN"})
    q, k, v = qkv("cuda", torch.bfloat16, sq=512, skv=512, heads=8, kv_heads=8, dim=128)
    out = torch.full_like(q, float("nan"))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        got = layer(q, k, v, out=out)
    torch.cuda.current_stream().wait_stream(stream)
    assert got is out
    torch.testing.assert_close(out.float(), sdpa_reference(q, k, v), rtol=2e-2, atol=2e-2)


@needs_cuda
def test_cuda_graph_capture_and_replay():
    layer = diffattn.Attention(num_heads=8, head_size=128, config={"default": "FLASH_ATTN"})
    q, k, v = qkv("cuda", torch.bfloat16, sq=256, skv=256, heads=8, kv_heads=8, dim=128)
    out = torch.empty_like(q)
    layer(q, k, v, out=out)  # warm-up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(q, k, v, out=out)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out.float(), sdpa_reference(q, k, v), rtol=2e-2, atol=2e-2)


@needs_cuda
def test_cuda_compiles_with_inductor_without_graph_breaks():
    layer = diffattn.Attention(num_heads=8, head_size=64, config={"default": "FLASH_ATTN"})

    def block(x):
        h = x.unflatten(-1, (8, 64))
        return layer(h, h, h).flatten(2) * 2

    x = torch.randn(1, 256, 512, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(torch.compile(block, fullgraph=True)(x), block(x))
