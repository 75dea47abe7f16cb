#!/usr/bin/env python3
"""The open speed and quality goals of the 8-bit, masked and sparse backends, checked against one
job's benchmark outputs: each goal row with its figure, its bound and whether it is met.

    goal_verdict.py [--table gpu.md] [--interleaved ours.json] [--mask mask-bench.txt] [--mask-peer mask-peer.txt]
                    [--paths paths.csv] [--sparse sparse.csv] [--flex flex.csv] [--out verdict.md]

Inputs (any subset; a product-table or whole-path goal whose figures are missing is listed as
"not run"; the masked and kernel rows are those the files hold):
  --table      the product benchmark's table (scripts/gpu_bench.sh, bench/peers.py): SAGE_ATTN,
               FLASHINFER_ATTN's QK16/V8 mode and the accurate mode against FLASH_ATTN and FA3 FP8;
  --interleaved  gpu_attention_bench's JSON from one process timing FLASH_ATTN beside the others
               with --rounds N (their windows taking turns): the goals against FLASH_ATTN again;
  --mask       bench/gpu_mask_bench.cu's table, --mask-peer bench/mask_peer.py's (the same masks);
  --paths      bench/gpu_sparse_paths_bench.cu's CSV: FASTVIDEO_VSA and RAINFUSION_ATTN end to end;
  --sparse     bench/gpu_sparse_bench.cu's CSV (bf16 rows), --flex bench/flex_peer.py's CSV on
               the same random lists.

Ratios are taken only within one input (one job). The goals are stated for the H200; the device
each input names is printed beside the verdict, and a verdict from another GPU is marked as such.
The goals are data (SPEED_GOALS and the bounds below), so a changed bound is one edit. Standard
library only.
"""

import argparse
import csv
import json
import re
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional

LONG_HD128 = ["wan2.1-14b-480p-self", "wan2.2-ti2v-5b-self", "hunyuanvideo-1.5-480p-self", "square-16k-hd128"]
SHORT_HD128 = ["flux.1-1024-joint", "square-4k-hd128"]
HD64 = ["sd3-1024-joint-hd64", "square-4k-hd64", "square-16k-hd64"]

SAGE = "SAGE_ATTN"
SAGE_ACCURATE = "SAGE_ATTN pv=fp16"
QK16 = "FLASHINFER_ATTN qk16/v8"
FLASH = "FLASH_ATTN"
FA3_FP8 = "FA3-FP8"
FLASHINFER_SAME_KERNEL = "FLASHINFER_ATTN"  # unquantised: FLASH_ATTN's kernel

# (issue, what, backend, against, workloads, bound): backend at least `bound` times as fast as
# `against` on each workload of the product table.
SPEED_GOALS = [
    (18, "SAGE_ATTN ≥ 1.35× FLASH_ATTN, long hd128", SAGE, FLASH, LONG_HD128, 1.35),
    (18, "SAGE_ATTN ≥ 1.0× FA3 FP8, long hd128", SAGE, FA3_FP8, LONG_HD128, 1.0),
    (18, "SAGE_ATTN ≥ 1.2× FLASH_ATTN, Flux and the 4k hd128 square", SAGE, FLASH, SHORT_HD128, 1.2),
    (18, "SAGE_ATTN ≥ 1.25× FLASH_ATTN, SD3 and the hd64 squares", SAGE, FLASH, HD64, 1.25),
    (18, "accurate mode ≥ 1.1× FLASH_ATTN, long hd128", SAGE_ACCURATE, FLASH, LONG_HD128, 1.1),
    (21, "QK16/V8 ≥ 1.15× FLASH_ATTN, long hd128", QK16, FLASH, LONG_HD128, 1.15),
]
# (issue, what, backend): relL2 against float64 below FA3 FP8's on every row both ran.
ERROR_BELOW_FA3_FP8 = [
    (18, "SAGE_ATTN relL2 (fp64) below FA3 FP8's", SAGE),
    (21, "QK16/V8 relL2 (fp64) below FA3 FP8's", QK16),
]
ACCURATE_REL_L2, ACCURATE_COSINE = 1.6e-2, 0.9998
# Masked calls (gpu_mask_bench's FLASHINFER_ATTN rows, "x ref" = reference time / ours).
MASK_AT_LEAST = 0.97  # key padding, kept prefixes, packed ragged batches: ≥ 0.97× the reference
MASK_ARBITRARY_AT_MOST = 1.15  # dense and per-head masks: at most 1.15× the reference's time
CUDNN_VS_PEER = 0.97  # CUDNN_ATTN with a mask ≥ 0.97× PyTorch's cuDNN SDPA given the same mask
# Sparse (issue 20).
PATHS_SPEEDUP = {"FASTVIDEO_VSA": 6.0, "RAINFUSION_ATTN": 3.5}
PATHS_WORKLOAD = "wan2.1-14b-720p-self"
SPARSE_WORKLOADS = ("wan2.1-14b-480p-self", "wan2.1-14b-720p-self")
SPARSE_EFFICIENCY, SPARSE_DENSITIES, SPARSE_VS_FLEX = 0.85, ("0.5", "0.25", "0.125"), 1.3


