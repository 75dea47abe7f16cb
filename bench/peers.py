#!/usr/bin/env python3
"""PyTorch SDPA pinned to FLASH_ATTENTION and CUDNN_ATTENTION on the workloads of
bench/workloads.csv and the data of gpu_attention_bench (the same counter-based generator, checked
by a checksum), timed the same way, then one table with diffattn's figures and the ratios to each
peer. Without --ours it times the peers alone (the development tools in dev/ use that).

    peers.py --ours ours-A.json [ours-B.json ...] --out bench/results/gpu-DATE.md [--iters N] [--warmup N] [--sets N]
             [--commit SHA] [--driver VERSION] [--workloads-file CSV]
    peers.py [--workloads a,b] [--csv FILE]      # peers only
    peers.py --print-workloads                   # the parsed table, one workload a line (no GPU)
    peers.py --report REPORT.json [--warmup 2] [--iters 5]

With --report it times the peers on the role shapes of a `diffattn run` report instead, one call per
sample like the run, on fresh normal inputs of the same shapes and dtype (not the run's generated
activations: kernel speed moves a few percent with the data, so the like-for-like comparison is
between the backends of the run, which share inputs), and ends with a PEERS_JSON line.
"""
import argparse
import csv
import datetime
import json
import math
import os
import statistics
import sys
import time

WORKLOADS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads.csv")
WORKLOADS_HEADER = ["name", "batch", "heads", "seq_q", "seq_kv", "head_dim"]
SLICE_ROWS, SLICE_HEADS = 1024, 2


def load_workloads(path):
    """name -> (B, H, Sq, Skv, D), in file order; the rules of bench/workloads.h."""
    lines = [(n, l.rstrip("\r\n")) for n, l in enumerate(open(path), 1)]
    lines = [(n, l) for n, l in lines if l.strip() and not l.lstrip().startswith("#")]
    if not lines or lines[0][1].split(",") != WORKLOADS_HEADER:
        sys.exit(f"{path}: expected the header '{','.join(WORKLOADS_HEADER)}'")
    workloads = {}
    for n, line in lines[1:]:
        fields = line.split(",")
        if len(fields) != 6 or not fields[0] or fields[0] in workloads:
            sys.exit(f"{path}:{n}: expected 6 fields with a new name, got '{line}'")
        if not all(f.isdigit() and int(f) > 0 for f in fields[1:]):
            sys.exit(f"{path}:{n}: sizes must be positive integers, got '{line}'")
        workloads[fields[0]] = tuple(int(f) for f in fields[1:])
    if not workloads:
        sys.exit(f"{path}: no workloads")
    return workloads


def import_torch():
    global torch, F, SDPBackend, sdpa_kernel, PEERS
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    PEERS = [("torch-FA2", SDPBackend.FLASH_ATTENTION), ("torch-cuDNN", SDPBackend.CUDNN_ATTENTION)]


WORKLOADS = {}


def generate(shape, stream):
    """The bench's fill_kernel: 32-bit hash of (index, stream) -> uniform, unit variance, bf16."""
    n = math.prod(shape)
    out = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    chunk = 1 << 26
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(n, start + chunk), dtype=torch.int64, device="cuda")
        x = (idx * 2654435761 + stream * 97531 + 12345) & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x45D9F3B) & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x45D9F3B) & 0xFFFFFFFF
        x ^= x >> 16
        u = x.to(torch.float32) * 2.3283064365386963e-10
        out[start:start + idx.numel()] = (((u * 2.0) - 1.0) * 1.7320508).to(torch.bfloat16)
    return out.view(shape)


def calls_per_sample(flops):
    """Back-to-back calls per timed sample, as gpu_attention_bench does: 4e12 FLOPs per sample."""
    return int(min(200, max(1, math.ceil(4e12 / flops))))


def time_peer(backend, sets, warmup, iters, flops):
    def call(s):
        q, k, v = (t.transpose(1, 2) for t in s)  # [B, S, H, D] storage seen as [B, H, S, D]
        return F.scaled_dot_product_attention(q, k, v)

    per_sample = calls_per_sample(flops)
    with sdpa_kernel([backend]):
        for i in range(warmup):
            call(sets[i % len(sets)])
        times = []
        for i in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for c in range(per_sample):
                call(sets[(i * per_sample + c) % len(sets)])
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / per_sample)
        out = call(sets[0]).transpose(1, 2)  # back to [B, S, H, D]
    return statistics.median(times), out


