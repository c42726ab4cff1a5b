#!/usr/bin/env python3
"""Greedy streams of crossreg-server on two backends, every decoding mode.

Starts `crossreg-server --backend A` and `--backend B` on one model (loopback ports),
streams the same greedy prompts in every mode through the `crossreg` CLI and checks:
  * exactness on each backend: every mode's ids equal that backend's own AR ids
    (lossless, lossy at beta=tau=0 and n-gram are exact; this must hold bit for bit);
  * agreement across backends: backend A's ids equal backend B's, mode by mode.
Prints one markdown row per (prompt, mode) and a summary line; exit 1 on any
mismatch, 2 when a server does not start.

  python3 scripts/compare_backends.py --bin build-gpu/bin --model models/default
  ... --out docs/figures/compare_backends.h100.md   # also the table, under a line naming
                                                    # the host, the date and this command
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import figures_file

MODES = ["ar", "lossless", "lossy", "ngram"]
PROMPTS = ["Once upon a time", "def fibonacci(n):", "The little dog", "import os\n\n"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, bin_dir, model, adapter, backend, extra):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix=f"crossreg_{backend}_", suffix=".log", delete=False)
        args = [os.path.join(bin_dir, "crossreg-server"), f"--model={model}", "--host=127.0.0.1",
                f"--port={self.port}", "--metrics_port=0", "--http_port=0", f"--backend={backend}",
                # One K/V element type on both (`auto` picks bf16 on the CPU, f32 on CUDA);
                # an extra --kv_dtype after it wins.
                "--kv_dtype=f32"] + extra
        if adapter:
            args.append(f"--adapter={adapter}")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.backend = backend

    def wait_ready(self, bin_dir, timeout_s=180):
        until = time.time() + timeout_s
        while time.time() < until:
            if self.proc.poll() is not None:
                return False
            r = subprocess.run([os.path.join(bin_dir, "crossreg"), f"--server=127.0.0.1:{self.port}",
                                "--model_info", "--connect_timeout_s=1"], capture_output=True, text=True)
            if r.returncode == 0:
                return True
            time.sleep(0.5)
        return False

    def tail(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-2000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def stream_ids(bin_dir, port, prompt, mode, max_tokens, gamma):
    args = [os.path.join(bin_dir, "crossreg"), f"--server=127.0.0.1:{port}", "--format=jsonl",
            f"--prompt={prompt}", f"--mode={mode}", f"--max_tokens={max_tokens}", "--ignore_eos",
            "--temperature=0"]
    if mode != "ar":
        args.append(f"--gamma={gamma}")
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"crossreg --mode {mode} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    ids = []
    for line in r.stdout.splitlines():
        message = json.loads(line)
        if "chunk" in message:
            ids.extend(message["chunk"].get("token_ids", []))
    return ids


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="build/bin", help="directory with crossreg-server and crossreg")
    p.add_argument("--model", required=True)
    p.add_argument("--adapter", default="", help="PEFT adapter (needed for lossless/lossy unless the model bundles one)")
    p.add_argument("--backends", default="cuda,cpu", help="the two backends to compare, A,B")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--max_tokens", type=int, default=64)
    p.add_argument("--gamma", type=int, default=4)
    p.add_argument("--threads", type=int, default=0, help="CPU backend threads (0: all usable cores)")
    p.add_argument("--out", help="also write the table to this file (overwritten), e.g. docs/figures/compare_backends.<host>.md")
    args = p.parse_args()
    backend_a, backend_b = args.backends.split(",")
    modes = args.modes.split(",")
    if "ar" not in modes:
        modes.insert(0, "ar")  # the reference every mode is checked against
    extra = [f"--threads={args.threads}"] if args.threads else []
    servers = [Server(args.bin, args.model, args.adapter, b, extra) for b in (backend_a, backend_b)]
    try:
        for s in servers:
            if not s.wait_ready(args.bin):
                print(f"compare_backends: the {s.backend} server did not start:\n{s.tail()}", file=sys.stderr)
                return 2
        lines = [f"| prompt | mode | {backend_a} == {backend_a} AR | {backend_a} == {backend_b} |", "|---|---|---|---|"]
        print("\n".join(lines))
        exact_ok = agree_ok = 0
        total = 0
        for prompt in PROMPTS:
            ids = {}  # (server index, mode) -> token ids
            for i, s in enumerate(servers):
                for mode in modes:
                    ids[(i, mode)] = stream_ids(args.bin, s.port, prompt, mode, args.max_tokens, args.gamma)
            for mode in modes:
                total += 1
                exact = all(ids[(i, mode)] == ids[(i, "ar")] for i in (0, 1))
                diff = first_difference(ids[(0, mode)], ids[(1, mode)])
                exact_ok += exact
                agree_ok += diff is None
                agree = "equal" if diff is None else f"differ from token {diff}"
                shown = prompt.replace("\n", "\\n")
                lines.append(f"| {shown!r} | {mode} | {'equal' if exact else 'DIFFERENT'} | {agree} |")
                print(lines[-1])
        lines += ["", f"exactness (each mode == AR on its backend): {exact_ok}/{total}; "
                      f"{backend_a} == {backend_b}: {agree_ok}/{total}"]
        print("\n" + lines[-1])
        if args.out:
            figures_file.write(args.out, [f"model `{args.model}`, backends {args.backends}, greedy, "
                                          f"{args.max_tokens} tokens, γ {args.gamma}", ""] + lines)
        return 0 if exact_ok == total and agree_ok == total else 1
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    sys.exit(main())
