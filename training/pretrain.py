"""Pretrain the default model from scratch: byte-level BPE tokenizer + Llama model.

python3 -m training.pretrain --out training/runs/pretrain [--corpus DIR] [--steps N]
Data, either:
  --corpus DIR   a packed corpus from `python3 -m training corpus` (scripts/build_corpus.sh):
                 its tokenizer and train/held-out token streams are used as they are;
  (default)      --corpus-root: tokenizer and token streams built here from a directory's *.py
                 files, cached in OUT/data (OUT/corpus_files.txt is the manifest).
GPU paths (feature-detected; CPU torch 1.13 runs the same code): bf16 autocast, TF32, fused
AdamW, scaled_dot_product_attention, --compile. --time-budget-s stops in time to evaluate,
checkpoint and export; --auto-steps sizes the cosine schedule to that budget.
Writes OUT/checkpoint.pt, OUT/model/ (HF directory; --max-shard-bytes shards it), OUT/run.json.
--hybrid pretrains a model that drafts for itself (TiDAR's objective over crossreg's outcome
blocks): next-token loss on the text plus, 1:1, the loss of placeholder blocks anchored in it;
the exported config.json says so ("crossreg_draft"), and the engine serves it lossless with
no adapter. --init-model DIR starts from a trained model's weights and architecture instead of
a random initialisation (with --hybrid: teach an existing base to draft for itself).
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import accel, common, packed_corpus
from .budget import TimeBudget, fit_steps
from .common import log
from .hf_io import load_model_dir, save_model_dir, DTYPES
from .layout import block_rows_mask, block_positions
from .model import LlamaConfig, LlamaForCausalLM, count_params
from .token_batches import TokenStream
from .tokenizer import ByteBPETokenizer, train_bpe, DEFAULT_SPECIALS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training.pretrain", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default="training/runs/pretrain", help="run directory")
    p.add_argument("--corpus", default="",
                   help="packed corpus directory (python3 -m training corpus); empty = build "
                        "tokenizer and streams from --corpus-root in OUT")
    p.add_argument("--corpus-root", default=common.DEFAULT_CORPUS_ROOT,
                   help="directory whose *.py files form the corpus (test dirs and "
                        "site/dist-packages skipped)")
    p.add_argument("--max-files", type=int, default=0, help="use only the first N files (0=all)")
    p.add_argument("--holdout-pct", type=float, default=5.0,
                   help="percent of files held out for evaluation (by sha256 of the path)")
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--tokenizer-max-bytes", type=int, default=0,
                   help="train the tokenizer on at most this many bytes of text (0=all)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=704)
    p.add_argument("--max-pos", type=int, default=1024, help="max_position_embeddings")
    p.add_argument("--untied", action="store_true", help="separate lm_head (default: tied)")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-frac", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-batches", type=int, default=8)
    p.add_argument("--export-dtype", default="f32", choices=["f32", "bf16", "f16"])
    p.add_argument("--max-shard-bytes", type=int, default=0,
                   help="split the exported weights into safetensors shards of at most this "
                        "many bytes (0 = one model.safetensors)")
    p.add_argument("--time-budget-s", type=float, default=0,
                   help="wall-clock budget from start-up (0 = none): stop taking steps while "
                        "--reserve-s is left for the final evaluation, checkpoint and export")
    p.add_argument("--reserve-s", type=float, default=20,
                   help="seconds kept back from --time-budget-s (raised to what evaluation and "
                        "checkpointing are measured to take)")
    p.add_argument("--auto-steps", action="store_true",
                   help="with --time-budget-s: after --calibrate-steps steps, set --steps to "
                        "what fits the budget (the cosine schedule then ends on time)")
    p.add_argument("--calibrate-steps", type=int, default=20,
                   help="steps timed (after the first, which includes compilation) for --auto-steps")
    p.add_argument("--ckpt-every-s", type=float, default=0,
                   help="also checkpoint when this many seconds passed since the last one (0=off)")
    p.add_argument("--hybrid", action="store_true",
                   help="pretrain a model that drafts for itself in the outcome-block layout "
                        "(docs/algorithm.md): next-token loss plus, 1:1, the loss of blocks of "
                        "placeholder rows anchored at random points of each window, bidirectional "
                        "inside a block, attending the text before their anchor")
    p.add_argument("--hybrid-anchors", type=int, default=4, help="--hybrid: blocks per window")
    p.add_argument("--hybrid-rows", type=int, default=8,
                   help="--hybrid: rows per block (serve with --fork_depth of at most this)")
    p.add_argument("--hybrid-weight", type=float, default=1.0,
                   help="--hybrid: weight of the block loss against the next-token loss's 1")
    p.add_argument("--hybrid-target", default="text", choices=["text", "self"],
                   help="--hybrid: what block row i after anchor a learns: the text's token "
                        "a+2+i (text), or the model's own next-token distribution there, read "
                        "off its clean rows without gradient (self: the drafts it must match "
                        "when serving are its own greedy tokens)")
    p.add_argument("--init-model", default="",
                   help="HF model directory to start from (its config.json sets the "
                        "architecture; --hidden/--layers/... are ignored); its tokenizer.json "
                        "must be the corpus's")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the training loss (torch >= 2.0; ignored with a note "
                        "otherwise)")
    common.add_common_args(p)
    return p


def lr_at(step: int, a) -> float:
    return common.warmup_cosine_lr(step, a.lr, a.warmup, a.steps, a.min_lr_frac)


def prepare_data(a):
    """Corpus manifest, held-out split, tokenizer and token streams (cached in OUT)."""
    files = common.list_corpus(a.corpus_root)
    if a.max_files:
        files = files[:a.max_files]
    if not files:
        raise SystemExit(f"no *.py files under {a.corpus_root}")
    texts, sha, lines = common.read_corpus(a.corpus_root, files)
    with open(os.path.join(a.out, "corpus_files.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    held = [common.is_heldout(r, a.holdout_pct) for r in files]
    if not any(held) and len(files) > 1:  # tiny corpora: hold out the last file
        held[-1] = True
    data_dir = os.path.join(a.out, "data")
    os.makedirs(data_dir, exist_ok=True)
    meta = {"corpus_root": a.corpus_root, "n_files": len(files), "manifest_sha256": sha,
            "holdout_pct": a.holdout_pct, "n_heldout": int(sum(held)),
            "vocab_size": a.vocab_size, "tokenizer_max_bytes": a.tokenizer_max_bytes,
            "bytes": int(sum(len(t.encode()) for t in texts))}
    mpath, tpath = os.path.join(data_dir, "meta.json"), os.path.join(a.out, "tokenizer.json")
    if os.path.exists(mpath) and os.path.exists(tpath):
        import json
        with open(mpath) as f:
            old = json.load(f)
        if {k: old.get(k) for k in meta} == meta:
            log(f"reusing tokenizer and token streams in {a.out} (manifest {sha[:16]})")
            return (ByteBPETokenizer.load(tpath), np.load(os.path.join(data_dir, "train.npy")),
                    np.load(os.path.join(data_dir, "eval.npy")), old)
    log(f"corpus: {len(files)} files, {meta['bytes']} bytes, {sum(held)} held out, "
        f"manifest sha256 {sha}")
    train_texts = [t for t, h in zip(texts, held) if not h]
    tok_texts, n = [], 0
    for t in train_texts:
        if a.tokenizer_max_bytes and n >= a.tokenizer_max_bytes:
            break
        tok_texts.append(t)
        n += len(t.encode())
    t0 = time.time()
    tok = train_bpe(tok_texts, a.vocab_size, DEFAULT_SPECIALS, log=log)
    log(f"tokenizer: {tok.vocab_size} tokens in {time.time() - t0:.1f}s")
    tok.save(tpath)
    bos, eos = tok.specials["<|bos|>"], tok.specials["<|eos|>"]
    streams = {False: [], True: []}
    t0 = time.time()
    for t, h in zip(texts, held):
        streams[h].extend([bos] + tok.encode(t, allow_special=False) + [eos])
    dt = np.uint16 if tok.vocab_size <= 65536 else np.int32
    train_ids, eval_ids = np.array(streams[False], dt), np.array(streams[True], dt)
    log(f"encoded {len(train_ids)} train / {len(eval_ids)} held-out tokens in "
        f"{time.time() - t0:.1f}s ({meta['bytes'] / max(1, len(train_ids) + len(eval_ids)):.2f}"
        f" bytes/token)")
    np.save(os.path.join(data_dir, "train.npy"), train_ids)
    np.save(os.path.join(data_dir, "eval.npy"), eval_ids)
    meta.update({"train_tokens": int(len(train_ids)), "eval_tokens": int(len(eval_ids))})
    common.write_json(mpath, meta)
    return tok, train_ids, eval_ids, meta


def load_packed(a):
    """Tokenizer and token streams of a packed corpus (training/packed_corpus.py)."""
    meta, tok_path, streams = packed_corpus.load(a.corpus)
    tok = ByteBPETokenizer.load(tok_path)
    if tok.vocab_size != meta["tokenizer"]["vocab_size"]:
        raise SystemExit(f"{tok_path}: vocab {tok.vocab_size} != corpus.json's "
                         f"{meta['tokenizer']['vocab_size']}")
    info = {"corpus_dir": os.path.abspath(a.corpus), "manifest_sha256": meta["manifest_sha256"],
            "n_files": meta["files"]["kept"], "n_heldout": meta["files"]["heldout"],
            "holdout_pct": meta["holdout_pct"], "bytes": meta["bytes"]["total"],
            "vocab_size": tok.vocab_size, "tokenizer_sha256": meta["tokenizer"]["sha256"],
            "train_tokens": int(len(streams["train"])), "eval_tokens": int(len(streams["heldout"])),
            "bytes_per_token": meta["bytes_per_token"],
            "sources": {k: v["debian"] for k, v in meta["sources"].items()}}
    log(f"corpus {a.corpus}: {info['n_files']} files, {info['train_tokens']} train / "
        f"{info['eval_tokens']} held-out tokens, manifest sha256 {info['manifest_sha256']}")
    tok.save(os.path.join(a.out, "tokenizer.json"))
    return tok, streams["train"], streams["heldout"], info


@torch.no_grad()
def evaluate(loss_fn, stream: TokenStream, a) -> float:
    """Mean loss over fixed, evenly spaced windows of `stream`."""
    starts = stream.eval_starts(a.eval_batches * a.batch, a.seq_len)
    if len(starts) == 0:
        return float("nan")
    tot = torch.zeros((), device=stream.device)
    n = 0
    for i in range(0, len(starts), a.batch):
        x, y = stream.windows(starts[i:i + a.batch], a.seq_len)
        tot += loss_fn(x, y).float()
        n += 1
    return tot.item() / n


class Trainer:
    """Model, optimizer and the step/eval/checkpoint loop of one pretraining run."""

    def __init__(self, a, tok, device, budget: TimeBudget):
        self.a, self.device, self.budget = a, device, budget
        cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=a.hidden,
                          intermediate_size=a.ffn, num_hidden_layers=a.layers,
                          num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                          max_position_embeddings=a.max_pos, tie_word_embeddings=not a.untied,
                          bos_token_id=tok.specials["<|bos|>"],
                          eos_token_id=tok.specials["<|eos|>"])
        if a.init_model:
            self.model = load_model_dir(a.init_model)
            cfg = self.model.config
            if cfg.vocab_size != tok.vocab_size:
                raise SystemExit(f"--init-model {a.init_model}: vocab_size {cfg.vocab_size} != the "
                                 f"corpus tokenizer's {tok.vocab_size}")
            cfg.extra.pop("crossreg_draft", None)
        else:
            self.model = LlamaForCausalLM(cfg)
            self.model.init_weights(a.seed)
        self.cfg = cfg
        self.model.to(device)
        self.model.inv_freq  # move the RoPE table now, not inside a compiled graph
        decay = [p for n, p in self.model.named_parameters() if p.dim() >= 2]
        no_decay = [p for n, p in self.model.named_parameters() if p.dim() < 2]
        self.opt, self.opt_kind = accel.adamw(
            [{"params": decay, "weight_decay": a.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}],
            device, lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
        self.loss_fn, self.compiled = accel.maybe_compile(self._loss, a.compile)
        self.compile_checked = False  # compilation happens (and may fail) at the first call
        self.ckpt_path = os.path.join(a.out, "checkpoint.pt")
        self.step, self.history, self.planned = 0, [], None
        self.placeholder = tok.specials.get("<|draft|>", -1)
        self.anchor_offset = 0
        if a.hybrid:
            if self.placeholder < 0:
                raise SystemExit("--hybrid needs a '<|draft|>' token in the tokenizer")
            if a.hybrid_anchors < 1 or a.hybrid_rows < 1:
                raise SystemExit("--hybrid-anchors and --hybrid-rows must be >= 1")
            # block_rows: the depth the blocks are trained at; a server serves requests that
            # leave fork_depth unset at min(gamma, block_rows), not deeper untrained rows.
            cfg.extra["crossreg_draft"] = {"placeholder_token_id": int(self.placeholder),
                                           "draft_layout": "blocks", "block_rows": int(a.hybrid_rows)}

    def _loss(self, x, y):
        if self.a.hybrid:
            clean, blocks = self._hybrid_parts(x, y)
            return clean + self.a.hybrid_weight * blocks
        with accel.autocast(self.device):
            logits, _ = self.model(x)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))

    def _hybrid_parts(self, x, y, agreement=None):
        """--hybrid: (next-token loss, outcome-block loss). Window b's blocks start after the
        anchors a (its text 0 .. a visible, as the engine's block after outcome n sees the
        committed text and the accepted drafts); block row i at position a+1+i is scored on
        the token at a+2+i, where the window has it. Anchors are evenly spread with an offset
        that moves every step (self.anchor_offset), so evaluation is repeatable.
        agreement (a float64 tensor [2 + rows]) gathers what greedy serving accepts: per block,
        whether each row's argmax equals the model's own argmax at its target (given the text),
        the leading run of such rows up to depth 4 (the drafts a γ-4 step would accept), and
        the count of blocks; only blocks whose first 4 targets lie in the window count."""
        B, T = x.shape
        A, f = self.a.hybrid_anchors, self.a.hybrid_rows
        with accel.autocast(self.device):
            logits, kv = self.model(x, return_kv=True)
            clean = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
            span = T - 1
            base = (torch.arange(A, device=x.device) * span) // A
            anchors = ((base[None] + self.anchor_offset + 13 * torch.arange(B, device=x.device)[:, None])
                       % span)                                                    # [B, A]
            # The window plays the control rows [x_0 .. x_{T-1}] of layout.block_rows_mask
            # (no cached prefix): a block after anchor a sees x_0 .. x_a and its own rows.
            a3 = anchors[:, None, :]
            mask = block_rows_mask(torch.zeros(B, 1, 0, dtype=torch.bool, device=x.device), T, a3, f)
            pos = block_positions(torch.zeros(B, 1, dtype=torch.long, device=x.device), a3, f)  # a+1 ..
            rows = torch.full((B, A * f), self.placeholder, dtype=torch.long, device=x.device)
            q, _ = self.model(rows, pos, kv, mask)
        target = pos + 1
        valid = target <= T
        if self.a.hybrid_target == "self":
            # The clean row at position p predicts token p+1: row target-1 is the model's own
            # distribution over the block row's target, given the text before it.
            teacher = torch.gather(logits.detach().float(), 1,
                                   (target - 1).clamp(max=T - 1)[..., None].expand(-1, -1, logits.shape[-1]))
            ce = -(F.softmax(teacher, -1) * F.log_softmax(q.float(), -1)).sum(-1).reshape(-1)
        else:
            full = torch.cat([x, y[:, -1:]], 1)                                   # tokens 0 .. T
            tgt = torch.gather(full, 1, target.clamp(max=T))
            ce = F.cross_entropy(q.float().reshape(-1, q.shape[-1]), tgt.reshape(-1), reduction="none")
        blocks = (ce * valid.reshape(-1).float()).sum() / valid.sum().clamp(min=1)
        if agreement is not None:
            depth = min(4, f)
            own = torch.gather(logits.detach(), 1, (target - 1).clamp(max=T - 1)[..., None]
                               .expand(-1, -1, logits.shape[-1])).argmax(-1)      # [B, A*f]
            eq = ((q.argmax(-1) == own) & valid).reshape(B * A, f).double()
            full = valid.reshape(B * A, f)[:, depth - 1]                           # whole depth in window
            eq = eq[full]
            agreement[0] += eq.shape[0]
            agreement[1] += eq[:, :depth].cumprod(1).sum().item()
            agreement[2:2 + f] += eq.sum(0).cpu()
        return clean, blocks

    def _guarded(self, run):
        """run(), falling back to eager once if the compiled loss fails before its first
        training step went through (no working compiler, an unsupported op): a 10-minute
        GPU run should lose the compile speed-up, not the run."""
        try:
            return run()
        except Exception as e:  # noqa: BLE001 - any compiler failure
            if self.compiled != "on" or self.compile_checked:
                raise
            first = str(e).splitlines()[0] if str(e) else ""
            log(f"torch.compile failed ({type(e).__name__}: {first}); continuing eager")
            self.loss_fn, self.compiled = self._loss, "failed, eager"
            return run()

    def _forward_backward(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(x, y)
        loss.backward()
        return loss

    def resume(self):
        ck = common.load_checkpoint(self.ckpt_path, self.device)
        self.model.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["opt"])
        self.step, self.history = ck["step"], ck.get("history", [])
        self.planned = ck.get("planned_steps")
        if self.planned:
            self.a.steps = self.planned  # --auto-steps: keep the schedule the run started with
        log(f"resumed from {self.ckpt_path} at step {self.step}")

    def checkpoint(self):
        t0 = time.time()
        common.save_checkpoint(self.ckpt_path, {
            "model": self.model.state_dict(), "opt": self.opt.state_dict(), "step": self.step,
            "history": self.history, "args": vars(self.a), "planned_steps": self.planned})
        return time.time() - t0

    def train_step(self, stream: TokenStream):
        a = self.a
        x, y = stream.windows(stream.random_starts(a.seed, self.step, a.batch, a.seq_len),
                              a.seq_len)
        for g in self.opt.param_groups:
            g["lr"] = lr_at(self.step, a)
        self.anchor_offset = (self.step * 7919) % max(a.seq_len - 1, 1)
        loss = self._guarded(lambda: self._forward_backward(x, y))
        self.compile_checked = True
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), a.grad_clip)
        self.opt.step()
        self.step += 1
        return loss.detach()

    def evaluate(self, train_s: TokenStream, eval_s: TokenStream):
        t0 = time.time()
        self.model.eval()
        self.anchor_offset = 0
        if self.a.hybrid:  # the next-token loss stays comparable with plain pretraining
            with torch.no_grad():
                tr = evaluate(lambda x, y: self._hybrid_parts(x, y)[0], train_s, self.a)
                ev = evaluate(lambda x, y: self._hybrid_parts(x, y)[0], eval_s, self.a)
                agree = torch.zeros(2 + self.a.hybrid_rows, dtype=torch.float64)
                evb = evaluate(lambda x, y: self._hybrid_parts(x, y, agree)[1], eval_s, self.a)
        else:
            tr, ev = self._guarded(lambda: (evaluate(self.loss_fn, train_s, self.a),
                                            evaluate(self.loss_fn, eval_s, self.a)))
        self.model.train()
        self.history.append({"step": self.step, "train_loss": tr, "heldout_loss": ev})
        if self.a.hybrid:
            self.history[-1]["heldout_block_loss"] = evb
            n = max(agree[0].item(), 1.0)
            self.history[-1]["heldout_block_accepted_4"] = round(agree[1].item() / n, 4)
            self.history[-1]["heldout_block_row_agree"] = [round(v / n, 4) for v in agree[2:].tolist()]
        log(f"eval step {self.step}: train loss {tr:.4f} held-out loss {ev:.4f}"
            + (f" held-out block loss {evb:.4f}, drafts accepted at depth 4 "
               f"{self.history[-1]['heldout_block_accepted_4']:.3f}, row agreement "
               f"{self.history[-1]['heldout_block_row_agree']}" if self.a.hybrid else ""))
        return time.time() - t0


def train(tr: Trainer, train_s: TokenStream, eval_s: TokenStream, prog) -> dict:
    """The step loop. Returns timing facts for run.json."""
    a, budget = tr.a, tr.budget
    tokens_per_step = a.batch * a.seq_len
    step_s = None                    # measured seconds per training step
    eval_s_cost, ckpt_cost = 0.0, 0.0
    last_ckpt = time.time()
    run_loss = torch.zeros((), device=tr.device)
    run_n, t_log, s_log = 0, time.time(), tr.step
    paused = 0.0                     # evaluation/checkpoint seconds inside the log interval
    stopped_by_budget = False
    first = True
    if a.auto_steps and budget.enabled and tr.step == 0 and not tr.history:
        # A step-0 evaluation: the initial loss, and (with --compile) the evaluation graph's
        # compilation paid now, before --auto-steps measures what time is left.
        tr.evaluate(train_s, eval_s)
        t_log = time.time()
    tr.model.train()
    while tr.step < a.steps:
        if budget.enabled and step_s is not None and not budget.allows(2 * step_s):
            stopped_by_budget = True
            log(f"time budget: stopping at step {tr.step} of {a.steps} "
                f"({budget.left():.0f}s left for evaluation and export)")
            break
        run_loss += tr.train_step(train_s)
        run_n += 1
        if first:  # includes compilation and warm-up: a first, pessimistic estimate
            run_loss.item()
            step_s = time.time() - t_log
            t_log, s_log, first = time.time(), tr.step, False
        # --auto-steps: (re)fit the step count at every progress line until warm-up ends; the
        # warm-up LR does not depend on it, so the schedule is a plain cosine to the end.
        refit = a.auto_steps and budget.enabled and (tr.planned is None or tr.step <= a.warmup)
        if tr.step % a.log_every == 0 or tr.step == a.steps or \
                (refit and tr.planned is None and tr.step - s_log >= a.calibrate_steps):
            loss = run_loss.item() / run_n  # synchronises: the interval's time is real
            if tr.step > s_log:
                step_s = (time.time() - t_log - paused) / (tr.step - s_log)
            if refit and tr.step - 1 >= a.calibrate_steps:
                fit = fit_steps(tr.step, budget.spendable(), step_s, a.eval_every,
                                2 * a.eval_batches / 3)
                tr.planned = a.steps = prog.total = max(fit, tr.step + 1)
                log(f"auto-steps: {step_s * 1000:.1f} ms/step -> {a.steps} steps fit the budget "
                    f"({a.steps * tokens_per_step / 1e6:.0f}M tokens)"
                    + (" (final: warm-up ends)" if tr.step + a.log_every > a.warmup else ""))
            log(prog.line(tr.step, tokens_per_step * run_n, loss=loss,
                          lr=f"{lr_at(tr.step - 1, a):.2e}"))
            run_loss.zero_()
            run_n, t_log, s_log, paused = 0, time.time(), tr.step, 0.0
        if tr.step % a.eval_every == 0 and tr.step < a.steps:
            if budget.allows(eval_s_cost + (step_s or 0)):
                eval_s_cost = tr.evaluate(train_s, eval_s)
                paused += eval_s_cost  # keep evaluation out of the step time
                budget.set_need(1.5 * (eval_s_cost + ckpt_cost) + 5)
            else:
                log(f"time budget: skipping the evaluation at step {tr.step}")
        due_time = a.ckpt_every_s > 0 and time.time() - last_ckpt >= a.ckpt_every_s
        if (tr.step % a.ckpt_every == 0 or due_time) and tr.step < a.steps:
            ckpt_cost = tr.checkpoint()
            paused += ckpt_cost
            last_ckpt = time.time()
    if not tr.history or tr.history[-1]["step"] != tr.step:
        tr.evaluate(train_s, eval_s)
    tr.checkpoint()
    return {"stopped_by_budget": stopped_by_budget, "step_s": step_s,
            "planned_steps": a.steps}


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    budget = TimeBudget(a.time_budget_s, a.reserve_s)
    if a.auto_steps and not budget.enabled:
        raise SystemExit("--auto-steps fits the schedule to --time-budget-s: pass both")
    if a.hybrid and a.compile:
        raise SystemExit("--hybrid runs eager: drop --compile (its block anchors move every step)")
    os.makedirs(a.out, exist_ok=True)
    device = common.setup(a)
    accel.configure(device)
    if a.corpus:
        tok, train_ids, eval_ids, meta = load_packed(a)
    else:
        tok, train_ids, eval_ids, meta = prepare_data(a)
    if a.init_model:
        theirs_path = os.path.join(a.init_model, "tokenizer.json")
        theirs = ByteBPETokenizer.load(theirs_path) if os.path.exists(theirs_path) else None
        if theirs is None or (tok.vocab, tok.merges, tok.specials) != (theirs.vocab, theirs.merges,
                                                                       theirs.specials):
            raise SystemExit(f"--init-model {a.init_model}: its tokenizer.json is missing or differs "
                             f"from the corpus's: the model would read other token ids")
    if len(train_ids) <= a.seq_len + 1:
        raise SystemExit("training stream shorter than --seq-len")
    train_s, eval_s = TokenStream(train_ids, device), TokenStream(eval_ids, device)
    tr = Trainer(a, tok, device, budget)
    if a.resume:
        tr.resume()
    n_params = count_params(tr.model)
    feats = accel.describe(device)
    log(f"model: {n_params / 1e6:.2f}M parameters, device {device}, "
        f"{a.batch}x{a.seq_len} tokens/step; AdamW {tr.opt_kind}, compile {tr.compiled}, "
        f"sdpa {feats['sdpa']}, bf16 autocast {feats['autocast_bf16']}"
        + (f"; {budget.describe()}" if budget.enabled else ""))
    prog = common.Progress(a.steps, tr.step, budget)
    facts = train(tr, train_s, eval_s, prog)
    t0 = time.time()
    model_dir = os.path.join(a.out, "model")
    save_model_dir(tr.model.float().cpu(), model_dir, tok, DTYPES[a.export_dtype],
                   max_shard_bytes=a.max_shard_bytes)
    tps = prog.tokens / max(time.time() - prog.t0, 1e-9)
    history = tr.history
    common.write_json(os.path.join(a.out, "run.json"), {
        "corpus": meta, "n_params": n_params, "config": tr.cfg.to_hf(), "args": vars(a),
        "history": history, "final": history[-1] if history else None,
        "tokens_per_s_this_session": tps, "device": str(device),
        "accel": dict(feats, compile_used=tr.compiled, adamw=tr.opt_kind),
        "steps_done": tr.step, "tokens_seen": tr.step * a.batch * a.seq_len,
        "epochs": tr.step * a.batch * a.seq_len / max(len(train_ids), 1),
        "export_s": round(time.time() - t0, 2), "wall_s": round(budget.elapsed(), 1), **facts})
    log(f"exported {model_dir} ({a.export_dtype}); final {history[-1] if history else ''}; "
        f"wall {budget.elapsed():.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
