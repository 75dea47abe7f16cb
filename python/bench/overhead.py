"""Per-call overhead of the Python path over the C call (goal: under 20 us, docs/python.md).

Times, on the host, issuing one small attention call many times:
  c_call      diffattn_layer_forward through ctypes with DLTensors built once (the C++ call itself,
              plus ctypes' own ~1 us, so the overheads below are slightly understated)
  forward_into  Attention.forward_into (the binding alone)
  layer       Attention.__call__ with a preallocated out
  layer_new   Attention.__call__ allocating its output
  functional  diffattn.attention(q, k, v) (layer looked up per call)
  op          torch.ops.diffattn.attention_out called eagerly (what a compiled graph runs)
  compiled    a torch.compile'd function calling the layer (guards and graph call included)
and prints each one's microseconds per call and its excess over c_call. CUDA calls are asynchronous:
the loop issues ITERS calls and synchronises once, so a problem far smaller than launch latency keeps
the device ahead of the host.

  python3 python/bench/overhead.py [--device cuda|cpu] [--backend FLASH_ATTN] [--iters 2000]
"""

from __future__ import annotations

import argparse
import json
import time

import diffattn
from diffattn import _native, _tensors


def best_per_call(variants: dict, iters: int, sync, rounds: int = 9) -> dict[str, float]:
    """Microseconds per call, the best round of each; variants take turns, so load from other processes
    falls on all of them alike."""
    for fn in variants.values():
        for _ in range(20):
            fn()
    sync()
    best = {name: float("inf") for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter() - start) / iters * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--backend", default="FLASH_ATTN")
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()

    import torch

    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    platform = None if device.type == "cuda" else "cpu"
    heads, dim, seq = 2, 64, 16
    q, k, v = (torch.randn(1, seq, heads, dim, device=device, dtype=dtype) for _ in range(3))
    out = torch.empty_like(q)
    layer = diffattn.Attention(num_heads=heads, head_size=dim, config={"default": args.backend}, platform=platform)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    keep: list = []
    views = [_tensors.borrow(t, name, keep) for t, name in ((q, "q"), (k, "k"), (v, "v"), (out, "out"))]
    stream = _tensors.current_cuda_stream(q)
    forward = _native.lib.diffattn_layer_forward
    handle = layer._handle

    def c_call():
        forward(handle, views[0], views[1], views[2], views[3], None, None, stream)

    session = diffattn.Session(config={"default": args.backend}, platform=platform)
    compiled = torch.compile(lambda a, b, c: layer(a, b, c, out=out), fullgraph=True)
    results = best_per_call(
        {
            "c_call": c_call,
            "forward_into": lambda: layer.forward_into(q, k, v, out),
            "layer": lambda: layer(q, k, v, out=out),
            "layer_new": lambda: layer(q, k, v),
            "functional": lambda: diffattn.attention(q, k, v, session=session),
            "op": lambda: torch.ops.diffattn.attention_out(q, k, v, None, out, None, layer.key, None, False),
            "compiled": lambda: compiled(q, k, v),
        },
        args.iters,
        sync,
    )
    print(f"device {device} backend {layer.backend}  ({seq} tokens, {heads} heads, head size {dim}, {args.iters} calls)")
    for name, micros in results.items():
        print(f"  {name:<13} {micros:8.2f} us/call   over c_call {micros - results['c_call']:+7.2f} us")
    verdict = results["layer"] - results["c_call"] < 20.0
    print(f"goal (layer call under 20 us over the C call): {'met' if verdict else 'NOT met'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": str(device), "backend": layer.backend, "us_per_call": results}, f, indent=1)


if __name__ == "__main__":
    main()
