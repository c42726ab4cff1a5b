#!/usr/bin/env python3
"""Prefix caching on against off, same binary, one run: crossreg-server on its embedded
default model (or --model), crossreg-loadgen's shared_prefix and multi_turn workloads in
each decoding mode, the server restarted with --prefix_caching=true and =false.

Prints per mode: TTFT p50 off/on (target >= 5x) and output tokens/s on/off (target >= 2x)
for the shared prefix (--prefix_tokens shared + --suffix_tokens own ids, --concurrency at
once), the multi-turn reuse of the reusable prompt tokens (target >= 90%), and that the
running and KV-in-use gauges return to 0 after the load (cached blocks may stay, reported
apart). The CPU model and ISA are printed with the figures.

  scripts/prefix_cache_bench.py                       # the issue's workload (~5 min on 2 cores)
  scripts/prefix_cache_bench.py --requests 8 --turns 2 --modes ar   # a smoke run
  scripts/prefix_cache_bench.py --modes ar,ngram,ngram-adaptive,lossless --out docs/figures/prefix_cache_bench.zen3.md

--out FILE writes the ratios as a markdown table under a line naming the host, its ISA, the
date and this command (scripts/figures_file.py), overwriting the file.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import figures_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CROSSREG_BIN", os.path.join(ROOT, "build/bin"))
# (label, --mode, --adaptive_gamma)
MODES = {"ar": ("ar", "ar", "false"), "ngram": ("ngram", "ngram", "false"),
         "ngram-adaptive": ("ngram --adaptive_gamma", "ngram", "true"),
         "lossless": ("lossless", "lossless", "false")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_description():
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    isa = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "no AVX2")
    if "amx_tile" in flags:
        isa += " + AMX"
    elif "avx512_bf16" in flags:
        isa += " BF16"
    return f"{model}, {os.cpu_count()} cores, {isa}"


def scrape(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


class Server:
    def __init__(self, args, caching):
        self.grpc_port, self.metrics_port = free_port(), free_port()
        self.log_path = f"/tmp/prefix_cache_bench_server_{'on' if caching else 'off'}.log"
        self.log = open(self.log_path, "w")
        model = ["--model", args.model] if args.model else []
        cmd = [os.path.join(BIN, "crossreg-server")] + model + [
            "--host", "127.0.0.1", "--port", str(self.grpc_port), "--http_port", "0",
            "--metrics_port", str(self.metrics_port), "--adaptive_gamma",
            f"--prefix_caching={'true' if caching else 'false'}", "--max_running", str(max(8, args.concurrency))]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        start = time.time()
        while time.time() - start < 300:
            if self.proc.poll() is not None:
                raise SystemExit(f"crossreg-server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                scrape(self.metrics_port)
                with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=1):
                    return
            except OSError:
                time.sleep(0.5)
        raise SystemExit(f"crossreg-server did not become ready; see {self.log_path}")

    def settled(self):
        """Waits for the running and KV-in-use gauges to reach 0; returns the last scrape."""
        values = {}
        for _ in range(100):
            values = scrape(self.metrics_port)
            if values.get("crossreg_num_requests_running", 1) == 0 and values.get("crossreg_kv_cache_usage_perc", 1) == 0:
                break
            time.sleep(0.2)
        return values

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.close()


def loadgen(server, args, workload, mode, adaptive, seed):
    cmd = [os.path.join(BIN, "crossreg-loadgen"), "--server", f"127.0.0.1:{server.grpc_port}", "--format", "json",
           "--workload", workload, "--mode", mode, "--adaptive_gamma", adaptive, "--max_tokens", str(args.max_tokens),
           "--prefix_tokens", str(args.prefix_tokens), "--suffix_tokens", str(args.suffix_tokens),
           "--concurrency", str(args.concurrency), "--setup_seed", str(seed), "--ignore_eos"]
    if workload == "shared_prefix":
        cmd += ["--requests", str(args.requests)]
    else:
        cmd += ["--conversations", str(args.conversations), "--turns", str(args.turns)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"crossreg-loadgen failed ({out.returncode}): {' '.join(cmd)}")
    return json.loads(out.stdout)["overall"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="", help="a model path; empty: the embedded default model")
    ap.add_argument("--modes", default="ar,ngram,ngram-adaptive", help=f"comma-separated of {', '.join(MODES)}")
    ap.add_argument("--prefix_tokens", type=int, default=768)
    ap.add_argument("--suffix_tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32, help="shared_prefix requests")
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--max_tokens", type=int, default=32)
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--out", help="write the ratios as a markdown table to this file (overwritten), "
                                  "e.g. docs/figures/prefix_cache_bench.<host>.md")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"--modes: unknown mode '{m}' (known: {', '.join(MODES)})")

    host = cpu_description()
    print(f"[prefix-cache] host: {host}", flush=True)
    results = {"host": host, "config": vars(args), "runs": {}}
    gauges_ok = True
    for caching in (True, False):
        key = "on" if caching else "off"
        server = Server(args, caching)
        try:
            for i, m in enumerate(modes):
                _, mode, adaptive = MODES[m]
                # Each run its own ids: every run starts from a cold cache.
                seed = 1000 + 10 * i
                for workload in ("shared_prefix", "multi_turn"):
                    started = time.time()
                    r = loadgen(server, args, workload, mode, adaptive, seed + (workload == "multi_turn"))
                    results["runs"][f"{m}/{workload}/{key}"] = r
                    print(f"[prefix-cache] caching {key:3} {m:15} {workload:13} TTFT p50 {r['ttft_ms']['p50']:8.1f} ms"
                          f"  p99 {r['ttft_ms']['p99']:8.1f} ms  {r['output_tokens_per_s']:7.1f} tok/s"
                          f"  hit {100 * r.get('cache_hit_rate', 0):5.1f}%"
                          + (f"  reuse {100 * r['reuse']:5.1f}%" if "reuse" in r else "")
                          + f"  ({time.time() - started:.0f} s)", flush=True)
            values = server.settled()
            running = values.get("crossreg_num_requests_running", -1)
            usage = values.get("crossreg_kv_cache_usage_perc", -1)
            cached = values.get("crossreg_kv_cache_cached_blocks", 0)
            ok = running == 0 and usage == 0
            gauges_ok = gauges_ok and ok
            results[f"gauges_{key}"] = {"running": running, "kv_usage": usage, "cached_blocks": cached,
                                        "prefix_cache_queries": values.get("crossreg_prefix_cache_queries_total", 0),
                                        "prefix_cache_hits": values.get("crossreg_prefix_cache_hits_total", 0)}
            print(f"[prefix-cache] caching {key}: after the load running {running:.0f}, KV in use {usage:.3f}, "
                  f"cached blocks {cached:.0f} ({'ok' if ok else 'NOT BACK TO 0'})", flush=True)
        finally:
            server.stop()

    print(f"\nPrefix caching on vs off, same binary, one run ({host}); shared prefix {args.prefix_tokens} + "
          f"{args.suffix_tokens} own tokens, {args.requests} requests at concurrency {args.concurrency}, "
          f"{args.max_tokens} new tokens; multi-turn {args.conversations} x {args.turns} turns")
    print(f"{'mode':16} {'TTFT p50 off/on':>16} {'tok/s on/off':>13} {'hit (on)':>9} {'multi-turn reuse':>17}"
          f" {'multi-turn TTFT off/on':>23}")
    all_met = gauges_ok
    table = [f"Prefix caching on vs off: shared prefix {args.prefix_tokens} + {args.suffix_tokens} own tokens, "
             f"{args.requests} requests at concurrency {args.concurrency}, {args.max_tokens} new tokens; multi-turn "
             f"{args.conversations} x {args.turns} turns", "",
             "| mode | TTFT p50 off/on | tokens/s on/off | hit (on) | multi-turn reuse | multi-turn TTFT off/on | met |",
             "|---|---|---|---|---|---|---|"]
    for m in modes:
        on, off = results["runs"][f"{m}/shared_prefix/on"], results["runs"][f"{m}/shared_prefix/off"]
        mt_on, mt_off = results["runs"][f"{m}/multi_turn/on"], results["runs"][f"{m}/multi_turn/off"]
        ttft = off["ttft_ms"]["p50"] / max(on["ttft_ms"]["p50"], 1e-9)
        tps = on["output_tokens_per_s"] / max(off["output_tokens_per_s"], 1e-9)
        reuse = mt_on.get("reuse", 0.0)
        mt_ttft = mt_off["ttft_ms"]["p50"] / max(mt_on["ttft_ms"]["p50"], 1e-9)
        met = ttft >= 5 and tps >= 2 and reuse >= 0.9
        all_met = all_met and met
        print(f"{m:16} {ttft:15.2f}x {tps:12.2f}x {100 * on['cache_hit_rate']:8.1f}% {100 * reuse:16.1f}%"
              f" {mt_ttft:22.2f}x  {'met' if met else 'MISSED'}")
        table.append(f"| {m} | {ttft:.2f}x | {tps:.2f}x | {100 * on['cache_hit_rate']:.1f}% | {100 * reuse:.1f}% | "
                     f"{mt_ttft:.2f}x | {'met' if met else 'missed'} |")
        results[m] = {"ttft_p50_off_over_on": ttft, "tokens_per_s_on_over_off": tps, "multi_turn_reuse": reuse,
                      "multi_turn_ttft_off_over_on": mt_ttft, "met": met}
    print("targets: TTFT p50 >= 5x lower, tokens/s >= 2x higher, multi-turn reuse >= 90%, gauges back to 0: "
          + ("all met" if all_met else "NOT all met"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if args.out:
        gauges = "; ".join(f"after the load, caching {k}: running {results[f'gauges_{k}']['running']:.0f}, "
                           f"KV in use {results[f'gauges_{k}']['kv_usage']:.3f}, "
                           f"cached blocks {results[f'gauges_{k}']['cached_blocks']:.0f}" for k in ("on", "off"))
        figures_file.write(args.out, table + ["", gauges])
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