@dataclass
class Verdict:
    issue: int
    goal: str
    row: str
    figure: str
    bound: str
    met: Optional[bool]  # None: not run


def fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


# ---- the product table ------------------------------------------------------------------------


def parse_product_table(text: str) -> Dict[str, Dict[str, Dict[str, str]]]:
    """{workload: {backend: {column: cell}}} from the Markdown table of bench/peers.py; backends
    lose their bold marks and " (peer)"."""
    rows: Dict[str, Dict[str, Dict[str, str]]] = {}
    header: Optional[List[str]] = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None  # the table ended
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "workload":
            header = cells
            continue
        if header is None or len(cells) != len(header) or set(cells[0]) <= {"-", ":"}:
            continue
        row = dict(zip(header, cells))
        backend = row.get("backend", "").replace("**", "").replace(" (peer)", "").strip()
        if not backend or not row.get("ms"):
            continue
        rows.setdefault(row["workload"], {})[backend] = row
    return rows


def device_of(text: str) -> str:
    m = re.search(r"^(?:GPU|Device):\s*([^(,\n]+)", text, re.MULTILINE | re.IGNORECASE)
    return m.group(1).strip() if m else "unknown"


def number(cell: Optional[str]) -> Optional[float]:
    try:
        return float(cell) if cell not in (None, "") else None
    except ValueError:
        return None


def same_kernel_spread(by_backend) -> Optional[float]:
    """How far FLASH_ATTN's and FLASHINFER_ATTN's times of one row lie apart, as a share of
    FLASH_ATTN's: the two run one kernel, so this is the job's noise on that row. A ratio to
    FLASH_ATTN within it of its bound can fall on either side in another job."""
    flash, fi = (number(by_backend.get(b, {}).get("ms")) for b in (FLASH, FLASHINFER_SAME_KERNEL))
    if not flash or not fi:
        return None
    return abs(fi / flash - 1.0)


def speed_verdicts(rows, interleaved: bool = False) -> List[Verdict]:
    """The speed goals on `rows` ({workload: {backend: {"ms": ...}}}). With `interleaved` (rows
    from one gpu_attention_bench process with --rounds), only the goals against FLASH_ATTN on the
    rows that ran, each marked as such."""
    out: List[Verdict] = []
    for issue, what, backend, against, workloads, bound in SPEED_GOALS:
        if interleaved and against != FLASH:
            continue
        for w in workloads:
            ours, ref = rows.get(w, {}).get(backend), rows.get(w, {}).get(against)
            ms, ref_ms = number(ours and ours.get("ms")), number(ref and ref.get("ms"))
            if ms is None or ref_ms is None or ms <= 0:
                if not interleaved:
                    out.append(Verdict(issue, what, w, "not run", f"≥ {bound}", None))
                continue
            ratio = ref_ms / ms
            digits = 4 if fmt(ratio) == fmt(bound) else 3  # a ratio that rounds to the bound shows which side it is on
            figure = f"{fmt(ratio, digits)}× ({fmt(ms)} against {fmt(ref_ms)} ms)"
            spread = same_kernel_spread(rows.get(w, {})) if against == FLASH else None
            if spread is not None and abs(ratio / bound - 1.0) <= spread:
                figure += f"; within the same-kernel spread ({100 * spread:.1f} %)"
            out.append(Verdict(issue, what + (", interleaved in one process" if interleaved else ""), w, figure,
                               f"≥ {bound}", ratio >= bound))
    return out


def one_process_json(text: str) -> dict:
    """gpu_attention_bench's JSON of one process; scripts/gpu_bench.sh's ours.json (one document a
    process, concatenated) is refused, since its backends were not timed in turns."""
    decoder, docs, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        doc, i = decoder.raw_decode(text, i)
        docs.append(doc)
    if len(docs) != 1:
        raise ValueError(f"--interleaved wants the JSON of one gpu_attention_bench process run with --rounds; this "
                         f"file holds {len(docs)} documents (scripts/gpu_bench.sh's ours.json: one process a backend)")
    return docs[0]


def parse_interleaved(text: str) -> Dict[str, Dict[str, Dict[str, str]]]:
    """{workload: {backend: {"ms": ...}}} from gpu_attention_bench's JSON."""
    rows: Dict[str, Dict[str, Dict[str, str]]] = {}
    for r in one_process_json(text).get("rows", []):
        if not r.get("error") and r.get("ms", 0) > 0:
            rows.setdefault(r["workload"], {})[r["backend"]] = {"ms": str(r["ms"])}
    return rows


