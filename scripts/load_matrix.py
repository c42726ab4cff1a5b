#!/usr/bin/env python3
"""Exact modes against AR at every load: the load matrix (docs/benchmarks.md, "Speculation under load").

Starts crossreg-server with its default flags (plus --server-args), then for each
concurrency C sends max(32, 4·C) greedy /v1/completions requests with C in flight at once, per
mode, the modes taking turns within each round (their order rotating from round to
round), and prints per cell:
  - tokens/s of the mode's requests together (completion tokens / wall seconds),
  - its ratio to AR in the same round: median and range over the rounds,
  - tokens per forward (usage.tokens_per_forward summed over the requests),
  - the server's own speedup figure for the cell: the rise of
    crossreg_decode_ar_equivalent_seconds_total over that of crossreg_decode_seconds_total
    for the mode while the cell ran (what crossreg_speedup_vs_ar reports over its window),
    and its error against the measured ratio.

    scripts/load_matrix.py                                   # default model, held-out code prompts
    scripts/load_matrix.py --concurrency 1,8 --rounds 3 --modes ar,ngram,lossless
    scripts/load_matrix.py --out docs/figures/load_matrix.zen4.md

Prompts: held-out Python stdlib files cut after a `def` line (scripts/acceptance_report.py's
split, none trained on), or --chat for the chat prompts of scripts/bench_chat.py sent as
/v1/chat/completions (with a chat model: --model $(scripts/fetch_smollm2.sh)). Modes:
ar, ar2 (AR again, in its own slot of each round: the noise floor), ngram, lossless, lossy,
assist (lossless + n-gram assist), forked (lossless with two fork outcomes). Only loopback traffic; the server is stopped at the end.
"""
import argparse
import concurrent.futures
import json
import os
import re
import statistics
import sys
import time
import urllib.request

import figures_file
import local_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

MODES = {
    "ar": {"mode": "ar"},
    # AR again in a slot of its own: its ratio to AR is the host's noise floor for the cell.
    "ar2": {"mode": "ar"},
    "ngram": {"mode": "ngram"},
    "lossless": {"mode": "lossless"},
    "lossy": {"mode": "lossy", "beta": 0.5, "tau": -1.0},
    "assist": {"mode": "lossless", "ngram_assist": True},
    "forked": {"mode": "lossless", "fork_outcomes": 2},
}
# --json-schema: each request's reply must match one of these (cycled), as OpenAI's
# response_format json_schema; the server's grammar then constrains every mode alike.
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "integer"},
                                      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4}},
     "required": ["name", "version", "tags"], "additionalProperties": False},
    {"type": "object", "properties": {"function": {"type": "string"}, "arguments": {"type": "object", "properties": {
        "path": {"type": "string"}, "recursive": {"type": "boolean"}}, "required": ["path", "recursive"],
        "additionalProperties": False}}, "required": ["function", "arguments"], "additionalProperties": False},
    {"type": "object", "properties": {"items": {"type": "array", "maxItems": 5, "items": {
        "type": "object", "properties": {"id": {"type": "integer"}, "label": {"type": "string", "maxLength": 24}},
        "required": ["id", "label"], "additionalProperties": False}}}, "required": ["items"],
     "additionalProperties": False},
]
COUNTERS = ("crossreg_decode_seconds_total", "crossreg_decode_ar_equivalent_seconds_total")
STEP_COUNTER = "crossreg_scheduler_step_seconds_total"



def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        return json.load(r)


def counters(metrics_port):
    """{(counter, label): value}: the speedup accounting's two counters by mode, and the
    scheduler's step seconds by phase."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)\{(?:mode|phase)="(\w+)"\} ([0-9.eE+-]+)$', line)
        if m and (m.group(1) in COUNTERS or m.group(1) == STEP_COUNTER):
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def served_mode(spec):
    """The mode label the server's metrics use for a MODES entry."""
    return spec["mode"] if spec["mode"] != "ar" else "ar"


def run_cell(args, port, metrics_port, prompts, spec, concurrency):
    """max(32, 4·C) requests of one mode, C at a time: tokens/s, TPF, decode time per token, the server's speedup."""
    before = counters(metrics_port)
    bodies = []
    for i in range(max(len(prompts), args.min_requests, args.requests_per_slot * concurrency)):
        body = {"max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": not args.json_schema, **spec}
        if args.json_schema:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": f"schema{i % len(SCHEMAS)}", "strict": True, "schema": SCHEMAS[i % len(SCHEMAS)]}}
        if args.chat:
            body["messages"] = [{"role": "user", "content": prompts[i % len(prompts)]}]
        else:
            body["prompt"] = prompts[i % len(prompts)]
        bodies.append(body)
    path = "/v1/chat/completions" if args.chat else "/v1/completions"
    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        replies = list(pool.map(lambda b: post(port, path, b), bodies))
    seconds = time.time() - start
    after = counters(metrics_port)
    tokens = sum(r["usage"]["completion_tokens"] for r in replies)
    forwards = sum(r["usage"].get("forwards", 0) for r in replies)
    mode = served_mode(spec)
    charged = after.get((COUNTERS[0], mode), 0) - before.get((COUNTERS[0], mode), 0)
    ar_equiv = after.get((COUNTERS[1], mode), 0) - before.get((COUNTERS[1], mode), 0)
    # Decode time per token, the prompt's prefill left out (usage.timings): what the
    # server's speedup figure measures.
    decode_seconds = sum(r["usage"]["timings"]["total_seconds"] - r["usage"]["timings"]["time_to_first_token_seconds"]
                         for r in replies)
    decode_tokens = sum(max(0, r["usage"]["completion_tokens"] - 1) for r in replies)
    phases = {p: after.get((STEP_COUNTER, p), 0) - before.get((STEP_COUNTER, p), 0)
              for p in ("forward", "sequences", "step")}
    return {"rate": tokens / seconds, "tokens": tokens, "forwards": forwards,
            "outside": (phases["sequences"] + phases["step"]) / max(1e-9, sum(phases.values())),
            "per_token": decode_seconds / max(1, decode_tokens),
            "gauge": ar_equiv / charged if charged > 0 else float("nan")}


