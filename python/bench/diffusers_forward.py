"""Time one forward of real diffusers transformers, built from the real models' configurations with
random bf16 weights (no download), through diffusers' own attention backends and through diffattn's,
and check that the outputs match diffusers' default.

  python3 python/bench/diffusers_forward.py [--models wan,flux] [--runs 5] [--json FILE]

Wan: WanTransformer3DModel with the Wan2.1-T2V-1.3B configuration at 480x832, 81 frames (21x60x104
latents, 32760 tokens; 512 text tokens). Flux: FluxTransformer2DModel with the FLUX.1-dev
configuration at 1024x1024 (4096 image tokens, 512 text tokens).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import diffattn
import diffattn.diffusers

WAN_2_1_1_3B = dict(
    patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16, out_channels=16,
    text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
    eps=1e-6, image_dim=None, added_kv_proj_dim=None, rope_max_seq_len=1024,
)
FLUX_1_DEV = dict(
    patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
    num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=True,
    axes_dims_rope=(16, 56, 56),
)
DIFFUSERS_BACKENDS = ["native", "_native_cudnn", "_native_flash"]
DIFFATTN_BACKENDS = ["TORCH_SDPA", "FLASH_ATTN", "CUDNN_ATTN"]


def build_wan():
    from diffusers import WanTransformer3DModel

    with torch.device("cuda"):
        model = WanTransformer3DModel(**WAN_2_1_1_3B)
    g = torch.Generator(device="cuda").manual_seed(1)
    inputs = dict(
        hidden_states=torch.randn(1, 16, 21, 60, 104, device="cuda", generator=g),
        timestep=torch.tensor([500], device="cuda"),
        encoder_hidden_states=torch.randn(1, 512, 4096, device="cuda", generator=g),
    )
    return model, inputs


def build_flux():
    from diffusers import FluxTransformer2DModel

    with torch.device("cuda"):
        model = FluxTransformer2DModel(**FLUX_1_DEV)
    g = torch.Generator(device="cuda").manual_seed(1)
    side, text = 64, 512
    rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    img_ids = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3).float().cuda()
    inputs = dict(
        hidden_states=torch.randn(1, side * side, 64, device="cuda", generator=g),
        encoder_hidden_states=torch.randn(1, text, 4096, device="cuda", generator=g),
        pooled_projections=torch.randn(1, 768, device="cuda", generator=g),
        timestep=torch.tensor([0.5], device="cuda"),
        guidance=torch.tensor([3.5], device="cuda"),
        img_ids=img_ids,
        txt_ids=torch.zeros(text, 3, device="cuda"),
    )
    return model, inputs


def forward_ms(model, inputs, runs: int) -> tuple[float, torch.Tensor]:
    with torch.no_grad():
        for _ in range(2):
            out = model(**inputs, return_dict=False)[0]
        times = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = model(**inputs, return_dict=False)[0]
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times), out


def rel_l2(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm())


def measure(name: str, build, runs: int) -> list[dict]:
    torch.manual_seed(0)  # diffusers' own random initialisation, the same for every path
    model, inputs = build()
    model = model.to(torch.bfloat16).eval()
    inputs = {k: v.to(torch.bfloat16) if v.is_floating_point() and k not in ("img_ids", "txt_ids") else v
              for k, v in inputs.items()}
    rows = []
    reference = None
    for backend in DIFFUSERS_BACKENDS:
        try:
            model.set_attention_backend(backend)
            ms, out = forward_ms(model, inputs, runs)
        except Exception as e:  # a backend diffusers cannot run here is reported, not fatal
            rows.append({"model": name, "path": f"diffusers {backend}", "error": str(e).splitlines()[0]})
            continue
        if reference is None:
            reference = out
        rows.append({"model": name, "path": f"diffusers {backend}", "ms": ms, "rel_l2": rel_l2(out, reference)})
    model.reset_attention_backend()
    for backend in DIFFATTN_BACKENDS:
        try:
            diffattn.diffusers.apply(model, config={"default": backend})
            ms, out = forward_ms(model, inputs, runs)
        except diffattn.DiffattnError as e:
            rows.append({"model": name, "path": f"diffattn {backend}", "error": str(e)})
            continue
        finally:
            diffattn.diffusers.remove(model)
        rows.append({"model": name, "path": f"diffattn {backend}", "ms": ms, "rel_l2": rel_l2(out, reference)})
    del model
    torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="wan,flux")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tolerance", type=float, default=0.02, help="largest relative L2 error against diffusers' default")
    parser.add_argument("--json")
    args = parser.parse_args()
    builders = {"wan": ("Wan2.1-1.3B 480x832x81", build_wan), "flux": ("FLUX.1-dev 1024^2", build_flux)}
    rows = []
    for key in args.models.split(","):
        name, build = builders[key]
        rows += measure(name, build, args.runs)
    print(f"{'model':<24} {'path':<26} {'ms/forward':>10} {'vs best diffusers':>18} {'rel L2':>9}")
    failed = False
    for model_name in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model_name]
        best = min((r["ms"] for r in mine if r["path"].startswith("diffusers") and "ms" in r), default=float("nan"))
        for r in mine:
            if "error" in r:
                print(f"{model_name:<24} {r['path']:<26} {'-':>10} {'':>18} {'':>9}  {r['error']}")
                continue
            bad = r["rel_l2"] > args.tolerance
            failed |= bad
            print(f"{model_name:<24} {r['path']:<26} {r['ms']:10.1f} {best / r['ms']:17.3f}x {r['rel_l2']:9.2e}"
                  f"{'  OUTPUT MISMATCH' if bad else ''}")
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, diffattn {diffattn.__version__}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
