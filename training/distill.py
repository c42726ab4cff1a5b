"""LoRA self-distillation of the Cross-Regression predictive stream (ALGORITHM.md, "Training the
predictive stream"; paper Alg. 3) for a Hugging Face Llama directory.

python3 -m training.distill --base training/runs/pretrain/model --out training/runs/distill
1. Data: prefixes from a corpus (tokenized with BASE/tokenizer.json, byte-level BPE), each
   continued by the frozen base for --window tokens (greedy, or --gen-temperature 0.6).
2. Train: the base gives prefix K/V (no LoRA) and p_t on the clean window (control rows); the
   LoRA predictive rows see [x_last, noisy c_1..c_{w-1}] (noise: replay buffer of the model's
   own earlier argmax predictions + random tokens, then a random-length placeholder suffix)
   and minimise L = -sum_t (s_t+1) p_t.log q_t / sum_t (s_t+1).
3. Export OUT/adapter: PEFT adapter_config.json + adapter_model.safetensors +
   crossreg_adapter.json ({"placeholder_token_id", "window", "layout"}; training/README.md).
Prefixes come from --corpus (a packed corpus: train stream for training examples, held-out
stream for evaluation; its tokenizer must be the base's), or --corpus-root / --corpus-tokens.
GPU: bf16 base weights (--dtype auto), bf16 autocast, TF32, fused AdamW, SDPA; LoRA weights and
optimizer stay float32. --time-budget-s ends training in time for the final evaluation and
export (the LR is constant after warm-up, so an early stop loses steps, not a schedule).
"""
import argparse
import json
import os
import time

import numpy as np
import torch

from . import accel, common, packed_corpus
from .budget import TimeBudget, fit_steps
from .common import log
from .hf_io import load_adapter, load_model_dir, save_adapter
from .layout import (left_pad, base_prefix_kv, stream_rows_forward, generate,
                     match_run_lengths, weighted_distill_loss)
from .model import LORA_TARGETS
from .tokenizer import ByteBPETokenizer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training.distill", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--base", default="training/runs/pretrain/model", help="HF model directory")
    p.add_argument("--out", default="training/runs/distill", help="run directory")
    p.add_argument("--corpus", default="",
                   help="packed corpus directory (python3 -m training corpus) for the prefixes; "
                        "empty = --corpus-root or --corpus-tokens")
    p.add_argument("--corpus-root", default=common.DEFAULT_CORPUS_ROOT,
                   help="directory whose *.py files give the prefixes")
    p.add_argument("--corpus-tokens", default="",
                   help="alternative to --corpus-root: a .npy of token ids (for models whose "
                        "tokenizer is not byte-level BPE)")
    p.add_argument("--max-files", type=int, default=0, help="use only the first N files (0=all)")
    p.add_argument("--holdout-pct", type=float, default=5.0,
                   help="percent of corpus files used only for evaluation prefixes")
    p.add_argument("--n-examples", type=int, default=8192, help="training examples to generate")
    p.add_argument("--n-eval", type=int, default=256, help="evaluation examples")
    p.add_argument("--prefix-min", type=int, default=8)
    p.add_argument("--prefix-max", type=int, default=192)
    p.add_argument("--window", type=int, default=16, help="w: predictive rows per example")
    p.add_argument("--gen-temperature", type=float, default=0.0,
                   help="base continuation sampling temperature (0 = greedy; paper: 0.6)")
    p.add_argument("--gen-batch", type=int, default=64)
    p.add_argument("--placeholder-token-id", type=int, default=-1,
                   help="token id for empty draft slots (default: '<|draft|>' from the tokenizer)")
    p.add_argument("--rank", type=int, default=32, help="LoRA rank r")
    p.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha (scale = alpha / r)")
    p.add_argument("--targets", default=",".join(LORA_TARGETS), help="LoRA target modules")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--noise-max", type=float, default=0.5,
                   help="per example, a corruption rate ~ U(0, noise-max) for each draft slot")
    p.add_argument("--replay-frac", type=float, default=0.75,
                   help="corrupted slots take the replayed own prediction with this probability "
                        "(else a uniform random token)")
    p.add_argument("--placeholder-prob", type=float, default=0.5,
                   help="probability that an example gets a random-length placeholder suffix")
    p.add_argument("--fork-frac", type=float, default=0.0,
                   help="fraction of examples in the forked-refill layout: clean rows up to a random "
                        "point, then placeholders (the engine's forks and placeholder tails)")
    p.add_argument("--placeholder-weight", type=float, default=1.0,
                   help="loss weight of placeholder rows (other rows weigh s_t + 1)")
    p.add_argument("--placeholder-decay", type=float, default=1.0,
                   help="the k-th placeholder row of a run (k = 0 right after the last token row) "
                        "weighs placeholder-weight * decay^k: a fork's later drafts are accepted "
                        "only after its first ones, so they matter less (1 = equal weights)")
    p.add_argument("--init-adapter", default="",
                   help="start from this PEFT adapter instead of a fresh LoRA (its rank, alpha "
                        "and targets replace --rank, --alpha and --targets)")
    p.add_argument("--lr-decay", choices=["none", "cosine"], default="none",
                   help="after warm-up: constant LR, or cosine to a tenth of --lr by --steps")
    p.add_argument("--auto-steps", action="store_true",
                   help="with --time-budget-s: refit --steps to the measured step time until "
                        "warm-up ends, so a cosine schedule reaches its end inside the budget")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16", "auto"],
                   help="base weight dtype on the device (LoRA stays float32); auto = bf16 on "
                        "CUDA, f32 on CPU")
    p.add_argument("--time-budget-s", type=float, default=0,
                   help="wall-clock budget from start-up (0 = none): stop training while "
                        "--reserve-s is left for the final evaluation and export")
    p.add_argument("--reserve-s", type=float, default=20,
                   help="seconds kept back from --time-budget-s (raised to the measured "
                        "evaluation time)")
    p.add_argument("--ckpt-every-s", type=float, default=0,
                   help="also checkpoint when this many seconds passed since the last one (0=off)")
    common.add_common_args(p)
    return p


