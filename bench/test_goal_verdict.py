"""Tests of bench/goal_verdict.py on fresh random benchmark outputs in the formats the benchmarks
write, and on committed results (run by ctest: bench.goal_verdict)."""

import contextlib
import io
import json
import math
import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import goal_verdict as gv  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
HEADER = ("| workload | B·H·Sq·Skv·D | backend | ms | TFLOP/s | × torch-cuDNN | × FA3-FP8 | relL2 | relL2 fp64 "
          "| cosine fp64 |")


def product_table(times, errors, device="NVIDIA H200"):
    """A table as bench/peers.py writes it: times[workload][backend] = ms."""
    lines = [f"GPU: {device} (132 SMs), driver 580", "", HEADER, "|" + "---|" * 10]
    for w, by_backend in times.items():
        for backend, ms in by_backend.items():
            name = f"{backend} (peer)" if backend.startswith("FA3") else f"**{backend}**"
            rel, cos = errors.get((w, backend), (0.03, 0.9993))
            lines.append(f"| {w} | 1·24·4096·4096·128 | {name} | {ms:.3f} | 700.0 | 1.00 | 1.00 | {rel:.2e} | "
                         f"{rel:.2e} | {cos:.6f} |")
        lines.append(f"| {w} | | data checksum matches | yes | | | | | | |")
    return "\n".join(lines) + "\n"


def mask_bench(rows, device="NVIDIA H200"):
    """gpu_mask_bench's table: rows of (workload, backend, ms, ref_ms)."""
    lines = [f"Device: {device} (132 SMs), cuDNN 91900; best of 10 samples",
             "workload               backend                  ms     ref ms    x ref      TF/s  ref TF/s  relL2 ref"]
    for w, backend, ms, ref in rows:
        lines.append(f"{w:<22} FLASH_ATTN (ref)                 {ref:.3f}    1.000               600.0")
        lines.append(f"{w:<22} {backend:<16} {ms:9.3f} {ref:10.3f} {ref / ms:8.3f}     600.0     600.0   2.00e-03")
    return "\n".join(lines) + "\n"