def code_prompts(count, max_chars):
    from acceptance_report import heldout_prompts
    return [p["text"] for p in heldout_prompts("/usr/lib/python3.11", 5.0, count, max_chars)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="", help="model path (default: the server's embedded default model)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--server-args", default="", help="extra crossreg-server flags (default: none, its defaults)")
    ap.add_argument("--modes", default="ar,ar2,ngram,lossless,assist")
    ap.add_argument("--concurrency", default="1,4,8,16,32,64")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests-per-slot", type=int, default=4,
                    help="requests per cell = this x concurrency, at least --min-requests and one per prompt")
    ap.add_argument("--min-requests", type=int, default=32,
                    help="requests per cell at least (a cell of a second or less is mostly its ramp and tail)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-chars", type=int, default=600, help="code prompt length cap (characters)")
    ap.add_argument("--chat", action="store_true", help="chat prompts through /v1/chat/completions")
    ap.add_argument("--json-schema", action="store_true",
                    help="every reply constrained by one of three JSON schemas (cycled), ending where it completes")
    ap.add_argument("--out", help="also write the table to this file (overwritten), e.g. docs/figures/load_matrix.<host>.md")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"--modes: unknown {', '.join(unknown)} (known: {', '.join(MODES)})")
    if "ar" not in modes:
        modes.insert(0, "ar")
    levels = [int(c) for c in args.concurrency.split(",") if c]
    if args.chat:
        from bench_chat import PROMPTS
        prompts = PROMPTS[: args.prompts]
    else:
        prompts = code_prompts(args.prompts, args.max_chars)
    server_args = ([f"--model={args.model}"] if args.model else []) + args.server_args.split()
    with local_server.running(args.bin, server_args) as (http, metrics):
        # Untimed: caches, page faults, the adaptive rule's first lessons.
        for mode in modes:
            run_cell(args, http, metrics, prompts, MODES[mode], 2)
        cells = {}
        for c in levels:
            for r in range(args.rounds):
                order = modes[r % len(modes):] + modes[:r % len(modes)]
                for mode in order:
                    cell = run_cell(args, http, metrics, prompts, MODES[mode], c)
                    cells.setdefault((c, mode), []).append(cell)
                    print(f"C={c} round {r + 1} {mode}: {cell['rate']:.1f} tok/s, "
                          f"TPF {cell['tokens'] / max(1, cell['forwards']):.2f}, "
                          f"server speedup {cell['gauge']:.2f}", flush=True)
        lines = [f"model {os.path.basename(args.model) or 'default (embedded)'}, "
                 f"{'chat' if args.chat else 'held-out code'} prompts, greedy, "
                 f"{'JSON schemas, at most ' if args.json_schema else ''}{args.max_tokens} tokens, "
                 f"max({max(len(prompts), args.min_requests)}, {args.requests_per_slot} x C) requests a cell, {args.rounds} interleaved rounds; "
                 f"server flags: {args.server_args or '(defaults)'}",
                 "",
                 "| C | mode | tokens/s | vs AR: tokens/s | vs AR: decode | TPF | outside the forward | server's speedup | its error: tokens/s, decode |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for c in levels:
            for mode in modes:
                runs, ar = cells[(c, mode)], cells[(c, "ar")]
                ratios = [runs[i]["rate"] / ar[i]["rate"] for i in range(args.rounds)]
                decode = statistics.median(ar[i]["per_token"] / runs[i]["per_token"] for i in range(args.rounds))
                tpf = sum(x["tokens"] for x in runs) / max(1, sum(x["forwards"] for x in runs))
                gauge = statistics.median(x["gauge"] for x in runs)
                ratio = statistics.median(ratios)
                err = "" if MODES[mode]["mode"] == "ar" else f"{100 * (gauge / ratio - 1):+.0f}%, {100 * (gauge / decode - 1):+.0f}%"
                lines.append(f"| {c} | {mode} | {statistics.median(x['rate'] for x in runs):.1f} | {ratio:.2f}x "
                             f"({min(ratios):.2f}-{max(ratios):.2f}) | {decode:.2f}x | {tpf:.2f} | "
                             f"{100 * statistics.median(x['outside'] for x in runs):.0f}% | {gauge:.2f} | {err} |")
        lines += ["", "vs AR: tokens/s is the median over the rounds of the cell's completion tokens/s over AR's in "
                  "the same round (range in brackets); decode the same for seconds per token after the first "
                  "(usage.timings: total - time to first token), the prompt's prefill left out, as in the "
                  "server's speedup (the rise of crossreg_decode_ar_equivalent_seconds_total over that of "
                  "crossreg_decode_seconds_total while the cell ran); the last column is its error against each ratio. Outside the forward: "
                  "the scheduler's step time beyond the engine's forwards (crossreg_scheduler_step_seconds_total: "
                  "planning, grammar masks, verification, detokenizing, bookkeeping) as a share of all of it."]
        figures_file.report(lines, args.out)


if __name__ == "__main__":
    sys.exit(main())
