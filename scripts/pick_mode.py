#!/usr/bin/env python3
"""Measures which exact decoding mode serves one request fastest on this host, through a
running crossreg-server, and prints the figures (the quickstart's first step).

Each candidate mode runs the same request (prompt, sampling settings, seed) ROUNDS times,
the modes taking turns, through the `crossreg` CLI; a mode's speed is its best round's
completion tokens / the server's total seconds for the request. Every candidate is exact:
AR, n-gram (prompt lookup), and, where the server has a drafter (an adapter, or a model
that drafts for itself), lossless on its drafts alone and with n-gram assist.

A drafting mode is picked over AR only when the speedup is real (`choose`): its best round
beats AR's best by more than the margin (5%, or the spread of AR's own rounds where that is
wider: the host's noise for this request), and it accepted drafts (more than 1.05 tokens per
forward; a mode that ran its forwards as AR can only look faster by noise). Otherwise AR is
the pick. The last line is machine-readable (the candidate's name: its mode, then its extra
flags after `+`):
    PICK <candidate> <tokens/s> <AR tokens/s>

    scripts/pick_mode.py --server 127.0.0.1:50051 --prompt 'def f(' -- --temperature 0.7 --seed 7
Arguments after `--` go to every request (crossreg --help lists them).
"""
import argparse
import json
import subprocess
import sys

CANDIDATES = [
    ("ar", []),
    ("ngram", []),
    ("lossless", []),
    ("lossless", ["--ngram_assist"]),
]


MIN_MARGIN = 0.05
MIN_TOKENS_PER_FORWARD = 1.05


def choose(rounds):
    """rounds: {candidate: [{"tps": .., "tpf": ..}, ...]} with "ar" among them. Returns
    (pick, margin, reason): the fastest candidate whose best round beats AR's best by more
    than the margin and that accepted drafts, else "ar"."""
    ar = [r["tps"] for r in rounds["ar"]]
    spread = max(ar) / max(min(ar), 1e-9) - 1.0
    margin = max(MIN_MARGIN, spread)
    bar = max(ar) * (1.0 + margin)
    best = {name: max(rs, key=lambda r: r["tps"]) for name, rs in rounds.items() if rs}
    eligible = [name for name, b in best.items()
                if name != "ar" and b["tps"] > bar and b["tpf"] > MIN_TOKENS_PER_FORWARD]
    if eligible:
        pick = max(eligible, key=lambda name: best[name]["tps"])
        return pick, margin, f"{pick} beats AR by more than the {margin:.0%} margin"
    fastest = max(best, key=lambda name: best[name]["tps"])
    if fastest == "ar":
        return "ar", margin, "no drafting mode was faster than AR"
    if best[fastest]["tpf"] <= MIN_TOKENS_PER_FORWARD:
        why = f"ran its forwards as AR ({best[fastest]['tpf']:.2f} tokens/forward)"
    else:
        why = f"was within the {margin:.0%} margin (AR's rounds spread {spread:.0%})"
    return "ar", margin, f"the fastest, {fastest}, {why}: not a speedup, so AR"


def candidate_name(mode, extra):
    return "+".join([mode] + [e.lstrip("-") for e in extra])


def run_once(cli, server, prompt, mode, extra, request_args):
    cmd = [cli, "--server", server, "--prompt", prompt, "--mode", mode, "--format", "jsonl"] + extra + request_args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    for line in reversed(out.stdout.splitlines()):
        msg = json.loads(line)
        if "complete" in msg:
            done = msg["complete"]
            tokens = int(done["usage"]["completion_tokens"])
            seconds = float(done["timings"]["total_seconds"])
            return {"tokens": tokens, "tps": tokens / max(seconds, 1e-9),
                    "tpf": float(done["spec"].get("tokens_per_forward", 1.0))}, None
    return None, "no Complete message"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/bin/crossreg")
    ap.add_argument("--server", required=True, help="host:port of a running crossreg-server")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs of each mode (the best counts; AR's spread sets the margin)")
    ap.add_argument("request_args", nargs=argparse.REMAINDER, help="after --: flags for every request")
    a = ap.parse_args()
    request_args = [x for x in a.request_args if x != "--"]
    if a.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    rounds = {}
    notes = {}
    for r in range(a.rounds):
        for k in range(len(CANDIDATES)):
            mode, extra = CANDIDATES[(k + r) % len(CANDIDATES)]
            name = candidate_name(mode, extra)
            result, error = run_once(a.cli, a.server, a.prompt, mode, extra, request_args)
            if result is None:
                notes[name] = error
                continue
            rounds.setdefault(name, []).append(result)
    best = {name: max(rs, key=lambda r: r["tps"]) for name, rs in rounds.items()}
    if "ar" not in best:
        raise SystemExit(f"pick_mode: AR failed: {notes.get('ar')}")
    ar = best["ar"]["tps"]
    print(f"{'mode':<28} {'tokens/s':>9} {'vs AR':>6} {'tokens/forward':>15}")
    for mode, extra in CANDIDATES:
        name = candidate_name(mode, extra)
        if name in best:
            b = best[name]
            print(f"{name:<28} {b['tps']:>9.1f} {b['tps'] / ar:>5.2f}x {b['tpf']:>15.2f}")
        else:
            print(f"{name:<28} {'-':>9}   ({notes.get(name, 'not run')})")
    pick, _, reason = choose(rounds)
    print(f"pick: {reason}")
    print(f"PICK {pick} {best[pick]['tps']:.1f} {ar:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