def rel_l2(out, s):
    q, k, v = s
    qs = q[:, :SLICE_ROWS, :SLICE_HEADS].float().transpose(1, 2)
    ks = k[:, :, :SLICE_HEADS].float().transpose(1, 2)
    vs = v[:, :, :SLICE_HEADS].float().transpose(1, 2)
    with sdpa_kernel([SDPBackend.MATH]):
        ref = F.scaled_dot_product_attention(qs, ks, vs).transpose(1, 2)
    got = out[:, :SLICE_ROWS, :SLICE_HEADS].float()
    return ((got - ref).norm() / ref.norm()).item()


def report_peers(path, warmup, iters):
    report = json.load(open(path))
    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    dtype = dtypes[report["workload"]["dtype"]]
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
                ms = statistics.median(times)
                row[name] = {"time_ms": ms, "tflops": flops / ms * 1e-9}
                cells.append(f"{ms:8.3f} ms {flops / ms * 1e-9:6.1f} TF/s")
            except RuntimeError as e:
                row[name] = {"error": str(e).splitlines()[0]}
                cells.append("n/a")
        peers.append(row)
        print(f"{role['role']:8} {batch:<3} {h:<6} {sq:<6} {skv:<6} {d:<3} {cells[0]:22} {cells[1]}")
    print("PEERS_JSON " + json.dumps(peers))


