#!/usr/bin/env python3
"""The peers of diffattn's GPU benchmark on the workloads of bench/workloads.csv and the data of
gpu_attention_bench (the same counter-based generator, checked by a checksum), timed the same way,
then one table with diffattn's figures and the ratios to each peer. The peers: PyTorch SDPA pinned
to FLASH_ATTENTION and CUDNN_ATTENTION; FlashAttention-3 in bf16 and in FP8 (per-tensor descale 1,
no calibration) from the wheel fa3-fwd==0.0.3; SageAttention 1 (Triton, INT8 Q*K^T, FP16 P*V) from
sageattention==1.0.6. A peer that cannot load, or refuses a workload, is a row saying so. Errors:
relL2 against fp32 attention on a 1024-row slice, relL2 and cosine against float64 on 128 rows
(as gpu_attention_bench computes them). Without --ours it times the peers alone (the development
tools in dev/ use that).

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
import contextlib
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
FP64_ROWS = 128


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


class Peer:
    """One peer kernel: call(set) takes (q, k, v) as [B, S, H, D] and returns out [B, S, H, D];
    prepare(sets) converts the bf16 sets to what it takes; context() wraps its calls. A peer that
    could not be loaded has call None and says why in `missing`."""

    def __init__(self, label, call=None, missing="", prepare=None, context=None):
        self.label, self.call, self.missing = label, call, missing
        self.prepare = prepare or (lambda sets: sets)
        self.context = context or contextlib.nullcontext


def torch_peer(label, backend):
    def call(s):
        q, k, v = (t.transpose(1, 2) for t in s)  # [B, S, H, D] storage seen as [B, H, S, D]
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2)

    return Peer(label, call, context=lambda: sdpa_kernel([backend]))


def first_output(result):
    return result[0] if isinstance(result, (tuple, list)) else result


def fa3_peers():
    """FlashAttention-3 (Hopper) from fa3-fwd==0.0.3: built for PyTorch 2.10, it loads on 2.11 once
    its config module is registered under the name the interface imports."""
    try:
        import fa3_fwd_config
        sys.modules["flash_attn_config"] = fa3_fwd_config
        import fa3_fwd_interface
        fa3 = fa3_fwd_interface.flash_attn_func
    except Exception as e:  # noqa: BLE001 - any import failure is reported, never hidden
        why = f"not loaded (fa3-fwd==0.0.3: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        return [Peer("FA3-bf16", missing=why), Peer("FA3-FP8", missing=why)]

    def to_fp8(sets):
        return [tuple(t.to(torch.float8_e4m3fn) for t in s) for s in sets]

    call = lambda s: first_output(fa3(*s))  # noqa: E731
    return [Peer("FA3-bf16", call), Peer("FA3-FP8", call, prepare=to_fp8)]


def sage1_peer():
    """SageAttention 1 (Triton) from sageattention==1.0.6."""
    try:
        from sageattention import sageattn
    except Exception as e:  # noqa: BLE001
        return Peer("SageAttention1", missing=f"not loaded (sageattention==1.0.6: {type(e).__name__}: {e})")
    return Peer("SageAttention1", lambda s: first_output(sageattn(*s, tensor_layout="NHD")))


def import_torch():
    global torch, F, SDPBackend, sdpa_kernel, PEERS
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    PEERS = [torch_peer("torch-FA2", SDPBackend.FLASH_ATTENTION), torch_peer("torch-cuDNN", SDPBackend.CUDNN_ATTENTION)]
    PEERS += fa3_peers() + [sage1_peer()]
    for peer in PEERS:
        if peer.call is None:
            print(f"peer {peer.label}: {peer.missing}", flush=True)


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


def time_samples(call, sets, per_sample, iters):
    """ms per call of each of `iters` samples of `per_sample` back-to-back calls."""
    times = []
    for i in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for c in range(per_sample):
            call(sets[(i * per_sample + c) % len(sets)])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / per_sample)
    return times


def time_peer(peer, bf16_sets, warmup, iters, flops, warmup_ms=0):
    """(median ms per call, output of set 0); the conversion of the inputs (FA3 FP8) is not timed.
    After the `warmup` calls, untimed samples run until `warmup_ms` of GPU time has passed (at most
    200), as gpu_attention_bench does, so the timed ones see the clocks of sustained load."""
    sets = peer.prepare(bf16_sets)
    per_sample = calls_per_sample(flops)
    with peer.context():
        for i in range(warmup):
            peer.call(sets[i % len(sets)])
        warmed = 0.0
        for _ in range(200):
            if warmed >= warmup_ms:
                break
            warmed += time_samples(peer.call, sets, per_sample, 1)[0] * per_sample
        times = time_samples(peer.call, sets, per_sample, iters)
        out = peer.call(sets[0])
    return statistics.median(times), out


def reference(s, rows, dtype):
    """Exact attention of the first `rows` query rows and SLICE_HEADS heads in `dtype`, [B, rows, H, D]."""
    q, k, v = (t[:, :, :SLICE_HEADS].to(dtype).transpose(1, 2) for t in s)
    with sdpa_kernel([SDPBackend.MATH]):
        return F.scaled_dot_product_attention(q[:, :, :rows], k, v).transpose(1, 2)


def rel_l2(out, s):
    ref = reference(s, SLICE_ROWS, torch.float32)
    got = out[:, :SLICE_ROWS, :SLICE_HEADS].float()
    return ((got - ref).norm() / ref.norm()).item()


def fp64_errors(out, s):
    """(relL2, cosine) of the first FP64_ROWS rows against float64 attention."""
    ref = reference(s, FP64_ROWS, torch.float64).flatten()
    got = out[:, :FP64_ROWS, :SLICE_HEADS].double().flatten()
    return ((got - ref).norm() / ref.norm()).item(), (torch.dot(got, ref) / (got.norm() * ref.norm())).item()


def measure(peer, sets, args, flops):
    """(ms, TFLOP/s, relL2 fp32, relL2 fp64, cosine fp64), or the reason the peer did not run."""
    if peer.call is None:
        return peer.missing
    torch.cuda.synchronize()
    time.sleep(args.rest_ms / 1000)
    try:
        ms, out = time_peer(peer, sets, args.warmup, args.iters, flops, args.warmup_ms)
    except Exception as e:  # noqa: BLE001 - a peer refusing a shape is a row, not a crash
        torch.cuda.synchronize()
        return f"failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return (ms, flops / (ms * 1e-3) * 1e-12, rel_l2(out, sets[0])) + fp64_errors(out, sets[0])


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
        for peer in PEERS:
            m = measure(peer, sets, args, flops)
            if isinstance(m, str):
                row[f"{peer.label}_ms"] = m
                continue
            row[f"{peer.label}_ms"] = round(m[0], 4)
            row[f"{peer.label}_tflops"] = round(m[1], 1)
            row[f"{peer.label}_relL2"] = f"{m[2]:.2e}"
            row[f"{peer.label}_relL2_fp64"] = f"{m[3]:.2e}"
            row[f"{peer.label}_cosine_fp64"] = f"{m[4]:.6f}"
        rows.append(row)
        print("  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        del sets
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            fields = list(dict.fromkeys(key for row in rows for key in row))  # a peer that failed has fewer
            w = csv.DictWriter(f, fieldnames=fields)
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
    ap.add_argument("--warmup-ms", type=int, default=300,
                    help="then untimed samples until this much GPU time has passed (sustained clocks; 0: none)")
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
        for peer in PEERS:
            m = measure(peer, sets, args, flops)
            peer_rows[(name, peer.label)] = m
            if isinstance(m, str):
                print(f"{name:28s} {peer.label:14s} {m}", flush=True)
            else:
                print(f"{name:28s} {peer.label:14s} {m[0]:9.3f} ms {m[1]:7.1f} TFLOP/s relL2 {m[2]:.2e} (fp32) "
                      f"{m[3]:.2e} (fp64) cosine {m[4]:.6f}", flush=True)
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
        f"{args.warmup} warm-up calls and {args.warmup_ms} ms of untimed samples (the clocks of sustained load), each sample enough back-to-back calls between CUDA events for 4e12 FLOPs "
        "(1-200 calls, so host launch work overlaps the GPU and the time is the kernels'), inputs rotated over "
        f"{args.sets} sets. FLOPs = 4·B·H·Sq·Skv·D. relL2 against "
        f"an fp32 computation on the same bf16 inputs (first {SLICE_ROWS} query rows, first {SLICE_HEADS} heads); "
        f"relL2 and cosine against float64 on the first {FP64_ROWS} rows of those heads. FA3-FP8 takes the inputs "
        "cast to E4M3 with descale 1 (no calibration; the cast is not timed). "
        "Peers and diffattn ran in the same job on the same data (checksum column).",
        "",
        "| workload | B·H·Sq·Skv·D | backend | ms | TFLOP/s | × torch-cuDNN | × torch-FA2 | × FA3-bf16 | × FA3-FP8 "
        "| relL2 | relL2 / torch-cuDNN | relL2 fp64 | cosine fp64 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def ratio(peer_result, ms):
        return f"{peer_result[0] / ms:.2f}" if not isinstance(peer_result, str) else "n/a"

    def number(x, fmt):
        return format(x, fmt) if x is not None and x >= 0 else "n/a"

    for name in names:
        b, h, sq, skv, d = WORKLOADS[name]
        shape = f"{b}·{h}·{sq}·{skv}·{d}"
        cudnn, fa2 = peer_rows[(name, "torch-cuDNN")], peer_rows[(name, "torch-FA2")]
        fa3, fa3_fp8 = peer_rows[(name, "FA3-bf16")], peer_rows[(name, "FA3-FP8")]
        cudnn_err = cudnn[2] if not isinstance(cudnn, str) else float("nan")

        def cells(ms, tf, err, err64, cos64):
            return (f"{ms:.3f} | {tf:.1f} | {ratio(cudnn, ms)} | {ratio(fa2, ms)} | {ratio(fa3, ms)} | {ratio(fa3_fp8, ms)} | "
                    f"{number(err, '.2e')} | {err / cudnn_err:.2f} | {number(err64, '.2e')} | {number(cos64, '.6f')} |")

        for peer in PEERS:
            m = peer_rows[(name, peer.label)]
            if isinstance(m, str):
                lines.append(f"| {name} | {shape} | {peer.label} (peer) | {m} | | | | | | | | | |")
                continue
            lines.append(f"| {name} | {shape} | {peer.label} (peer) | {cells(*m)}")
        for backend in backends:
            r = ours_rows.get((name, backend))
            if r is None:
                continue
            if r["error"]:
                lines.append(f"| {name} | {shape} | {backend} | failed | | | | | | | | | |")
                continue
            lines.append(f"| {name} | {shape} | **{backend}** | "
                         f"{cells(r['ms'], r['tflops'], r['rel_l2'], r.get('rel_l2_fp64'), r.get('cosine_fp64'))}")
        lines.append(f"| {name} | | data checksum matches | {'yes' if same_data[name] else 'NO'} | | | | | | | | | |")
    lines.append("")
    open(args.out, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