class ProductTable(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random()

    def test_ratios_and_verdicts_follow_the_times(self):
        times, errors = {}, {}
        for w in gv.LONG_HD128 + gv.SHORT_HD128 + gv.HD64:
            flash = self.rng.uniform(0.2, 40.0)
            times[w] = {gv.FLASH: flash, gv.FA3_FP8: flash / self.rng.uniform(1.2, 1.45),
                        gv.SAGE: flash / self.rng.uniform(0.8, 1.5), gv.SAGE_ACCURATE: flash / self.rng.uniform(0.9, 1.2),
                        gv.QK16: flash / self.rng.uniform(1.0, 1.3)}
            for b in times[w]:
                errors[(w, b)] = (self.rng.uniform(0.005, 0.06), self.rng.uniform(0.998, 1.0))
        verdicts, devices = gv.verdict(table=product_table(times, errors))
        self.assertEqual(devices, {"product table": "NVIDIA H200"})
        by_key = {(v.goal, v.row): v for v in verdicts}
        for issue, what, backend, against, workloads, bound in gv.SPEED_GOALS:
            for w in workloads:
                # The table keeps three decimals of each time: the verdict follows those.
                ratio = round(times[w][against], 3) / round(times[w][backend], 3)
                v = by_key[(what, w)]
                self.assertEqual(v.issue, issue)
                self.assertEqual(v.met, ratio >= bound, (what, w, ratio, v.figure))
                digits = 4 if f"{ratio:.3f}" == f"{bound:.3f}" else 3
                self.assertTrue(v.figure.startswith(f"{ratio:.{digits}f}×"), v.figure)
        for issue, what, backend in gv.ERROR_BELOW_FA3_FP8:
            for w in times:
                ours, fa3 = (float(f"{errors[(w, b)][0]:.2e}") for b in (backend, gv.FA3_FP8))
                self.assertEqual(by_key[(what, w)].met, ours < fa3)
        for w in times:
            rel, cos = errors[(w, gv.SAGE_ACCURATE)]
            v = by_key[("accurate mode relL2 ≤ 1.6e-2 and cosine ≥ 0.9998", w)]
            self.assertEqual(v.met, float(f"{rel:.2e}") <= 1.6e-2 and float(f"{cos:.6f}") >= 0.9998)

    def test_a_ratio_at_the_bound_is_met_and_a_missing_backend_is_not_run(self):
        w = self.rng.choice(gv.LONG_HD128)
        sage = round(self.rng.uniform(1.0, 3.0), 3)
        flash = math.ceil(sage * 1.35 * 1000) / 1000  # the smallest time the table can show that meets 1.35
        times = {w: {gv.SAGE: sage, gv.FLASH: flash}}
        verdicts, _ = gv.verdict(table=product_table(times, {}))
        by_key = {(v.goal, v.row): v for v in verdicts}
        self.assertTrue(by_key[("SAGE_ATTN ≥ 1.35× FLASH_ATTN, long hd128", w)].met)
        fa3 = by_key[("SAGE_ATTN ≥ 1.0× FA3 FP8, long hd128", w)]
        self.assertIsNone(fa3.met)
        self.assertEqual(fa3.figure, "not run")
        self.assertIn("| not run |", gv.render(verdicts, {}))

    def test_a_ratio_that_rounds_to_its_bound_shows_which_side_it_is_on(self):
        w = self.rng.choice(gv.LONG_HD128)
        qk16 = round(self.rng.uniform(1.0, 3.0), 3)
        flash = math.floor(qk16 * 1.15 * 1000) / 1000  # just below 1.15×, printed as 1.150 with three digits
        if flash / qk16 >= 1.15:
            flash -= 0.001
        verdicts, _ = gv.verdict(table=product_table({w: {gv.QK16: qk16, gv.FLASH: flash}}, {}))
        v = {(v.goal, v.row): v for v in verdicts}[("QK16/V8 ≥ 1.15× FLASH_ATTN, long hd128", w)]
        self.assertFalse(v.met)
        self.assertTrue(v.figure.startswith(f"{flash / qk16:.4f}×") or v.figure.startswith(f"{flash / qk16:.3f}×"),
                        v.figure)
        self.assertFalse(v.figure.startswith("1.150×"), v.figure)

    def test_a_margin_inside_the_same_kernel_spread_is_flagged(self):
        w = self.rng.choice(gv.LONG_HD128)
        qk16 = round(self.rng.uniform(1.5, 3.0), 3)
        flash = round(qk16 * self.rng.uniform(1.16, 1.17), 3)  # 1-2 % above the 1.15 bound
        far = round(flash * 1.03, 3)  # the same kernel 3 % slower: the margin is inside that spread
        near = round(flash * 1.002, 3)
        for twin, flagged in ((far, True), (near, False)):
            table = product_table({w: {gv.QK16: qk16, gv.FLASH: flash, gv.FLASHINFER_SAME_KERNEL: twin}}, {})
            v = {(v.goal, v.row): v for v in gv.verdict(table=table)[0]}[("QK16/V8 ≥ 1.15× FLASH_ATTN, long hd128", w)]
            self.assertTrue(v.met)
            self.assertEqual("same-kernel spread" in v.figure, flagged, v.figure)

    def test_a_device_other_than_the_h200_is_marked_indicative(self):
        text = product_table({gv.LONG_HD128[0]: {gv.FLASH: 2.0, gv.SAGE: 1.5}}, {}, device="NVIDIA H100 80GB HBM3")
        verdicts, devices = gv.verdict(table=text)
        self.assertIn("indicative", gv.render(verdicts, devices))
        verdicts, devices = gv.verdict(table=text.replace("H100 80GB HBM3", "H200"))
        self.assertNotIn("indicative", gv.render(verdicts, devices))

    def test_the_committed_sustained_table_parses(self):
        with open(os.path.join(RESULTS, "sustained-2026-12-07-27f49e5-h100", "gpu-a.md"), encoding="utf-8") as f:
            text = f.read()
        rows = gv.parse_product_table(text)
        self.assertEqual(sorted(rows), sorted(gv.LONG_HD128))
        for w in gv.LONG_HD128:
            for b in (gv.FLASH, gv.SAGE, gv.SAGE_ACCURATE, gv.QK16, gv.FA3_FP8, "torch-cuDNN"):
                self.assertGreater(float(rows[w][b]["ms"]), 0.0, (w, b))
        self.assertEqual(gv.device_of(text), "NVIDIA H100 80GB HBM3")


class Interleaved(unittest.TestCase):
    def bench_json(self, times):
        rows = [{"workload": w, "backend": b, "ms": ms, "tflops": 1.0, "error": ""}
                for w, by_backend in times.items() for b, ms in by_backend.items()]
        return json.dumps({"device": "NVIDIA H200", "sms": 132, "rows": rows})

    def test_only_the_goals_against_flash_attn_on_the_rows_that_ran(self):
        rng = random.Random()
        times = {}
        for w in rng.sample(gv.LONG_HD128, 2):
            flash = rng.uniform(1.0, 30.0)
            times[w] = {gv.FLASH: flash, gv.QK16: flash / rng.uniform(1.1, 1.2), gv.SAGE: flash / rng.uniform(1.25, 1.45)}
        verdicts, devices = gv.verdict(interleaved=self.bench_json(times))
        self.assertEqual(devices, {"interleaved rows": "NVIDIA H200"})
        self.assertEqual(len(verdicts), 4)  # QK16/V8 and SAGE_ATTN on two rows; no FA3 FP8, no accurate mode
        for v in verdicts:
            self.assertTrue(v.goal.endswith("interleaved in one process"), v.goal)
            backend = gv.QK16 if v.goal.startswith("QK16") else gv.SAGE
            bound = 1.15 if backend == gv.QK16 else 1.35
            self.assertEqual(v.met, times[v.row][gv.FLASH] / times[v.row][backend] >= bound)

    def test_several_processes_json_is_refused_with_the_reason(self):
        one = self.bench_json({gv.LONG_HD128[0]: {gv.FLASH: 2.0, gv.QK16: 1.7}})
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ours.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(one + "\n" + one + "\n")
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(gv.main(["--interleaved", path]), 2)
            self.assertIn("holds 2 documents", err.getvalue())


class MaskedCalls(unittest.TestCase):
    def test_padding_and_arbitrary_masks_have_their_own_bounds(self):
        rng = random.Random()
        rows, peers = [], {}
        for w in ("flux-77of512-keypad", "flux-77of512-dense", "wan22-ragged-4", "flux-blocks-50"):
            ref = round(rng.uniform(0.1, 5.0), 3)  # as printed
            rows.append((w, "FLASHINFER_ATTN", round(ref / rng.uniform(0.3, 1.05), 3), ref))
            rows.append((w, "CUDNN_ATTN", round(ref / rng.uniform(0.3, 1.0), 3), ref))
            peers[w] = round(rng.uniform(0.1, 6.0), 3)
        peer_text = "workload   peer ms  unmasked ms  backend\n" + "".join(
            f"{w:<25} {ms:8.3f} {1.0:12.3f}  CUDNN_ATTENTION\n" for w, ms in peers.items())
        verdicts, devices = gv.verdict(mask=mask_bench(rows), mask_peer=peer_text)
        self.assertEqual(devices["masked calls"], "NVIDIA H200")
        by_key = {(v.goal, v.row): v for v in verdicts}
        for w, backend, ms, ref in rows:
            x_ref = round(ref / ms, 3)  # gpu_mask_bench's "x ref" column
            if backend == "CUDNN_ATTN":
                v = by_key[("CUDNN_ATTN with the mask ≥ 0.97× PyTorch's cuDNN SDPA", w)]
                self.assertEqual(v.met, peers[w] / ms >= 0.97)
            elif gv.arbitrary_mask(w):
                v = by_key[("arbitrary masks ≤ 1.15× the unmasked time at the same density", w)]
                self.assertEqual(v.met, 1.0 / x_ref <= 1.15)
            else:
                v = by_key[("key padding and ragged ≥ 0.97× unmasked FLASH_ATTN", w)]
                self.assertEqual(v.met, x_ref >= 0.97)


class Sparse(unittest.TestCase):
    def test_paths_and_kernel_rows(self):
        rng = random.Random()
        dense = rng.uniform(150, 180)
        vsa, rain = rng.uniform(3, 7), rng.uniform(2, 5)
        paths = ("workload,path,ms,dense_ms,speedup,density,rel_l2,cosine\n"
                 f"wan2.1-14b-480p-self,FASTVIDEO_VSA topk 78/624,7.0,31.0,{rng.uniform(3, 7):.3f},0.125,0.2,0.98\n"
                 f"wan2.1-14b-720p-self,FASTVIDEO_VSA topk 180/1440,{dense / vsa:.4f},{dense:.4f},{vsa:.3f},0.125,0.19,0.98\n")
        verdicts, _ = gv.verdict(paths=paths)
        by_backend = {v.goal.split()[0]: v for v in verdicts}
        self.assertEqual(len(verdicts), 2)  # 480p is not a goal row; RAINFUSION_ATTN did not run
        self.assertEqual(by_backend["FASTVIDEO_VSA"].met, round(vsa, 3) >= 6.0)
        self.assertIsNone(by_backend["RAINFUSION_ATTN"].met)
        paths += f"wan2.1-14b-720p-self,RAINFUSION_ATTN 0.80,{dense / rain:.4f},{dense:.4f},{rain:.3f},0.2,0.16,0.98\n"
        verdicts, _ = gv.verdict(paths=paths)
        self.assertEqual({v.goal.split()[0]: v.met for v in verdicts}["RAINFUSION_ATTN"], round(rain, 3) >= 3.5)

        effs = {d: rng.uniform(0.7, 1.0) for d in ("1", "0.5", "0.25", "0.125")}
        flex = {d: rng.uniform(1.0, 2.0) for d in effs}
        sparse = "workload,dtype,density,listed,ms,tflops_computed,dense_ms,dense_tflops,efficiency,speedup\n" + "".join(
            f"wan2.1-14b-720p-self,bf16,{d},{d},{10.0 * float(d):.4f},600,10.0,650,{e:.4f},1.0\n" for d, e in effs.items())
        sparse += "square-16k-hd64,bf16,0.5,0.5,1.0,300,2.0,400,0.5000,1.0\n"  # not a goal row
        flex_text = "workload,density,flex_ms,flex_tflops,cudnn_ms,cudnn_tflops,note\n" + "".join(
            f"wan2.1-14b-720p-self,{d},{10.0 * float(d) * r:.4f},400,1,1,\n" for d, r in flex.items())
        verdicts, _ = gv.verdict(sparse=sparse, flex=flex_text)
        self.assertEqual(len(verdicts), 6)  # three densities, two goals; density 1 is no goal
        for v in verdicts:
            d = v.row.split(" at ")[1]
            if "85 %" in v.goal:
                self.assertEqual(v.met, round(effs[d], 4) >= 0.85)
            else:
                ratio = round(10.0 * float(d) * flex[d], 4) / round(10.0 * float(d), 4)
                self.assertEqual(v.met, ratio >= 1.3)


class CommandLine(unittest.TestCase):
    def test_no_input_is_an_error_and_an_unreadable_file_says_which(self):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            gv.main([])
        self.assertEqual(e.exception.code, 2)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(gv.main(["--table", "/nonexistent/gpu.md"]), 2)
        self.assertIn("--table /nonexistent/gpu.md", err.getvalue())

    def test_out_receives_what_is_printed(self):
        text = product_table({gv.LONG_HD128[1]: {gv.FLASH: 2.2, gv.QK16: 1.9}}, {})
        with tempfile.TemporaryDirectory() as d:
            table, out = os.path.join(d, "gpu.md"), os.path.join(d, "verdict.md")
            with open(table, "w", encoding="utf-8") as f:
                f.write(text)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                self.assertEqual(gv.main(["--table", table, "--out", out]), 0)
            with open(out, encoding="utf-8") as f:
                self.assertEqual(f.read(), printed.getvalue())
            self.assertIn("| #21 | QK16/V8 ≥ 1.15× FLASH_ATTN, long hd128 | wan2.2-ti2v-5b-self | 1.158×", printed.getvalue())


if __name__ == "__main__":
    unittest.main()
