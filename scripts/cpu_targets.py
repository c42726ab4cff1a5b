#!/usr/bin/env python3
"""The CPU engine's performance targets, all measured in one run, one figure per line.

    /usr/bin/python3 scripts/cpu_targets.py                 # three to five minutes on 2 cores
    /usr/bin/python3 scripts/cpu_targets.py --skip-acceptance
    /usr/bin/python3 scripts/cpu_targets.py --out docs/figures/cpu_targets.zen3.md

It runs the benchmark programs that print the figures and reads their tables back:
  1. crossreg-bench-decode (the ~110M random bf16 model, stories260K, models/default):
     T(16)/T(1), T(32)/T(1), batch-1 AR against the working-set bandwidth roofline,
     prefill of 512 tokens against the measured peak of the path that runs (bf16 dot
     products with AVX512_BF16, f32 FMA otherwise);
  2. crossreg-bench-xr (the same models, γ 4 and 8): n-gram TPF at γ 8 on the ~110M model,
     the best speculative mode against AR there, and the worst --adaptive_gamma row of
     every model against AR;
  3. scripts/acceptance_report.py on the default model's held-out prompts, AR and n-gram
     only: n-gram tokens/s against AR, at fixed γ 4 and 8 and with adaptive γ ≤ 8. The
     prompts are docs/acceptance.md's, cut from the packed corpus's held-out stream
     (scripts/build_corpus.sh -> training/data/corpus); without that folder it says so and
     takes held-out stdlib files instead.
Every ratio comes from one program's run, never from two runs' figures. The programs'
own output goes to --log (default /tmp/crossreg-cpu-targets.log) so the tables can be
read whole. Exit status 0 whatever is met: this reports, it does not gate CI. With --out
FILE the host lines and the table also go to FILE, under a line naming the host, its ISA,
the date and this command (scripts/figures_file.py), overwriting it.

Some targets hold on one class of host only, and the table says which (the class is the
SIMD level the backend runs, so CROSSREG_SIMD=avx2 on an AVX-512 host is judged as AVX2):
  - AVX-512 hosts (issue 12): verify rows nearly free, T(16)/T(1) and T(32)/T(1). Two
    256-bit FMA pipes cannot make 16 rows cost near one; on AVX2 they are reported.
  - AVX2-only hosts (issue 41): the quantized layouts' AR against the roofline, their
    prefill against 1.5x the leading CPU engine's figures on that class, and 16 rows
    within 1.3x of the floor. On AVX-512 hosts they are reported.
  - every host: the rest.
A target reported on this class shows its figure and "reported" in place of yes or no, and
the count of those met is out of the targets that hold here.
"""
import argparse
import os
import re
import subprocess
import sys

import figures_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANDOM_110M = "random Llama ~110M, bf16 weights"
Q8_110M = "random Llama ~110M, Q8_0 weights"
Q4KM_110M = "random Llama ~110M, Q4_K_M weights"


