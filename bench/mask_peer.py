#!/usr/bin/env python3
"""The peer of the masked and ragged calls of bench/gpu_mask_bench.cu: PyTorch SDPA given the
same boolean keep-mask (True keeps a key) on inputs of the same shapes, tried on the cuDNN backend
first and on the memory-efficient backend when cuDNN refuses the mask; ragged batches run one
sequence per call. Prints best-of-N milliseconds per workload and the backend that ran; the GPU
idles 1 s before each timed series, and each sample is the mean of enough back-to-back calls for
about 2 ms (--calls 1: single calls, as before 2026-12-07).

    mask_peer.py [--rounds 10] [--calls N]
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


CALLS = 0  # back-to-back calls per timed sample; 0: enough for about 2 ms (1 to 50), as gpu_mask_bench


def sample_ms(fn, calls):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def best_ms(fn, rounds):
    fn()
    torch.cuda.synchronize()
    time.sleep(1.0)  # idle GPU before each series, as bench/gpu_mask_bench.cu does
    warm = min(sample_ms(fn, 1) for _ in range(2))
    calls = CALLS if CALLS > 0 else min(50, max(1, math.ceil(2.0 / max(warm, 0.04))))
    return min(sample_ms(fn, calls) for _ in range(rounds))


def run_masked(q, k, v, mask, rounds):
    """(ms, backend name) of SDPA with `mask`, cuDNN first."""
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION):
        try:
            with sdpa_kernel([backend]):
                ms = best_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), rounds)
            return ms, backend.name
        except RuntimeError:
            continue
    return float("nan"), "none"


def qkv(heads, s_q, s_k, d):
    make = lambda s: torch.randn(1, heads, s, d, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    return make(s_q), make(s_k), make(s_k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=0,
                    help="back-to-back calls per timed sample (default: enough for about 2 ms; 1: single calls)")
    args = ap.parse_args()
    global CALLS
    CALLS = max(0, args.calls)
    print(f"{'workload':22s} {'peer ms':>10s} {'unmasked ms':>12s}  backend")

    def padded(name, heads, d, text, keep, image, dense, text_last=False):
        s = text + image
        q, k, v = qkv(heads, s, s, d)
        keys = torch.ones(s, dtype=torch.bool, device="cuda")
        if text_last:  # image keys, then the prompt: the kept keys are a prefix
            keys[image + keep:] = False
        else:
            keys[keep:text] = False
        mask = keys.view(1, 1, 1, s).expand(1, 1, s, s).contiguous() if dense else keys.view(1, 1, 1, s)
        ms, backend = run_masked(q, k, v, mask, args.rounds)
        real = keep + image
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            ref = best_ms(lambda: F.scaled_dot_product_attention(q, k[:, :, :real], v[:, :, :real]), args.rounds)
        print(f"{name:22s} {ms:10.3f} {ref:12.3f}  {backend}")

    padded("flux-77of512-keypad", 24, 128, 512, 77, 4096, False)
    padded("flux-77of512-dense", 24, 128, 512, 77, 4096, True)
    padded("sd3-154of333-keypad", 24, 64, 333, 154, 4096, False)
    padded("sd3-154of333-prefix", 24, 64, 333, 154, 4096, False, text_last=True)

    lengths = [11440, 8580, 5720, 2860]
    seqs = [qkv(24, n, n, 128) for n in lengths]
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        ms = best_ms(lambda: [F.scaled_dot_product_attention(*t) for t in seqs], args.rounds)
    print(f"{'wan22-ragged-4':22s} {ms:10.3f} {ms:12.3f}  CUDNN_ATTENTION, one call per sequence")

    s, heads = 4608, 24
    nb = (s + 127) // 128
    g = torch.Generator(device="cuda").manual_seed(1234)
    u = torch.rand(heads, nb, nb, device="cuda", generator=g)
    kind = torch.where(u < 0.5, 0, torch.where(u < 0.55, 1, 2))
    kind[:, torch.arange(nb), torch.arange(nb)] = 2
    blocks = kind.repeat_interleave(128, 1).repeat_interleave(128, 2)[:, :s, :s]
    cut = torch.rand(heads, s, s, device="cuda", generator=g) >= 0.2
    mask = ((blocks == 2) | ((blocks == 1) & cut)).unsqueeze(0)
    q, k, v = qkv(heads, s, s, 128)
    ms, backend = run_masked(q, k, v, mask, args.rounds)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        ref = best_ms(lambda: F.scaled_dot_product_attention(q, k, v), args.rounds)
    kept = (kind != 0).float().mean().item()
    print(f"{'flux-blocks-50':22s} {ms:10.3f} {ref * kept:12.3f}  {backend} (kept blocks {kept:.3f}; ref = unmasked x kept)")


if __name__ == "__main__":
    main()
