"""Times PyTorch SDPA pinned to FLASH_ATTENTION and CUDNN_ATTENTION on square bf16 shapes (probe)."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

for (h, s, d) in [(24, 16384, 128), (32, 16384, 64), (8, 16384, 256)]:
    q, k, v = (torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
        with sdpa_kernel([be]):
            for _ in range(3):
                F.scaled_dot_product_attention(q, k, v)
            times = []
            for _ in range(10):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); F.scaled_dot_product_attention(q, k, v); b.record(); b.synchronize()
                times.append(a.elapsed_time(b))
        t = sorted(times)[5]
        print(f"TORCH {name} S={s} H={h} D={d}: {t:.3f} ms {4*h*s*s*d/t*1e-9:.1f} TFLOP/s")
