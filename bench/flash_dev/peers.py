#!/usr/bin/env python3
"""Peer figures for the FLASH_ATTN notes: PyTorch SDPA's cuDNN and FlashAttention-2 backends on the
workloads flash_dev times, in the same run, plus the bf16 error of PyTorch's cuDNN output against
an fp32 computation (the quality bar FLASH_ATTN is held to).

Usage: python3 peers.py [--quick] [--csv FILE]
"""
import argparse
import csv
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

WORKLOADS = [
    ("wan14b-480p-self", 1, 40, 32760, 32760, 128),
    ("wan22-5b-704p-self", 1, 24, 11440, 11440, 128),
    ("hunyuan15-480p-self", 1, 16, 14040, 14040, 128),
    ("flux-1024-joint", 1, 24, 4608, 4608, 128),
    ("sd3-1024-joint-hd64", 1, 24, 4429, 4429, 64),
    ("wan14b-480p-cross512", 1, 40, 32760, 512, 128),
    ("square16k-hd128", 1, 24, 16384, 16384, 128),
    ("square4k-hd128", 1, 16, 4096, 4096, 128),
    ("square4k-hd64", 1, 32, 4096, 4096, 64),
    ("square16k-hd64", 1, 32, 16384, 16384, 64),
    ("square4k-hd256", 1, 8, 4096, 4096, 256),
    ("square16k-hd256", 1, 8, 16384, 16384, 256),
    ("wan14b-720p-self", 1, 40, 75600, 75600, 128),
]


def time_ms(fn, flops):
    per_sample = 1 if flops > 5e13 else 5 if flops > 2e12 else 20
    samples = 3 if flops > 5e13 else 7
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(per_sample):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / per_sample)
    times.sort()
    return times[len(times) // 2]


def rel_l2(x, ref):
    return (torch.linalg.vector_norm((x.float() - ref).flatten()) / torch.linalg.vector_norm(ref.flatten())).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--csv")
    args = ap.parse_args()
    work = WORKLOADS[:5] if args.quick else WORKLOADS
    rows = []
    for name, b, h, sq, skv, d in work:
        # DiT layout [B, S, H, D], handed to SDPA as transposed views.
        q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(b, skv, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        v = torch.randn(b, skv, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        flops = 4.0 * b * h * sq * skv * d
        res = {"workload": name, "B": b, "H": h, "Sq": sq, "Skv": skv, "D": d}
        for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            with sdpa_kernel([backend]):
                ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v), flops)
            res[f"{label}_ms"] = round(ms, 4)
            res[f"{label}_tflops"] = round(flops / ms / 1e9, 1)
        if sq * skv <= 40000 * 40000:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                out = F.scaled_dot_product_attention(q[:, :2], k[:, :2], v[:, :2])
            with sdpa_kernel([SDPBackend.MATH]):
                ref = F.scaled_dot_product_attention(q[:, :2].float(), k[:, :2].float(), v[:, :2].float())
            res["cudnn_relL2"] = f"{rel_l2(out, ref):.2e}"
            del out, ref
        else:
            res["cudnn_relL2"] = ""
        rows.append(res)
        print(f"{name:26s} cuDNN {res['cudnn_ms']:9.3f} ms {res['cudnn_tflops']:6.1f} TF/s   "
              f"FA2 {res['fa2_ms']:9.3f} ms {res['fa2_tflops']:6.1f} TF/s   relL2 {res['cudnn_relL2']}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
