"""Shared helpers: devices, seeds, progress lines, checkpoints, the default corpus."""
import argparse
import hashlib
import json
import math
import os
import random
import sys
import time
from typing import List, Tuple

import numpy as np
import torch

# The split lives in a module of its own, free of numpy and torch, so that benchmark scripts
# run by the system Python pick the same held-out files as the trainer.
from training.corpus_split import DEFAULT_CORPUS_ROOT, is_heldout, list_corpus  # noqa: F401


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="compute device (default: auto = cuda if available)")
    p.add_argument("--seed", type=int, default=1234, help="random seed (default: 1234)")
    p.add_argument("--threads", type=int, default=0,
                   help="CPU threads for torch (default: 0 = torch's default)")
    p.add_argument("--resume", action="store_true",
                   help="continue from OUT/checkpoint.pt (same arguments)")
    p.add_argument("--log-every", type=int, default=10, help="progress line every N steps")
    p.add_argument("--ckpt-every", type=int, default=200, help="checkpoint every N steps")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but CUDA is not available")
    return torch.device(name)


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def setup(args) -> torch.device:
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    seed_all(args.seed)
    return pick_device(args.device)


def warmup_cosine_lr(step: int, lr: float, warmup: int, steps: int, min_frac: float) -> float:
    """Linear warm-up over `warmup` steps, then a cosine from `lr` to `min_frac * lr` at
    `steps` (and flat after it)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return lr * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * min(t, 1))))


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def fmt_eta(sec: float) -> str:
    sec = max(0, int(sec))
    return f"{sec // 3600:d}:{sec % 3600 // 60:02d}:{sec % 60:02d}"


class Progress:
    """Progress lines: `step N/M <metrics> tok/s T eta h:mm:ss [budget used/total]`. With a
    time budget (training/budget.py) the ETA is capped by the time left to train."""

    def __init__(self, total_steps: int, start_step: int, budget=None):
        self.total, self.t0, self.s0, self.tokens = total_steps, time.time(), start_step, 0
        self.budget = budget

    def line(self, step: int, tokens: int, **metrics) -> str:
        self.tokens += tokens
        dt = max(time.time() - self.t0, 1e-9)
        done = step - self.s0
        tps = self.tokens / dt
        eta = dt / max(done, 1) * (self.total - step)
        tail = ""
        if self.budget is not None and self.budget.enabled:
            eta = min(eta, max(self.budget.spendable(), 0.0))
            tail = " " + self.budget.describe()
        ms = " ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                      for k, v in metrics.items())
        return f"step {step}/{self.total} {ms} tok/s {tps:.0f} eta {fmt_eta(eta)}{tail}"


def save_checkpoint(path: str, state: dict) -> None:
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str, device) -> dict:
    if not os.path.exists(path):
        raise SystemExit(f"--resume: no checkpoint at {path}")
    return torch_load(path, device)


def torch_load(path: str, device="cpu"):
    """torch.load of our own files (PyTorch >= 2.6 defaults to weights_only=True)."""
    try:
        return torch.load(path, map_location=device, weights_only=False)
    except TypeError:  # very old torch without weights_only
        return torch.load(path, map_location=device)


def write_json(path: str, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


# ---- corpus ----------------------------------------------------------------------------------
def read_corpus(root: str, files: List[str]) -> Tuple[List[str], str, List[str]]:
    """Returns (texts, manifest sha256, manifest lines 'sha256  relpath')."""
    texts, lines = [], []
    for rel in files:
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {rel}")
        texts.append(data.decode("utf-8", errors="replace"))
    manifest = "\n".join(lines) + "\n"
    return texts, hashlib.sha256(manifest.encode()).hexdigest(), lines


def main_guard(fn):
    def run(argv=None):
        return fn(sys.argv[1:] if argv is None else argv)
    return run