def product_verdicts(rows) -> List[Verdict]:
    out = speed_verdicts(rows)
    for issue, what, backend in ERROR_BELOW_FA3_FP8:
        for w, by_backend in rows.items():
            ours, fa3 = number(by_backend.get(backend, {}).get("relL2 fp64")), number(
                by_backend.get(FA3_FP8, {}).get("relL2 fp64"))
            if ours is None or fa3 is None:
                continue
            out.append(Verdict(issue, what, w, f"{ours:.3g} against {fa3:.3g}", "below", ours < fa3))
    for w, by_backend in rows.items():
        acc = by_backend.get(SAGE_ACCURATE)
        if acc is None:
            continue
        rel, cos = number(acc.get("relL2 fp64")), number(acc.get("cosine fp64"))
        if rel is None or cos is None:
            continue
        out.append(Verdict(18, "accurate mode relL2 ≤ 1.6e-2 and cosine ≥ 0.9998", w, f"{rel:.3g}, {cos:.6f}",
                           "≤ 1.6e-2, ≥ 0.9998", rel <= ACCURATE_REL_L2 and cos >= ACCURATE_COSINE))
    return out


# ---- masked calls -----------------------------------------------------------------------------


def parse_mask_bench(text: str) -> Dict[str, Dict[str, Dict[str, float]]]:
    """{workload: {backend: {"ms", "ref_ms", "x_ref"}}} from gpu_mask_bench's table."""
    rows: Dict[str, Dict[str, Dict[str, float]]] = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(FLASHINFER_ATTN|CUDNN_ATTN)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", line)
        if m:
            rows.setdefault(m.group(1), {})[m.group(2)] = {
                "ms": float(m.group(3)), "ref_ms": float(m.group(4)), "x_ref": float(m.group(5))}
    return rows


