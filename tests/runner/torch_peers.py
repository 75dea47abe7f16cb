#!/usr/bin/env python3
"""PyTorch SDPA pinned to FLASH_ATTENTION and to CUDNN_ATTENTION on the role shapes of a
`diffattn run` report (report.json), timed like the run (CUDA events, median of the timed calls),
so the run's figures sit next to peers measured on the same GPU in the same session.

    torch_peers.py REPORT.json [--warmup 2] [--iters 5]

The peers use fresh normal inputs of the same shapes and dtype, not the run's generated
activations. Kernel speed moves a few percent with the data, so read the peers as a reference
point; the like-for-like comparison is between the backends of the run, which share inputs.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def time_backend(backend, q, k, v, warmup, iters):
    with sdpa_kernel([backend]):
        for _ in range(warmup):
            F.scaled_dot_product_attention(q, k, v)
        times = []
        for _ in range(iters):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            F.scaled_dot_product_attention(q, k, v)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    report = json.load(open(args.report))
    dtype = DTYPES[report["workload"]["dtype"]]
    batch = report["workload"]["batch"]
    peers = []
    print("role     B   H      Sq     Skv    D   torch flash            torch cudnn")
    for role in report["roles"]:
        h, hkv, d = role["heads"], role["kv_heads"], role["head_size"]
        sq, skv = role["seqlen_q"], role["seqlen_kv"]
        # DiT layout [B, S, H, D] viewed as [B, H, S, D], as a DiT passes it to SDPA.
        q = torch.randn(batch, sq, h, d, device="cuda", dtype=dtype).transpose(1, 2)
        k = torch.randn(batch, skv, hkv, d, device="cuda", dtype=dtype).transpose(1, 2)
        v = torch.randn(batch, skv, hkv, d, device="cuda", dtype=dtype).transpose(1, 2)
        flops = 4.0 * batch * h * sq * skv * d
        row = {"role": role["role"], "batch": batch, "heads": h, "seqlen_q": sq, "seqlen_kv": skv, "head_size": d}
        cells = []
        for name, backend in [("torch_flash", SDPBackend.FLASH_ATTENTION), ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)]:
            try:
                ms = time_backend(backend, q, k, v, args.warmup, args.iters)
                row[name] = {"time_ms": ms, "tflops": flops / ms * 1e-9}
                cells.append(f"{ms:8.3f} ms {flops / ms * 1e-9:6.1f} TF/s")
            except RuntimeError as e:
                row[name] = {"error": str(e).splitlines()[0]}
                cells.append("n/a")
        peers.append(row)
        print(f"{role['role']:8} {batch:<3} {h:<6} {sq:<6} {skv:<6} {d:<3} {cells[0]:22} {cells[1]}")
    print("PEERS_JSON " + json.dumps(peers))


if __name__ == "__main__":
    main()
