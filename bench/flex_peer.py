#!/usr/bin/env python3
"""The peer of diffattn's block-sparse kernel: PyTorch FlexAttention (torch.compile'd) given a
BlockMask built from the very key-tile lists that dev/sparse_dev.cu timed (its --dump files), on
inputs of the same shape, with PyTorch's dense cuDNN SDPA in the same run for scale. TFLOP/s are
counted on the FLOPs each computes (4 x D per real query row and listed real key), as sparse_dev
counts them. A workload or density the peer cannot run is a row saying why.

    flex_peer.py --dump DIR [--work a,b] [--densities 1,0.5,0.25,0.125] [--rounds 5] [--csv FILE]

With --paths DIR it reads instead the lists that FASTVIDEO_VSA and RAINFUSION_ATTN chose in
bench/gpu_sparse_paths_bench.cu's whole-path runs (its --dump files: 64 x 64 cube tiles, 128 x 128
RainFusion tiles, in their padded tile order) and times FlexAttention's fine pass over them on
inputs of the padded length, beside that run's own times of the whole paths and of dense FLASH_ATTN.

    flex_peer.py --paths DIR [--rounds 5] [--csv FILE]
"""
import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import WORKLOADS_FILE, load_workloads  # noqa: E402


def lists_to_blocks(offsets, indices, B, H, q_tiles, k_tiles, torch):
    """CSR key-tile lists -> FlexAttention's kv_num_blocks [B, H, Q] and kv_indices [B, H, Q, K]."""
    counts = torch.from_numpy((offsets[1:] - offsets[:-1]).astype("int32"))
    num = counts.view(B, H, q_tiles)
    idx = torch.zeros(B * H * q_tiles, k_tiles, dtype=torch.int32)
    rows = torch.repeat_interleave(torch.arange(B * H * q_tiles), counts.long())
    pos = torch.arange(len(indices)) - torch.repeat_interleave(torch.from_numpy(offsets[:-1]).long(), counts.long())
    idx[rows, pos] = torch.from_numpy(indices.astype("int32"))
    return num, idx.view(B, H, q_tiles, k_tiles), counts


def time_call(fn, rounds, torch):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run_paths(args, torch, np, BlockMask, flex):
    """FlexAttention over the lists the sparse backends' whole paths chose (gpu_sparse_paths_bench --dump)."""
    rows_out = []
    print(f"{'lists':34s} {'tiles':>7s} {'density':>8s} {'flex ms':>9s} {'ours ms':>9s} {'dense ms':>9s} "
          f"{'flex/ours':>9s}  note")
    for info in sorted(f for f in os.listdir(args.paths) if f.endswith(".txt")):
        base = os.path.join(args.paths, info[:-4])
        with open(base + ".txt") as f:
            fields = f.read().split()
        B, H, q_tiles, k_tiles, q_tile, k_tile, D = (int(x) for x in fields[:7])
        ours_ms, dense_ms = float(fields[7]), float(fields[8])
        offsets = np.fromfile(base + ".offsets.i32", dtype=np.int32)
        indices = np.fromfile(base + ".indices.i32", dtype=np.int32)
        density = len(indices) / float(B * H * q_tiles * k_tiles)
        row = {"lists": info[:-4], "tiles": f"{q_tile}x{k_tile}", "density": f"{density:.4f}", "flex_ms": "",
               "ours_ms": f"{ours_ms:.4f}", "dense_ms": f"{dense_ms:.4f}", "note": ""}
        try:
            num, idx, _ = lists_to_blocks(offsets, indices, B, H, q_tiles, k_tiles, torch)
            Sq, Skv = q_tiles * q_tile, k_tiles * k_tile
            mask = BlockMask.from_kv_blocks(num.cuda(), idx.cuda(), BLOCK_SIZE=(q_tile, k_tile), seq_lengths=(Sq, Skv))
            q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for S in (Sq, Skv, Skv))
            # FlexAttention's kernel tiles must divide the mask's blocks: 64-row cube tiles need 64 x 64.
            opts = {"BLOCK_M": q_tile, "BLOCK_N": k_tile} if min(q_tile, k_tile) < 128 else None
            ms = time_call(lambda: flex(q, k, v, block_mask=mask, kernel_options=opts), args.rounds, torch)
            row["flex_ms"] = f"{ms:.4f}"
            del q, k, v, mask
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is reported, not dropped
            row["note"] = f"FlexAttention failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        rows_out.append(row)
        ratio = f"{float(row['flex_ms']) / ours_ms:.2f}" if row["flex_ms"] else ""
        print(f"{row['lists']:34s} {row['tiles']:>7s} {row['density']:>8s} {row['flex_ms']:>9s} {row['ours_ms']:>9s} "
              f"{row['dense_ms']:>9s} {ratio:>9s}  {row['note']}")
    return rows_out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump")
    ap.add_argument("--paths")
    ap.add_argument("--work", default="wan2.1-14b-480p-self,wan2.1-14b-720p-self")
    ap.add_argument("--densities", default="1,0.5,0.25,0.125")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--csv")
    args = ap.parse_args()
    import numpy as np
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    if args.paths:
        rows_out = run_paths(args, torch, np, BlockMask, flex)
    elif not args.dump:
        ap.error("give --dump DIR (gpu_sparse_bench's layouts) or --paths DIR (gpu_sparse_paths_bench's)")
    else:
        rows_out = run_layouts(args, torch, np, BlockMask, flex, SDPBackend, sdpa_kernel)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows_out[0].keys()) if rows_out else ["workload"])
            w.writeheader()
            w.writerows(rows_out)


