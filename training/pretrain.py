"""Pretrain the tiny default model from scratch: own byte-level BPE tokenizer + Llama model.

python3 -m training.pretrain --out training/runs/pretrain [--steps N] [--device auto]
Writes OUT/corpus_files.txt (sorted 'sha256  path' manifest), OUT/tokenizer.json,
OUT/data/*.npy (token streams), OUT/checkpoint.pt, OUT/model/ (HF directory), OUT/run.json.
"""
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import common
from .common import log
from .hf_io import save_model_dir, DTYPES
from .model import LlamaConfig, LlamaForCausalLM, count_params
from .tokenizer import ByteBPETokenizer, train_bpe, DEFAULT_SPECIALS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training.pretrain", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default="training/runs/pretrain", help="run directory")
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
    common.add_common_args(p)
    return p


def lr_at(step: int, a) -> float:
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(t, 1))))


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


def get_batch(stream: np.ndarray, starts, seq: int, device):
    x = np.stack([stream[s:s + seq] for s in starts]).astype(np.int64)
    y = np.stack([stream[s + 1:s + seq + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


def autocast_ctx(device):
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    import contextlib
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(model, stream, a, device) -> float:
    """Mean loss over fixed, evenly spaced windows of `stream`."""
    model.eval()
    n_win = a.eval_batches * a.batch
    span = len(stream) - a.seq_len - 1
    if span <= 0:
        return float("nan")
    starts = np.linspace(0, span, n_win).astype(np.int64)
    tot = 0.0
    for i in range(0, n_win, a.batch):
        x, y = get_batch(stream, starts[i:i + a.batch], a.seq_len, device)
        with autocast_ctx(device):
            logits, _ = model(x)
        tot += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    model.train()
    return tot / math.ceil(n_win / a.batch)


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    device = common.setup(a)
    tok, train_ids, eval_ids, meta = prepare_data(a)
    if len(train_ids) <= a.seq_len + 1:
        raise SystemExit("training stream shorter than --seq-len")
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=a.hidden,
                      intermediate_size=a.ffn, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                      max_position_embeddings=a.max_pos, tie_word_embeddings=not a.untied,
                      bos_token_id=tok.specials["<|bos|>"], eos_token_id=tok.specials["<|eos|>"])
    model = LlamaForCausalLM(cfg)
    model.init_weights(a.seed)
    model.to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    ckpt_path = os.path.join(a.out, "checkpoint.pt")
    step, history = 0, []
    if a.resume:
        ck = common.load_checkpoint(ckpt_path, device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, history = ck["step"], ck.get("history", [])
        log(f"resumed from {ckpt_path} at step {step}")
    n_params = count_params(model)
    log(f"model: {n_params / 1e6:.2f}M parameters, device {device}, "
        f"{a.batch}x{a.seq_len} tokens/step")
    prog = common.Progress(a.steps, step)
    run_loss, run_n = 0.0, 0

    def checkpoint():
        common.save_checkpoint(ckpt_path, {"model": model.state_dict(), "opt": opt.state_dict(),
                                           "step": step, "history": history, "args": vars(a)})

    model.train()
    while step < a.steps:
        rng = np.random.default_rng([a.seed, step])  # batch depends only on (seed, step)
        starts = rng.integers(0, len(train_ids) - a.seq_len - 1, a.batch)
        x, y = get_batch(train_ids, starts, a.seq_len, device)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        with autocast_ctx(device):
            logits, _ = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        step += 1
        run_loss += loss.item()
        run_n += 1
        if step % a.log_every == 0 or step == a.steps:
            log(prog.line(step, a.batch * a.seq_len * run_n, loss=run_loss / run_n,
                          lr=f"{lr_at(step - 1, a):.2e}"))
            run_loss, run_n = 0.0, 0
        if step % a.eval_every == 0 or step == a.steps:
            tr, ev = evaluate(model, train_ids, a, device), evaluate(model, eval_ids, a, device)
            history.append({"step": step, "train_loss": tr, "heldout_loss": ev})
            log(f"eval step {step}: train loss {tr:.4f} held-out loss {ev:.4f}")
        if step % a.ckpt_every == 0 or step == a.steps:
            checkpoint()
    model_dir = os.path.join(a.out, "model")
    save_model_dir(model.float().cpu(), model_dir, tok, DTYPES[a.export_dtype])
    tps = prog.tokens / max(time.time() - prog.t0, 1e-9)
    common.write_json(os.path.join(a.out, "run.json"), {
        "corpus": meta, "n_params": n_params, "config": cfg.to_hf(), "args": vars(a),
        "history": history, "final": history[-1] if history else None,
        "tokens_per_s_this_session": tps, "device": str(device)})
    log(f"exported {model_dir}; final {history[-1] if history else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
