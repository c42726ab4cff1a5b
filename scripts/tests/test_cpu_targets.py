"""scripts/cpu_targets.py reads the benchmark programs' tables back: these runs of the real
programs (tiny settings, stories260K) check that every figure it reports is found in what
they print, so a change of their output format fails here, in the test run, not when the
targets are next measured."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cpu_targets  # noqa: E402

BIN = os.environ.get("CROSSREG_BIN", os.path.join(ROOT, "build/bin"))
STORIES = os.path.join(ROOT, "../shared/models/stories260K/stories260K.gguf")


def program(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built")
    if not os.path.exists(STORIES):
        pytest.skip(f"{STORIES} is missing")
    return path


def test_decode_tables_give_every_ratio_and_percentage():
    out = subprocess.run([program("crossreg-bench-decode"), "--gemm=false", "--random100m=false", "--batches", "1",
                          "--repeats", "1", "--steps", "4", "--rows", "1,16,32", "--prefill", "64", "--model",
                          STORIES], capture_output=True, text=True, check=True).stdout
    figures = cpu_targets.parse_decode(out)
    assert list(figures) == [STORIES]
    fig = figures[STORIES]
    assert set(fig) == {"T16", "T32", "T16_floor", "T32_floor", "roofline_pct", "prefill_pct", "prefill_peak",
                        "prefill_tps", "peak_f32", "peak_int8"}
    assert fig["T16"] > 0 and fig["T32"] > 0 and fig["roofline_pct"] > 0 and fig["prefill_pct"] > 0
    assert fig["T16_floor"] > 0 and fig["prefill_tps"] > 0
    # stories260K's weights are f32: its prefill is held against the f32 peak.
    assert fig["prefill_peak"] == "f32 FMA"
    # The peaks are probed again before the model, and its ratios use the highest readings.
    first = re.search(r"^Measured peaks on \d+ threads: f32 FMA (\d+) GFLOP/s.*int8 dot product (\d+) GOP/s", out, re.M)
    again = re.search(r"^peaks for this model's ratios \(the highest of 2 probes\): f32 FMA (\d+) GFLOP/s, "
                      r"int8 dot product (\d+) GOP/s", out, re.M)
    assert first and again, out
    assert int(again.group(1)) >= int(first.group(1)) and int(again.group(2)) >= int(first.group(2))
    assert (fig["peak_f32"], fig["peak_int8"]) == (float(again.group(1)), float(again.group(2)))
    line = cpu_targets.peaks_behind_the_ratios(figures)
    assert f"f32 FMA {again.group(1)} GFLOP/s, int8 dot product {again.group(2)} G ops/s" in line, line


def test_signed_codes_get_the_floor_of_their_sign_step_where_the_kernel_takes_one():
    # Q8_0's codes are signed: where the quantized kernel is the AVX2 one, each product
    # takes a vpsignb, whose own rate the program probes and holds a second floor against.
    out = subprocess.run([program("crossreg-bench-decode"), "--gemm=false", "--random100m_types", "q8_0",
                          "--batches", "1", "--repeats", "1", "--steps", "2", "--rows", "1,16", "--prefill", "0"],
                         capture_output=True, text=True, check=True).stdout
    probe = re.search(r"^Measured signed int8 step .*: (\d+) GOP/s", out, re.M)
    fig = cpu_targets.parse_decode(out)[cpu_targets.Q8_110M]
    if probe is None:  # the VNNI or portable kernel: no sign step, no second floor
        assert "T16_signed_floor" not in fig and "signed step" not in out
        return
    unsigned = re.search(r"^Measured peaks .* int8 dot product (\d+) GOP/s", out, re.M)
    assert 0 < int(probe.group(1)) < int(unsigned.group(1)), out
    # Its floor is longer, so T(16) over it is the smaller ratio.
    assert 0 < fig["T16_signed_floor"] < fig["T16_floor"], out


def test_the_peaks_behind_the_ratios_span_the_models():
    line = cpu_targets.peaks_behind_the_ratios({"a": {"peak_f32": 202.0, "peak_int8": 444.0},
                                                "b": {"peak_f32": 205.0, "peak_int8": 454.0}, "c": {}})
    assert line.endswith("f32 FMA 202-205 GFLOP/s, int8 dot product 444-454 G ops/s")
    assert "first probe" in cpu_targets.peaks_behind_the_ratios({"a": {}})


def test_a_bf16_models_prefill_is_held_against_the_peak_of_its_kernel():
    # The default model is bf16: its peak is the AMX tile rate, vdpbf16ps or the f32 FMA,
    # whichever kernel this host serves bf16 weights with, and is read back in each case.
    default = os.path.join(ROOT, "models/default")
    if not os.path.isdir(default):
        pytest.skip(f"{default} is missing")
    out = subprocess.run([program("crossreg-bench-decode"), "--gemm=false", "--random100m=false", "--batches", "1",
                          "--repeats", "1", "--steps", "4", "--rows", "1,16,32", "--prefill", "64", "--model",
                          default], capture_output=True, text=True, check=True).stdout
    fig = cpu_targets.parse_decode(out)[default]
    served = next((l for l in out.splitlines() if l.startswith("bf16 weights: ")), "bf16 weights: widened")
    want = ("AMX bf16" if served.startswith("bf16 weights: AMX tdpbf16ps") else
            "bf16 dot-product" if served.startswith("bf16 weights: vdpbf16ps") else "f32 FMA")
    assert fig["prefill_peak"] == want, served
    assert fig["prefill_pct"] > 0 and fig["T16"] > 0


def test_xr_table_gives_every_mode_with_tpf_and_speedup():
    out = subprocess.run([program("crossreg-bench-xr"), "--random100m=false", "--gammas=4", "--repeats", "1",
                          "--max_new_tokens", "8", "--model", STORIES], capture_output=True, text=True,
                         check=True).stdout
    rows = cpu_targets.parse_xr(out)[STORIES]
    modes = [(r[0], r[1]) for r in rows]
    assert modes[0] == ("ar", "-")
    assert ("ngram", "4") in modes and ("lossless, adaptive", "4") in modes
    ar = rows[0]
    assert ar[3] == pytest.approx(1.0) and ar[4] == pytest.approx(1.0)
    for _, _, tokens_per_s, tpf, speedup in rows:
        assert tokens_per_s > 0 and tpf >= 1.0 and speedup > 0


def test_sections_name_a_model_alike_in_both_programs():
    text = "# title\n## random Llama ~110M, bf16 weights (adapter: random, rank 32)\n| mode |\n"
    assert list(cpu_targets.sections(text)) == [cpu_targets.RANDOM_110M]
    rows = cpu_targets.table_rows(["x", "| rows | a |", "|---|---|", "| 1 | 2 |", "", "| 9 | 9 |"], "| rows |")
    assert rows == [["1", "2"]]


def test_host_class_is_the_simd_level_the_backend_runs():
    line = "CPU backend on AMD EPYC (family 25, model 1), 2 threads, SIMD {} (CPU: AVX2 FMA F16C)\n"
    assert cpu_targets.simd_class(line.format("avx512bf16")) == cpu_targets.AVX512
    assert cpu_targets.simd_class(line.format("avx512")) == cpu_targets.AVX512
    assert cpu_targets.simd_class(line.format("avx2")) == cpu_targets.AVX2
    assert cpu_targets.simd_class(line.format("scalar")) == cpu_targets.AVX2
    with pytest.raises(SystemExit):
        cpu_targets.simd_class("# crossreg-bench-decode\n")
    # The real program's line, with the AVX2 kernels forced: judged as an AVX2-only host.
    out = subprocess.run([program("crossreg-bench-decode"), "--gemm=false", "--random100m=false", "--batches=",
                          "--rows=", "--prefill", "0", "--model", STORIES], capture_output=True, text=True,
                         check=True, env=dict(os.environ, CROSSREG_SIMD="avx2")).stdout
    assert cpu_targets.simd_class(out) == cpu_targets.AVX2


def test_summary_counts_only_the_targets_that_hold_on_this_class():
    results = [("a", "≤ 1", "0.5", True), ("b", "≤ 1", "2.0", False),
               ("c", "≤ 1.3 on AVX2-only hosts", "2.5", None)]
    text = cpu_targets.summary(results, cpu_targets.AVX512)
    assert "1 of 2 met on this AVX-512 host" in text and "1 more reported" in text
    assert "reported" not in cpu_targets.summary(results[:2], cpu_targets.AVX512)
