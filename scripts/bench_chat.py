#!/usr/bin/env python3
"""Chat speed of a served model, one request at a time: each exact mode against AR.

Starts crossreg-server on MODEL (default: SmolLM2-135M-Instruct from scripts/fetch_smollm2.sh)
with its default flags (adaptive draft length on), sends the same greedy chat prompts (below: our own, held out from any
training) in every mode, modes taking turns within each round, and prints per mode the
tokens/s of the round's requests together, its ratio to AR in the same round (median and
range over the rounds) and tokens per forward:

    scripts/bench_chat.py [--model PATH] [--rounds 3] [--max-tokens 128] [--modes ar,ngram]
    scripts/bench_chat.py --rounds 3 --max-tokens 96 --out docs/figures/bench_chat.zen4.md

--out FILE also writes the table there, under a line naming the host, its ISA, the date and
this command (scripts/figures_file.py), overwriting the file. Only loopback traffic; the
server is stopped at the end.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

import figures_file
import local_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = [
    "Explain in a few sentences how a refrigerator keeps food cold.",
    "Write a short poem about a lighthouse in winter.",
    "List five ideas for a rainy Sunday afternoon at home.",
    "What are the main differences between a violin and a cello?",
    "Give me a simple recipe for tomato soup.",
    "Summarize the plot of a story about a lost dog finding its way home.",
    "How do I politely decline an invitation to a party?",
    "Describe the water cycle to a ten-year-old.",
]



def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--modes", default="ar,ngram")
    ap.add_argument("--server-args", default="", help="extra crossreg-server flags (default: none, its defaults)")
    ap.add_argument("--out", help="also write the table to this file (overwritten), e.g. docs/figures/bench_chat.<host>.md")
    args = ap.parse_args()
    model = args.model or subprocess.check_output([os.path.join(ROOT, "scripts", "fetch_smollm2.sh")], text=True).strip()
    modes = args.modes.split(",")
    if "ar" not in modes:
        modes.insert(0, "ar")
    with local_server.running(args.bin, [f"--model={model}"] + args.server_args.split()) as (http, _):
        # One untimed request per mode: caches, page faults, the adaptive rule's first probes.
        for mode in modes:
            post(http, {"messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 16, "temperature": 0,
                        "mode": mode})
        rates = {m: [] for m in modes}
        tpf = {m: [0, 0] for m in modes}
        for r in range(args.rounds):
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
                tokens, start = 0, time.time()
                for prompt in PROMPTS:
                    reply = post(http, {"messages": [{"role": "user", "content": prompt}], "max_tokens": args.max_tokens,
                                        "temperature": 0, "mode": mode, "ignore_eos": True})
                    usage = reply["usage"]
                    tokens += usage["completion_tokens"]
                    tpf[mode][0] += usage["completion_tokens"]
                    tpf[mode][1] += usage["forwards"]
                rates[mode].append(tokens / (time.time() - start))
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        flags = open("/proc/cpuinfo").read()
        isa = "AVX-512" if " avx512f " in flags else "AVX2" if " avx2 " in flags else "baseline"
        lines = [f"model {os.path.basename(model)}, {len(PROMPTS)} chat prompts x {args.max_tokens} tokens, greedy, "
                 f"one at a time, {args.rounds} rounds; server flags: {args.server_args or '(defaults)'}; host {cpu} ({os.cpu_count()} cores, {isa})",
                 "", "| mode | tokens/s (median) | vs AR (median, range) | tokens per forward |", "|---|---|---|---|"]
        for mode in modes:
            ratios = [rates[mode][i] / rates["ar"][i] for i in range(args.rounds)]
            lines.append(f"| {mode} | {statistics.median(rates[mode]):.1f} | {statistics.median(ratios):.2f}x "
                         f"({min(ratios):.2f}-{max(ratios):.2f}) | {tpf[mode][0] / max(1, tpf[mode][1]):.2f} |")
        figures_file.report(lines, args.out)


if __name__ == "__main__":
    sys.exit(main())