# ---- data ------------------------------------------------------------------------------------
def packed_streams(a, base_dir: str):
    """Train/held-out streams of a packed corpus, after checking that the base model reads the
    same token ids (its tokenizer.json has the corpus's vocabulary and merges)."""
    meta, tok_path, streams = packed_corpus.load(a.corpus)
    base_tok_path = os.path.join(base_dir, "tokenizer.json")
    if os.path.exists(base_tok_path):
        ours, theirs = ByteBPETokenizer.load(tok_path), ByteBPETokenizer.load(base_tok_path)
        if (ours.vocab, ours.merges, ours.specials) != (theirs.vocab, theirs.merges,
                                                        theirs.specials):
            raise SystemExit(f"{base_tok_path} differs from the corpus tokenizer {tok_path}: "
                             f"the base was not pretrained on this corpus")
    return streams["train"], streams["heldout"], {
        "corpus_dir": os.path.abspath(a.corpus), "manifest_sha256": meta["manifest_sha256"],
        "n_files": meta["files"]["kept"], "train_tokens": int(len(streams["train"])),
        "eval_tokens": int(len(streams["heldout"]))}


def corpus_streams(a, base_dir: str):
    if a.corpus:
        return packed_streams(a, base_dir)
    if a.corpus_tokens:
        ids = np.load(a.corpus_tokens).astype(np.int64)
        cut = int(len(ids) * (1 - a.holdout_pct / 100))
        return ids[:cut], ids[cut:], {"corpus_tokens": a.corpus_tokens}
    tpath = os.path.join(base_dir, "tokenizer.json")
    tok = ByteBPETokenizer.load(tpath)
    files = common.list_corpus(a.corpus_root)
    if a.max_files:
        files = files[:a.max_files]
    texts, sha, _ = common.read_corpus(a.corpus_root, files)
    streams = {False: [], True: []}
    for rel, t in zip(files, texts):
        streams[common.is_heldout(rel, a.holdout_pct)].extend(tok.encode(t, allow_special=False))
    if not streams[True]:  # tiny corpora: fall back to the tail of the train stream
        n = max(len(streams[False]) // 10, 1)
        streams[True] = streams[False][-n:]
    return (np.array(streams[False], np.int64), np.array(streams[True], np.int64),
            {"corpus_root": a.corpus_root, "n_files": len(files), "manifest_sha256": sha})


def make_examples(model, stream: np.ndarray, n: int, a, seed: int, device):
    """Prefixes [n, prefix_max] (left-aligned, -1 padded), lengths [n], continuations [n, w]."""
    rng = np.random.default_rng(seed)
    hi = min(a.prefix_max, len(stream) - 1)
    lo = min(a.prefix_min, hi)
    lens = rng.integers(lo, hi + 1, n)
    starts = rng.integers(0, len(stream) - lens + 1)
    prefixes = [stream[s:s + L].tolist() for s, L in zip(starts, lens)]
    g = torch.Generator().manual_seed(seed)
    # Batches of similar lengths: a left-padded batch costs its longest prefix, so sorting
    # saves most of the padding when prefixes range up to the context.
    order = np.argsort(lens, kind="stable")
    cont = torch.empty((n, a.window), dtype=torch.long)
    t0 = time.time()
    for i in range(0, n, a.gen_batch):
        ids = order[i:i + a.gen_batch]
        cont[torch.from_numpy(ids)] = generate(model, [prefixes[j] for j in ids], a.window,
                                               a.gen_temperature, g, device=device).cpu()
        if (i // a.gen_batch) % 10 == 0:
            log(f"data: generated {min(i + a.gen_batch, n)}/{n} continuations "
                f"({time.time() - t0:.0f}s)")
    pre = torch.full((n, a.prefix_max), -1, dtype=torch.long)
    for b, p in enumerate(prefixes):
        pre[b, :len(p)] = torch.tensor(p)
    return {"prefix": pre, "len": torch.tensor(lens), "cont": cont}


def load_or_make_data(model, a, device):
    path = os.path.join(a.out, "data.pt")
    key = {k: getattr(a, k) for k in ("base", "corpus", "corpus_root", "corpus_tokens", "max_files",
                                      "holdout_pct", "n_examples", "n_eval", "prefix_min",
                                      "prefix_max", "window", "gen_temperature", "seed")}
    key["base"] = os.path.abspath(a.base)
    if a.corpus:  # the same directory rebuilt from other sources is other data
        key["corpus"] = packed_corpus.load_meta(a.corpus)["manifest_sha256"]
    if os.path.exists(path):
        d = common.torch_load(path)
        if d["key"] == key:
            log(f"reusing distillation data {path}")
            return d
    train_s, eval_s, info = corpus_streams(a, a.base)
    log(f"data: {len(train_s)} train / {len(eval_s)} eval corpus tokens")
    d = {"key": key, "info": info,
         "train": make_examples(model, train_s, a.n_examples, a, a.seed, device),
         "eval": make_examples(model, eval_s, a.n_eval, a, a.seed + 1, device)}
    torch.save(d, path)
    return d


# ---- one batch in the inference layout ------------------------------------------------------
def batch_tensors(data, idx, device):
    """-> cached prefix (ids, valid, pos) [B, S], clean rows [B, w], row positions [B, w]."""
    lens = data["len"][idx]
    cached = [data["prefix"][i, :L - 1].tolist() for i, L in zip(idx.tolist(), lens.tolist())]
    ids, valid, pos = left_pad(cached, 0, device)
    x_last = data["prefix"][idx, lens - 1]
    w = data["cont"].shape[1]
    rows = torch.cat([x_last[:, None], data["cont"][idx, :w - 1]], 1).to(device)
    row_pos = (lens[:, None] - 1 + torch.arange(w)[None]).to(device)
    return ids, valid, pos, rows, row_pos


def add_noise(clean, idx, replay, has_replay, a, vocab, placeholder, gen):
    """Noisy window (Alg. 3): corrupt draft slots 1..w-1 with the model's replayed predictions or
    random tokens, then maybe a placeholder suffix (empty slots at inference)."""
    B, w = clean.shape
    noisy = clean.clone().cpu()
    rate = torch.rand(B, 1, generator=gen) * a.noise_max
    corrupt = torch.rand(B, w, generator=gen) < rate
    corrupt[:, 0] = False  # row 0 is x_last, committed
    use_replay = (torch.rand(B, w, generator=gen) < a.replay_frac) & has_replay[idx][:, None]
    rand_tok = torch.randint(0, vocab, (B, w), generator=gen)
    src = torch.where(use_replay, replay[idx], rand_tok)
    noisy = torch.where(corrupt, src, noisy)
    has_ph = torch.rand(B, generator=gen) < a.placeholder_prob
    u = torch.randint(1, w, (B,), generator=gen)  # suffix length 1..w-1
    col = torch.arange(w)[None]
    ph = has_ph[:, None] & (col >= (w - u)[:, None])
    noisy = torch.where(ph, torch.full_like(noisy, placeholder), noisy)
    # Forked-refill layout: the accepted drafts are the clean continuation up to some
    # j >= 0, every slot after them is a placeholder.
    fork = torch.rand(B, generator=gen) < a.fork_frac
    j = torch.randint(0, w - 1, (B,), generator=gen)
    fork_rows = torch.where(col <= j[:, None], clean.cpu(), torch.full_like(noisy, placeholder))
    noisy = torch.where(fork[:, None], fork_rows, noisy)
    return noisy.to(clean.device)


def placeholder_run_index(rows: torch.Tensor, placeholder: int) -> torch.Tensor:
    """[B, w] -> k for each placeholder row (0 for the first after a token row, 1 for the
    next ...), -1 for token rows."""
    is_ph = rows == placeholder
    k = torch.full_like(rows, -1)
    run = torch.full_like(rows[:, 0], -1)
    for t in range(rows.shape[1]):
        run = torch.where(is_ph[:, t], run + 1, torch.full_like(run, -1))
        k[:, t] = run
    return k


def row_weights(rows, s, placeholder, placeholder_weight=1.0, placeholder_decay=1.0):
    """Loss weight per row: s_t + 1 for token rows (Alg. 3), placeholder_weight *
    placeholder_decay^k for the k-th placeholder row of a run; None when that is s_t + 1."""
    if placeholder is None or (placeholder_weight == 1.0 and placeholder_decay == 1.0):
        return None
    k = placeholder_run_index(rows, placeholder)
    ph = placeholder_weight * torch.pow(torch.full_like(s, placeholder_decay, dtype=torch.float),
                                        k.clamp(min=0).float())
    return torch.where(k >= 0, ph, (s + 1).float())


def forward_batch(model, data, idx, device, noisy_fn=None, autocast=None, placeholder=None,
                  placeholder_weight=1.0, placeholder_decay=1.0):
    ids, valid, pos, clean, row_pos = batch_tensors(data, idx, device)
    with torch.no_grad(), autocast():
        _, kv = base_prefix_kv(model, ids, valid, pos, logits="none")  # control prefix K/V
        p_logits, _ = stream_rows_forward(model, kv, valid, clean, row_pos, use_lora=False)
        p = torch.softmax(p_logits.float(), -1)                    # p_t on the clean window
    rows = noisy_fn(clean) if noisy_fn else clean
    with autocast():
        q_logits, _ = stream_rows_forward(model, kv, valid, rows, row_pos, use_lora=True)
    s = match_run_lengths(rows, clean)
    weights = row_weights(rows, s, placeholder, placeholder_weight, placeholder_decay)
    return weighted_distill_loss(q_logits, p, s, weights), q_logits, p, rows, clean


@torch.no_grad()
def evaluate(model, data, a, device, autocast, placeholder):
    """Held-out prefixes, two windows: `clean` (rows = the base's own continuation; B=0 is
    perfect here, so this measures what the adapter must not break) and `empty` (rows =
    [x_last, placeholder ...], the first forward of a request: k-ahead prediction). Metrics:
    distillation loss, argmax_agree (fraction of rows with argmax q = argmax p) and
    leading_agree (mean number of leading rows that agree: the greedy acceptance length if
    every draft came from its row)."""
    out = {}
    n = len(data["len"])
    for name in ("clean", "empty"):
        def fill(clean):
            rows = clean.clone()
            rows[:, 1:] = placeholder
            return rows
        tot, agree, lead, cnt = 0.0, 0.0, 0.0, 0
        per_row, fork_lead = None, 0.0
        for i in range(0, n, a.batch):
            idx = torch.arange(i, min(i + a.batch, n))
            loss, q, p, _, _ = forward_batch(model, data, idx, device,
                                             fill if name == "empty" else None, autocast)
            eq = (q.argmax(-1) == p.argmax(-1)).float()
            tot += loss.item() * len(idx)
            agree += eq.mean(1).sum().item()
            lead += eq.cumprod(1).sum(1).sum().item()
            rows_sum = eq.sum(0).cpu()
            per_row = rows_sum if per_row is None else per_row + rows_sum
            fork_lead += eq[:, 1:].cumprod(1).sum(1).sum().item()
            cnt += len(idx)
        out.update({f"{name}_loss": tot / cnt, f"{name}_argmax_agree": agree / cnt,
                    f"{name}_leading_agree": lead / cnt})
        if name == "empty":
            # What a fork's placeholders earn: rows 1, 2, ... predict 2, 3, ... tokens ahead of
            # the committed text, and a fork's drafts are accepted while they agree.
            out["empty_row_agree"] = [round(v, 4) for v in (per_row[:6] / cnt).tolist()]
            out["empty_fork_accepted"] = fork_lead / cnt
    return out


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    budget = TimeBudget(a.time_budget_s, a.reserve_s)
    if a.auto_steps and not budget.enabled:
        raise SystemExit("--auto-steps fits the schedule to --time-budget-s: pass both")
    os.makedirs(a.out, exist_ok=True)
    device = common.setup(a)
    accel.configure(device)
    if a.dtype == "auto":
        a.dtype = "bf16" if device.type == "cuda" else "f32"
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = load_model_dir(a.base, dtype=dtype, device=device)
    for p_ in model.parameters():
        p_.requires_grad_(False)
    V = model.config.vocab_size
    placeholder = a.placeholder_token_id
    if placeholder < 0:
        tpath = os.path.join(a.base, "tokenizer.json")
        tid = ByteBPETokenizer.load(tpath).token_id("<|draft|>") if os.path.exists(tpath) else None
        if tid is None:
            raise SystemExit("no '<|draft|>' token in the tokenizer: pass --placeholder-token-id")
        placeholder = tid
    if a.window < 2 or a.prefix_min < 2:
        raise SystemExit("--window and --prefix-min must be >= 2")

    def autocast():
        return accel.autocast(device)

    model.eval()
    t0 = time.time()
    data = load_or_make_data(model, a, device)
    data_s = time.time() - t0
    targets = [t for t in a.targets.split(",") if t]
    if a.init_adapter:
        cfg = load_adapter(model, a.init_adapter)
        a.rank, a.alpha = int(cfg["r"]), float(cfg["lora_alpha"])
        targets = list(cfg["target_modules"])
        log(f"LoRA initialised from {a.init_adapter}")
    else:
        model.add_lora(a.rank, a.alpha, targets, seed=a.seed)
    model.to(device)
    lora = model.lora_parameters()
    opt, opt_kind = accel.adamw(lora, device, lr=a.lr, betas=(0.9, 0.99), weight_decay=0.0)
    n_train = len(data["train"]["len"])
    w = a.window
    replay = torch.zeros(n_train, w, dtype=torch.long)     # replay[i, t]: own argmax for row t
    has_replay = torch.zeros(n_train, dtype=torch.bool)
    ckpt_path = os.path.join(a.out, "checkpoint.pt")
    step, history = 0, []
    if a.resume:
        ck = common.load_checkpoint(ckpt_path, device)
        named = dict(model.named_parameters())
        with torch.no_grad():
            for k, v in ck["lora"].items():
                named[k].copy_(v)
        opt.load_state_dict(ck["opt"])
        step, history = ck["step"], ck["history"]
        replay, has_replay = ck["replay"], ck["has_replay"]
        log(f"resumed from {ckpt_path} at step {step}")

    def checkpoint():
        common.save_checkpoint(ckpt_path, {
            "lora": {n: p_.detach().cpu() for n, p_ in model.named_parameters() if "lora_" in n},
            "opt": opt.state_dict(), "step": step, "history": history, "replay": replay,
            "has_replay": has_replay, "args": vars(a)})

    log(f"LoRA r={a.rank} alpha={a.alpha} on {targets}: "
        f"{sum(p_.numel() for p_ in lora) / 1e6:.2f}M trainable; placeholder id {placeholder}; "
        f"base {a.dtype}, AdamW {opt_kind}, device {device} (data {data_s:.0f}s)"
        + (f"; {budget.describe()}" if budget.enabled else ""))

    eval_s = 0.0

    def run_eval():
        nonlocal eval_s
        t = time.time()
        ev = evaluate(model, data["eval"], a, device, autocast, placeholder)
        history.append({"step": step, **ev})
        log(f"eval step {step}: {json.dumps(ev)}")
        eval_s = time.time() - t
        budget.set_need(1.5 * eval_s + 5)  # the final evaluation must fit

    if step == 0:
        run_eval()
    prog = common.Progress(a.steps, step, budget)
    run_loss, run_n = 0.0, 0
    step_s, stopped_by_budget, last_ckpt = None, False, time.time()
    # --auto-steps times steps from the 10th on: the first ones pay for allocation and
    # kernel selection (2.4 s against 0.17 s a step on an H100), which an average would carry.
    calib_step, calib_t = None, None
    while step < a.steps:
        if budget.enabled and step_s is not None and not budget.allows(2 * step_s):
            stopped_by_budget = True
            log(f"time budget: stopping at step {step} of {a.steps} "
                f"({budget.left():.0f}s left for evaluation and export)")
            break
        t_step = time.time()
        gen = torch.Generator().manual_seed(a.seed * 1000003 + step)
        idx = torch.randint(0, n_train, (a.batch,), generator=gen)
        if a.lr_decay == "cosine":
            lr = common.warmup_cosine_lr(step, a.lr, a.warmup, a.steps, 0.1)
        else:
            lr = a.lr * min(1.0, (step + 1) / a.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        noisy_fn = lambda clean: add_noise(clean, idx, replay, has_replay, a, V, placeholder, gen)
        loss, q, _, _, _ = forward_batch(model, data["train"], idx, device, noisy_fn, autocast, placeholder,
                                         a.placeholder_weight, a.placeholder_decay)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lora, 1.0)
        opt.step()
        # replay buffer: row t-1 predicts slot t
        replay[idx, 1:] = q.argmax(-1)[:, :w - 1].cpu()
        has_replay[idx] = True
        step += 1
        run_loss += loss.item()  # the replay update above synchronised already
        run_n += 1
        dt = time.time() - t_step
        step_s = dt if step_s is None else 0.9 * step_s + 0.1 * dt
        # --auto-steps: the step count fitted to the budget at every step of the warm-up (the
        # warm-up LR does not depend on it); after that the cosine runs to the fitted end.
        if a.auto_steps and budget.enabled and step <= a.warmup:
            if calib_step is None and step >= min(10, a.warmup // 2):
                calib_step, calib_t = step, time.time()
            timed = calib_step is not None and step >= calib_step + 5
            per_step = (time.time() - calib_t) / (step - calib_step) if timed else step_s
            fit = fit_steps(step, budget.spendable(), per_step, a.eval_every,
                            eval_s / max(per_step, 1e-9))
            a.steps = prog.total = max(fit, step + 1)
            if step == a.warmup:
                log(f"auto-steps: {per_step * 1000:.1f} ms/step -> {a.steps} steps fit the budget")
        if step % a.log_every == 0 or step == a.steps:
            log(prog.line(step, a.batch * w * run_n, loss=run_loss / run_n))
            run_loss, run_n = 0.0, 0
        if step % a.eval_every == 0 or step == a.steps:
            run_eval()
        due_time = a.ckpt_every_s > 0 and time.time() - last_ckpt >= a.ckpt_every_s
        if step % a.ckpt_every == 0 or step == a.steps or due_time:
            checkpoint()
            last_ckpt = time.time()
    if stopped_by_budget:
        if history[-1]["step"] != step:
            run_eval()
        checkpoint()
    adir = os.path.join(a.out, "adapter")
    save_adapter(model, adir, a.rank, a.alpha, os.path.abspath(a.base), placeholder, w)
    common.write_json(os.path.join(a.out, "run.json"), {
        "args": vars(a), "data": data["info"], "history": history, "placeholder": placeholder,
        "row_tokens_per_s_this_session": prog.tokens / max(time.time() - prog.t0, 1e-9),
        "device": str(device), "accel": accel.describe(device), "steps_done": step,
        "stopped_by_budget": stopped_by_budget, "data_s": round(data_s, 1),
        "wall_s": round(budget.elapsed(), 1)})
    log(f"exported {adir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