def run(cmd, log):
    """Runs a benchmark, appends its output to the log and returns it."""
    print(f"[targets] {' '.join(cmd)}", flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n{out.stdout}{out.stderr}\n")
    if out.returncode != 0:
        raise SystemExit(f"[targets] {cmd[0]} exited {out.returncode}: {out.stderr.strip()[-400:]}")
    return out.stdout


def sections(text):
    """The text split at its '## ' headings (one per model): {heading: lines under it}, the
    lines before the first heading left out. A heading keeps what precedes ' (adapter:' so
    both benchmarks name a model alike."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:].split(" (adapter:")[0].strip()
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def table_rows(lines, header_start):
    """The cells of the Markdown table whose header line starts with `header_start`."""
    rows, inside = [], False
    for line in lines:
        if line.startswith(header_start):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                break
            if line.startswith("|---"):
                continue
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def parse_decode(text):
    """Per model: {'T16': ratio, 'T32': ratio, 'roofline_pct': batch-1 AR, 'prefill_pct', 'prefill_peak'}, and
    where the program prints them 'T16_floor' (T(16) over the forward's floor), 'prefill_tps', the peaks
    the model's ratios use ('peak_f32' GFLOP/s, 'peak_int8' G ops/s: the highest probe before it) and, for
    signed codes on a kernel that needs a sign step per product, 'T16_signed_floor' (T(16) over the floor
    at that step's measured rate)."""
    out = {}
    for name, lines in sections(text).items():
        fig = {}
        for cells in table_rows(lines, "| batch |"):
            if cells[0] == "1":
                fig["roofline_pct"] = float(cells[4].rstrip("%"))
        for cells in table_rows(lines, "| rows |"):
            if cells[0] in ("16", "32"):
                fig["T" + cells[0]] = float(cells[2])
                if len(cells) >= 7:
                    fig["T" + cells[0] + "_floor"] = float(cells[6])
        for line in lines:
            m = re.search(r"= (\d+)% of the measured (AMX bf16|bf16 dot-product|int8 dot-product|f32 FMA) peak", line)
            if m:
                fig["prefill_pct"], fig["prefill_peak"] = float(m.group(1)), m.group(2)
            m = re.search(r"T\(16\) / the signed step's floor (\d+\.\d+)", line)
            if m:
                fig["T16_signed_floor"] = float(m.group(1))
            m = re.search(r"Prefill of \d+ tokens \(one forward\): [\d.]+ ms, (\d+) tokens/s", line)
            if m:
                fig["prefill_tps"] = float(m.group(1))
            m = re.match(r"peaks for this model's ratios \(the highest of \d+ probes\): f32 FMA (\d+) GFLOP/s, "
                         r"int8 dot product (\d+) GOP/s", line)
            if m:
                fig["peak_f32"], fig["peak_int8"] = float(m.group(1)), float(m.group(2))
        out[name] = fig
    return out


def parse_xr(text):
    """Per model: the decoding table as [(mode, gamma, tokens/s, tpf, speedup)]."""
    return {name: [(c[0], c[1], float(c[2]), float(c[3]), float(c[4])) for c in table_rows(lines, "| mode |")]
            for name, lines in sections(text).items()}


def peaks_behind_the_ratios(decode):
    """The peaks the ratios below are held against: crossreg-bench-decode probes again before
    every model and uses the highest reading so far, so a first probe in a slow spell (the
    'Measured peaks' line) does not make a floor look met."""
    f32 = [f["peak_f32"] for f in decode.values() if "peak_f32" in f]
    int8 = [f["peak_int8"] for f in decode.values() if "peak_int8" in f]
    if not f32:
        return "Peaks behind the ratios: the first probe's (above)"
    span = lambda v: f"{min(v):.0f}" if min(v) == max(v) else f"{min(v):.0f}-{max(v):.0f}"
    return (f"Peaks behind the ratios (each model's highest probe so far; the line above is the first probe): "
            f"f32 FMA {span(f32)} GFLOP/s, int8 dot product {span(int8)} G ops/s")


ALL_HOSTS, AVX512, AVX2 = "all", "AVX-512", "AVX2-only"


def simd_class(decode_text):
    """The class of host whose targets hold: AVX-512 where the backend runs an AVX-512 level
    (avx512, avx512bf16), AVX2-only where it runs avx2 (a Zen 3 host, or CROSSREG_SIMD=avx2),
    and the portable path counted with AVX2. Read from crossreg-bench-decode's first line:
    'CPU backend on <model>, <n> threads, SIMD <level> (...)'."""
    m = re.search(r"^CPU backend on .*?, SIMD (\S+)", decode_text, re.M)
    if m is None:
        raise SystemExit("[targets] crossreg-bench-decode printed no 'CPU backend on ..., SIMD <level>' line")
    return AVX512 if m.group(1).startswith("avx512") else AVX2


def summary(results, host_class):
    """'N of M met on this AVX-512 host (K reported)': M counts the targets that hold here."""
    held = [r for r in results if r[3] is not None]
    reported = len(results) - len(held)
    return (f"\n{sum(1 for r in held if r[3])} of {len(held)} met on this {host_class} host" +
            (f" ({reported} more reported: their targets hold on another class)" if reported else ""))


def short(name):
    return {RANDOM_110M: "~110M bf16", Q8_110M: "~110M Q8_0", Q4KM_110M: "~110M Q4_K_M"}.get(
        name, os.path.basename(name.rstrip("/")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin"))
    ap.add_argument("--stories", default=os.path.join(ROOT, "../shared/models/stories260K/stories260K.gguf"))
    ap.add_argument("--default-model", default=os.path.join(ROOT, "models/default"))
    ap.add_argument("--repeats", type=int, default=15, help="crossreg-bench-decode --repeats (best of)")
    ap.add_argument("--xr-repeats", type=int, default=5, help="crossreg-bench-xr --repeats (best of)")
    ap.add_argument("--skip-acceptance", action="store_true", help="leave out the held-out n-gram run")
    ap.add_argument("--packed-corpus", default=os.path.join(ROOT, "training/data/corpus"),
                    help="held-out prompts from this packed corpus (docs/acceptance.md's)")
    ap.add_argument("--log", default="/tmp/crossreg-cpu-targets.log")
    ap.add_argument("--out", help="also write the table to this file (overwritten), e.g. docs/figures/cpu_targets.<host>.md")
    args = ap.parse_args()
    for prog in ("crossreg-bench-decode", "crossreg-bench-xr", "crossreg-generate"):
        if not os.access(os.path.join(args.bin, prog), os.X_OK):
            raise SystemExit(f"[targets] {args.bin}/{prog} is missing: build first (scripts/setup.sh)")
    for path in (args.stories, args.default_model):
        if not os.path.exists(path):
            raise SystemExit(f"[targets] model not found: {path}")
    open(args.log, "w").close()
    models = f"{args.stories},{args.default_model}"

    decode_text = run([os.path.join(args.bin, "crossreg-bench-decode"), "--gemm=false", "--batches", "1",
                       "--repeats", str(args.repeats), "--rows", "1,16,32", "--prefill", "512", "--model", models,
                       "--random100m_types", "bf16,q8_0,q4_k_m"],
                      args.log)
    # The host's CPU model, ISA and measured peaks: every figure below is of this machine.
    header = decode_text.split("\n## ")[0].splitlines()  # what precedes the first model's table
    machine = [l for l in header if l.startswith(("CPU backend", "Measured"))]
    decode = parse_decode(decode_text)
    xr = parse_xr(run([os.path.join(args.bin, "crossreg-bench-xr"), "--gammas=4,8", "--repeats",
                       str(args.xr_repeats), "--model", models], args.log))

    host_class = simd_class(decode_text)
    results = []  # (figure, target, measured text, met: True, False or None where only reported)

    def check(figure, target, value, met, fmt="{:.2f}", holds_on=ALL_HOSTS):
        text = fmt.format(value) if value is not None else "not printed"
        if holds_on != ALL_HOSTS and holds_on != host_class:
            results.append((figure, f"{target} on {holds_on} hosts", text, None))
        else:
            results.append((figure, target, text, value is not None and met(value)))

    big = decode.get(RANDOM_110M, {})
    check("~110M bf16, T(16)/T(1)", "≤ 1.6", big.get("T16"), lambda v: v <= 1.6, holds_on=AVX512)
    check("~110M bf16, T(32)/T(1)", "≤ 2.5", big.get("T32"), lambda v: v <= 2.5, holds_on=AVX512)
    check("~110M bf16, batch-1 AR of the working-set roofline", "≥ 80%", big.get("roofline_pct"),
          lambda v: v >= 80, "{:.0f}%")
    # Held against the peak of the path that runs: bf16 dot products where the CPU has
    # AVX512_BF16, f32 FMA where bf16 weights are widened (AVX2, AVX-512 F).
    check(f"~110M bf16, prefill 512 of the {big.get('prefill_peak', 'measured')} peak", "≥ 50%",
          big.get("prefill_pct"), lambda v: v >= 50, "{:.0f}%")
    # Quantized GGUF layouts: AR against the roofline of the bytes they stream,
    # prefill of 512 against 1.5x the leading CPU engine's figures on an AVX2 host (940 and
    # 1,030 tokens/s), or 70% of the int8 peak; 16 rows within 1.3x of the printed floor.
    for name, prefill_target in ((Q8_110M, 940), (Q4KM_110M, 1030)):
        fig = decode.get(name, {})
        check(f"{short(name)}, batch-1 AR of the working-set roofline", "≥ 85%", fig.get("roofline_pct"),
              lambda v: v >= 85, "{:.0f}%", holds_on=AVX2)
        check(f"{short(name)}, prefill 512 tokens/s (int8 peak: {fig.get('prefill_pct', 0):.0f}%)",
              f"≥ {prefill_target} or ≥ 70% of peak", fig.get("prefill_tps"),
              lambda v, t=prefill_target, f=fig: v >= t or f.get("prefill_pct", 0) >= 70, "{:.0f}", holds_on=AVX2)
        # Signed codes (Q8_0) on AVX2 take a sign step beside every product: the program also
        # prints T(16) over the floor at that step's own measured rate, reported here beside
        # the target, which stays held against the int8 probe.
        signed = (f" (over the signed step's floor: {fig['T16_signed_floor']:.2f})"
                  if "T16_signed_floor" in fig else "")
        check(f"{short(name)}, T(16) over its floor{signed}", "≤ 1.3", fig.get("T16_floor"), lambda v: v <= 1.3,
              holds_on=AVX2)
    for name, fig in decode.items():
        if name in (RANDOM_110M, Q8_110M, Q4KM_110M):
            continue
        limit = 4.0 if "stories" in name else 3.0
        check(f"{short(name)}, T(16)/T(1)", f"≤ {limit:g}", fig.get("T16"), lambda v, l=limit: v <= l,
              holds_on=AVX512)
    big_xr = xr.get(RANDOM_110M, [])
    ngram8 = [r[3] for r in big_xr if r[0] == "ngram" and r[1] == "8"]
    check("~110M, n-gram TPF at γ 8 (greedy)", "≥ 5", ngram8[0] if ngram8 else None, lambda v: v >= 5)
    spec = [r for r in big_xr if r[0] != "ar"]
    best = max(spec, key=lambda r: r[4]) if spec else None
    check(f"~110M, best speculative mode vs AR ({best[0]} γ {best[1]})" if best else "~110M, best speculative vs AR",
          "≥ 1.5×", best[4] if best else None, lambda v: v >= 1.5, "{:.2f}×")
    for name, rows in xr.items():
        adaptive = [r for r in rows if "adaptive" in r[0]]
        worst = min(adaptive, key=lambda r: r[4]) if adaptive else None
        check(f"{short(name)}, worst --adaptive_gamma row vs AR" + (f" ({worst[0]} γ {worst[1]})" if worst else ""),
              "≥ 0.95×", worst[4] if worst else None, lambda v: v >= 0.95, "{:.2f}×")

    if not args.skip_acceptance:
        report = "/tmp/crossreg-cpu-targets-acceptance.md"
        cmd = [sys.executable, os.path.join(ROOT, "scripts/acceptance_report.py"), "--model", args.default_model,
               "--only", "n-gram T=0", "--only", "adaptive γ≤8: n-gram T=0", "--out", report]
        if os.path.isdir(args.packed_corpus):
            cmd += ["--packed-corpus", args.packed_corpus]
            prompts = "held-out prompts"
        else:
            print(f"[targets] {args.packed_corpus} is missing (scripts/build_corpus.sh builds it): the n-gram "
                  "figure uses held-out stdlib files, not docs/acceptance.md's prompts", flush=True)
            prompts = "held-out stdlib prompts"
        run(cmd, args.log)
        rows = table_rows(open(report).read().splitlines(), "| configuration |")
        ngram = [(c[0], float(c[4])) for c in rows if c[0].startswith("n-gram T=0")]
        best_ng = max(ngram, key=lambda r: r[1]) if ngram else None
        check(f"default model, {prompts}, n-gram vs AR tokens/s ({best_ng[0]})" if best_ng else
              f"default model, {prompts}, n-gram vs AR", "≥ 1.3×", best_ng[1] if best_ng else None,
              lambda v: v >= 1.3, "{:.2f}×")
        # Issue 41's figure for the same prompts: n-gram with the draft length chosen per
        # forward, which must pay where fixed γ does and never fall below AR where it does not.
        adaptive = [(c[0], float(c[4])) for c in rows if c[0].startswith("adaptive γ≤8: n-gram T=0")]
        check(f"default model, {prompts}, adaptive n-gram (γ ≤ 8) vs AR tokens/s", "≥ 1.5×",
              adaptive[0][1] if adaptive else None, lambda v: v >= 1.5, "{:.2f}×")
        for name, ratio in ngram + adaptive:
            print(f"[targets] {name}: {ratio:.2f}× AR", flush=True)

    lines = machine + [peaks_behind_the_ratios(decode), f"Host class: {host_class}", "",
                       "| figure | target | measured | met |", "|---|---|---|---|"]
    for figure, target, value, met in results:
        lines.append(f"| {figure} | {target} | {value} | {'reported' if met is None else 'yes' if met else '**no**'} |")
    print()
    print("\n".join(lines))
    print(summary(results, host_class) + f"; the programs' tables are in {args.log}")
    if args.out:
        figures_file.write(args.out, lines + [summary(results, host_class)])
        print(f"[targets] wrote {args.out}")


if __name__ == "__main__":
    main()