def peers_only(args):
    names = args.workloads.split(",") if args.workloads else list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        sys.exit(f"--workloads: {', '.join(unknown)} not in {args.workloads_file}; known: {', '.join(WORKLOADS)}")
    rows = []
    for name in names:
        b, h, sq, skv, d = WORKLOADS[name]
        sets = [(generate((b, sq, h, d), 3 * s), generate((b, skv, h, d), 3 * s + 1), generate((b, skv, h, d), 3 * s + 2))
                for s in range(args.sets)]
        flops = 4.0 * b * h * sq * skv * d
        row = {"workload": name, "B": b, "H": h, "Sq": sq, "Skv": skv, "D": d}
        for label, backend in PEERS:
            torch.cuda.synchronize()
            time.sleep(args.rest_ms / 1000)
            ms, out = time_peer(backend, sets, args.warmup, args.iters, flops)
            row[f"{label}_ms"] = round(ms, 4)
            row[f"{label}_tflops"] = round(flops / (ms * 1e-3) * 1e-12, 1)
            row[f"{label}_relL2"] = f"{rel_l2(out, sets[0]):.2e}"
        rows.append(row)
        print("  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        del sets
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", nargs="+", help="gpu_attention_bench JSON files (one per backend); without: peers only")
    ap.add_argument("--out", help="the Markdown table (with --ours)")
    ap.add_argument("--csv", help="peers only: their times as CSV")
    ap.add_argument("--workloads-file", default=WORKLOADS_FILE)
    ap.add_argument("--workloads", help="peers only: comma-separated names from the workloads file")
    ap.add_argument("--print-workloads", action="store_true")
    ap.add_argument("--iters", type=int, help="timed samples (default 10; 5 with --report)")
    ap.add_argument("--warmup", type=int, help="warm-up calls (default 3; 2 with --report)")
    ap.add_argument("--report", help="a diffattn run report.json: time the peers on its role shapes")
    ap.add_argument("--sets", type=int, default=2)
    ap.add_argument("--rest-ms", type=int, default=1000, help="idle time before each row (same power state for every row)")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--driver", default="unknown")
    args = ap.parse_args()
    WORKLOADS.update(load_workloads(args.workloads_file))
    if args.print_workloads:
        for name, (b, h, sq, skv, d) in WORKLOADS.items():
            print(f"{name} {b} {h} {sq} {skv} {d}")
        return
    import_torch()
    if args.report:
        report_peers(args.report, 2 if args.warmup is None else args.warmup, 5 if args.iters is None else args.iters)
        return
    args.warmup = 3 if args.warmup is None else args.warmup
    args.iters = 10 if args.iters is None else args.iters
    if not args.ours:
        peers_only(args)
        return
    if not args.out:
        ap.error("--ours needs --out")
    ours = {"rows": [], "q_checksums": {}}
    for path in args.ours:
        part = json.load(open(path))
        ours["rows"] += part["rows"]
        ours["q_checksums"].update(part["q_checksums"])
        ours.setdefault("sms", part["sms"])
        ours.setdefault("cudnn", part["cudnn"])
    names = [w for w in WORKLOADS if w in ours["q_checksums"]]
    backends = []
    for row in ours["rows"]:
        if row["backend"] not in backends:
            backends.append(row["backend"])
    peer_rows = {}
    same_data = {}
    for name in names:
        b, h, sq, skv, d = WORKLOADS[name]
        sets = [(generate((b, sq, h, d), 3 * s), generate((b, skv, h, d), 3 * s + 1), generate((b, skv, h, d), 3 * s + 2))
                for s in range(args.sets)]
        checksum = sets[0][0].flatten()[:4096].double().sum().item()
        same_data[name] = abs(checksum - ours["q_checksums"][name]) < 1e-6 * max(1.0, abs(checksum))
        flops = 4.0 * b * h * sq * skv * d
        for label, backend in PEERS:
            torch.cuda.synchronize()
            time.sleep(args.rest_ms / 1000)
            ms, out = time_peer(backend, sets, args.warmup, args.iters, flops)
            err = rel_l2(out, sets[0])
            peer_rows[(name, label)] = (ms, flops / (ms * 1e-3) * 1e-12, err)
            print(f"{name:28s} {label:12s} {ms:9.3f} ms {flops / (ms * 1e-3) * 1e-12:7.1f} TFLOP/s relL2 {err:.2e}", flush=True)
        del sets
        torch.cuda.empty_cache()

    ours_rows = {(r["workload"], r["backend"]): r for r in ours["rows"]}
    lines = [
        f"# GPU attention benchmark, {datetime.date.today().isoformat()}",
        "",
        f"GPU: {torch.cuda.get_device_name(0)} ({ours['sms']} SMs), driver {args.driver}, PyTorch {torch.__version__}, "
        f"cuDNN runtime {torch.backends.cudnn.version()} (torch) / {ours['cudnn']} (diffattn), commit {args.commit}.",
        f"bf16, [B, S, H, D] views as a DiT passes them, non-causal, no mask. Each row starts after {args.rest_ms} ms of idle GPU (the "
        f"same power state for every row). Median of {args.iters} timed samples after "
        f"{args.warmup} warm-ups, each sample enough back-to-back calls between CUDA events for 4e12 FLOPs "
        "(1-200 calls, so host launch work overlaps the GPU and the time is the kernels'), inputs rotated over "
        f"{args.sets} sets. FLOPs = 4·B·H·Sq·Skv·D. relL2 against "
        f"an fp32 computation on the same bf16 inputs (first {SLICE_ROWS} query rows, first {SLICE_HEADS} heads). "
        "Peers and diffattn ran in the same job on the same data (checksum column).",
        "",
        "| workload | B·H·Sq·Skv·D | backend | ms | TFLOP/s | × torch-cuDNN | × torch-FA2 | relL2 | relL2 / torch-cuDNN |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        b, h, sq, skv, d = WORKLOADS[name]
        shape = f"{b}·{h}·{sq}·{skv}·{d}"
        cudnn_ms, _, cudnn_err = peer_rows[(name, "torch-cuDNN")]
        fa2_ms = peer_rows[(name, "torch-FA2")][0]
        for label, _ in PEERS:
            ms, tf, err = peer_rows[(name, label)]
            lines.append(f"| {name} | {shape} | {label} (peer) | {ms:.3f} | {tf:.1f} | {cudnn_ms / ms:.2f} | "
                         f"{fa2_ms / ms:.2f} | {err:.2e} | {err / cudnn_err:.2f} |")
        for backend in backends:
            r = ours_rows.get((name, backend))
            if r is None:
                continue
            if r["error"]:
                lines.append(f"| {name} | {shape} | {backend} | failed | | | | | |")
                continue
            lines.append(f"| {name} | {shape} | **{backend}** | {r['ms']:.3f} | {r['tflops']:.1f} | "
                         f"{cudnn_ms / r['ms']:.2f} | {fa2_ms / r['ms']:.2f} | {r['rel_l2']:.2e} | "
                         f"{r['rel_l2'] / cudnn_err:.2f} |")
        lines.append(f"| {name} | | data checksum matches | {'yes' if same_data[name] else 'NO'} | | | | | |")
    lines.append("")
    open(args.out, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