def parse_mask_peer(text: str) -> Dict[str, float]:
    """{workload: PyTorch's cuDNN SDPA ms with the same mask} from bench/mask_peer.py's table."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+([\d.]+)\s+([\d.]+)\s+CUDNN_ATTENTION", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def arbitrary_mask(workload: str) -> bool:
    return "-dense" in workload or "-blocks" in workload


def mask_verdicts(rows, peer: Dict[str, float]) -> List[Verdict]:
    out: List[Verdict] = []
    for w, by_backend in rows.items():
        fi = by_backend.get("FLASHINFER_ATTN")
        if fi is not None:
            if arbitrary_mask(w):
                times = 1.0 / fi["x_ref"] if fi["x_ref"] > 0 else float("inf")
                out.append(Verdict(21, "arbitrary masks ≤ 1.15× the unmasked time at the same density", w,
                                   f"{fmt(times, 2)}× ({fmt(fi['ms'])} against {fmt(fi['ref_ms'])} ms)",
                                   f"≤ {MASK_ARBITRARY_AT_MOST}", times <= MASK_ARBITRARY_AT_MOST))
            else:
                out.append(Verdict(21, "key padding and ragged ≥ 0.97× unmasked FLASH_ATTN", w,
                                   f"{fmt(fi['x_ref'])}× ({fmt(fi['ms'])} against {fmt(fi['ref_ms'])} ms)",
                                   f"≥ {MASK_AT_LEAST}", fi["x_ref"] >= MASK_AT_LEAST))
        cd = by_backend.get("CUDNN_ATTN")
        if cd is not None and w in peer:
            ratio = peer[w] / cd["ms"]
            out.append(Verdict(21, "CUDNN_ATTN with the mask ≥ 0.97× PyTorch's cuDNN SDPA", w,
                               f"{fmt(ratio, 2)}× ({fmt(cd['ms'])} against {fmt(peer[w])} ms)", f"≥ {CUDNN_VS_PEER}",
                               ratio >= CUDNN_VS_PEER))
    return out


# ---- sparse -----------------------------------------------------------------------------------


def paths_verdicts(text: str) -> List[Verdict]:
    out: List[Verdict] = []
    seen = set()
    for r in csv.DictReader(text.splitlines()):
        if r.get("workload") != PATHS_WORKLOAD:
            continue
        backend = r["path"].split()[0]
        if backend not in PATHS_SPEEDUP:
            continue
        bound, speedup = PATHS_SPEEDUP[backend], float(r["speedup"])
        seen.add(backend)
        out.append(Verdict(20, f"{backend} end to end ≥ {bound}× dense FLASH_ATTN, Wan2.1 720p", r["path"],
                           f"{fmt(speedup, 2)}× ({fmt(float(r['ms']), 2)} against {fmt(float(r['dense_ms']), 2)} ms; "
                           f"relL2 against dense {float(r['rel_l2']):.3g})", f"≥ {bound}", speedup >= bound))
    for backend, bound in PATHS_SPEEDUP.items():
        if backend not in seen:
            out.append(Verdict(20, f"{backend} end to end ≥ {bound}× dense FLASH_ATTN, Wan2.1 720p", PATHS_WORKLOAD,
                               "not run", f"≥ {bound}", None))
    return out


def density_key(d: str) -> str:
    return f"{float(d):g}"


def sparse_verdicts(sparse_text: Optional[str], flex_text: Optional[str]) -> List[Verdict]:
    out: List[Verdict] = []
    ours: Dict[tuple, float] = {}
    if sparse_text:
        for r in csv.DictReader(sparse_text.splitlines()):
            d = density_key(r["density"])
            if r.get("dtype", "bf16") != "bf16" or d not in SPARSE_DENSITIES or r["workload"] not in SPARSE_WORKLOADS:
                continue
            eff = float(r["efficiency"])
            ours[(r["workload"], d)] = float(r["ms"])
            out.append(Verdict(20, "block-sparse kernel ≥ 85 % of dense TFLOP/s on computed FLOPs",
                               f"{r['workload']} at {d}", f"{fmt(eff)}", f"≥ {SPARSE_EFFICIENCY}",
                               eff >= SPARSE_EFFICIENCY))
    if flex_text:
        for r in csv.DictReader(flex_text.splitlines()):
            d = density_key(r["density"])
            key = (r["workload"], d)
            if d not in SPARSE_DENSITIES or key not in ours or not r.get("flex_ms"):
                continue
            ratio = float(r["flex_ms"]) / ours[key]
            out.append(Verdict(20, "block-sparse kernel ≥ 1.3× FlexAttention on the same lists", f"{key[0]} at {d}",
                               f"{fmt(ratio, 2)}×", f"≥ {SPARSE_VS_FLEX}", ratio >= SPARSE_VS_FLEX))
    return out


# ---- output -----------------------------------------------------------------------------------


def render(verdicts: List[Verdict], devices: Dict[str, str]) -> str:
    lines = ["# Goal verdict", ""]
    for source, device in devices.items():
        note = "" if "H200" in device else " (the goals are stated for the H200: indicative only)"
        lines.append(f"- {source}: {device}{note}")
    met = sum(v.met is True for v in verdicts)
    run = sum(v.met is not None for v in verdicts)
    lines += ["", f"{met} of {run} goal rows met ({len(verdicts) - run} not run).", "",
              "| issue | goal | row | figure | bound | met |", "|---|---|---|---|---|---|"]
    for v in verdicts:
        mark = "not run" if v.met is None else ("yes" if v.met else "**no**")
        lines.append(f"| #{v.issue} | {v.goal} | {v.row} | {v.figure} | {v.bound} | {mark} |")
    return "\n".join(lines) + "\n"


def verdict(table=None, mask=None, mask_peer=None, paths=None, sparse=None, flex=None, interleaved=None):
    """The verdicts and the devices named, from the inputs' texts (None: not given)."""
    verdicts: List[Verdict] = []
    devices: Dict[str, str] = {}
    if table is not None:
        devices["product table"] = device_of(table)
        verdicts += product_verdicts(parse_product_table(table))
    if interleaved is not None:
        devices["interleaved rows"] = one_process_json(interleaved).get("device", "unknown")
        verdicts += speed_verdicts(parse_interleaved(interleaved), interleaved=True)
    if mask is not None:
        devices["masked calls"] = device_of(mask)
        verdicts += mask_verdicts(parse_mask_bench(mask), parse_mask_peer(mask_peer or ""))
    if paths is not None:
        verdicts += paths_verdicts(paths)
    if sparse is not None or flex is not None:
        verdicts += sparse_verdicts(sparse, flex)
    return verdicts, devices


INPUTS = ("table", "interleaved", "mask", "mask_peer", "paths", "sparse", "flex")  # verdict()'s arguments


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in INPUTS:
        ap.add_argument(f"--{name.replace('_', '-')}", dest=name)
    ap.add_argument("--out", help="also write the verdict here")
    args = ap.parse_args(argv)
    texts = {}
    for name in INPUTS:
        path = getattr(args, name)
        if path:
            try:
                with open(path, encoding="utf-8") as f:
                    texts[name] = f.read()
            except OSError as e:
                print(f"goal_verdict: cannot read --{name.replace('_', '-')} {path}: {e.strerror}", file=sys.stderr)
                return 2
    if not texts:
        ap.error("give at least one of --table, --interleaved, --mask, --paths, --sparse, --flex")
    try:
        verdicts, devices = verdict(**texts)
    except ValueError as e:
        print(f"goal_verdict: {e}", file=sys.stderr)
        return 2
    text = render(verdicts, devices)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