def run_layouts(args, torch, np, BlockMask, flex, SDPBackend, sdpa_kernel):
    """FlexAttention over gpu_sparse_bench's random layouts (--dump), beside dense cuDNN SDPA."""
    workloads = load_workloads(WORKLOADS_FILE)
    rows_out = []
    print(f"{'workload':28s} {'density':>8s} {'flex ms':>9s} {'flex TF/s':>10s} {'cudnn ms':>9s} {'cudnn TF/s':>10s}  note")
    for name in args.work.split(","):
        B, H, Sq, Skv, D = workloads[name]
        if D not in (64, 128):
            print(f"{name:28s} skipped: the peer runs head sizes 64 and 128 (128 x 128 blocks)")
            continue
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for S in (Sq, Skv, Skv))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            dense_ms = time_call(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), args.rounds, torch)
        dense_tf = 4.0 * D * B * H * Sq * Skv / dense_ms / 1e9
        q_tiles, k_tiles = -(-Sq // 128), -(-Skv // 128)
        for density in args.densities.split(","):
            base = os.path.join(args.dump, f"{name}-{float(density):g}")
            row = {"workload": name, "density": density, "flex_ms": "", "flex_tflops": "", "cudnn_ms": f"{dense_ms:.4f}",
                   "cudnn_tflops": f"{dense_tf:.1f}", "note": ""}
            try:
                offsets = np.fromfile(base + ".offsets.i32", dtype=np.int32)
                indices = np.fromfile(base + ".indices.i32", dtype=np.int32)
                num, idx, counts = lists_to_blocks(offsets, indices, B, H, q_tiles, k_tiles, torch)
                mask = BlockMask.from_kv_blocks(num.cuda(), idx.cuda(), BLOCK_SIZE=128, seq_lengths=(Sq, Skv))
                key_rows = np.minimum(128, Skv - indices.astype(np.int64) * 128)
                per_row_keys = np.add.reduceat(key_rows, offsets[:-1]) if len(indices) else np.zeros(len(offsets) - 1)
                per_row_keys[offsets[1:] == offsets[:-1]] = 0
                q_rows = np.minimum(128, Sq - (np.arange(len(offsets) - 1) % q_tiles) * 128)
                flops = 4.0 * D * float(np.sum(q_rows * per_row_keys))
                ms = time_call(lambda: flex(q, k, v, block_mask=mask), args.rounds, torch)
                row.update(flex_ms=f"{ms:.4f}", flex_tflops=f"{flops / ms / 1e9:.1f}")
            except Exception as e:  # noqa: BLE001 - a peer that cannot run is reported, not dropped
                row["note"] = f"FlexAttention failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            rows_out.append(row)
            print(f"{name:28s} {float(density):8.3f} {row['flex_ms']:>9s} {row['flex_tflops']:>10s} "
                  f"{row['cudnn_ms']:>9s} {row['cudnn_tflops']:>10s}  {row['note']}")
    return rows_out


if __name__ == "__main__":
    main()
