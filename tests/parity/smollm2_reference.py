"""An independent f32 PyTorch forward of a Llama-architecture GGUF (SmolLM2-135M-Instruct),
the reference tests/parity/smollm2_parity_test.cc holds crossreg's CPU backend to.

Independent of crossreg: llama.cpp's own reader (the `gguf` package) parses the file and
dequantizes every matrix to f32; the forward below is written from the architecture
alone and runs in f32 with no activation rounding (crossreg multiplies quantized weights
by 8-bit activations), so what the two share is the file and the token ids only.

RoPE layout: llama.cpp's converter reorders the rows of every head of attn_q/attn_k so
that the two halves of Hugging Face's rotate-half pairing, dimensions i and i + d/2,
become neighbours 2i and 2i + 1 (Meta's original layout), and llama.cpp rotates those
neighbours for the llama architecture. So in the file's order each head rotates
interleaved pairs (2i, 2i + 1) by position * theta^(-2i/d). The scores q.k are the same
under any order applied to both q and k, so no rows are moved back here; crossreg does
move them (to rotate-half order), which keeps the two implementations apart.

Usage: smollm2_reference.py GGUF TOKENS_JSON OUT [--top-k 8] [--full-every 16]

TOKENS_JSON is a JSON list of token ids. OUT (little-endian) holds, for the n positions:
  char[8]  "XRREF001"
  int32    n, vocab, top_k, full_every
  int32    argmax[n]               the lowest id among equal maxima
  int32    top_ids[n][top_k]       the reference's top_k ids, largest logit first
  float32  top_logits[n][top_k]
  float32  full[ceil(n / full_every)][vocab]   every logit of positions 0, full_every, ...
The top ids bound each position's error where it matters for argmax agreement; the full
rows bound it over the whole vocabulary on a sample of positions.
"""

import argparse
import json
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
    import gguf
except ImportError as e:
    sys.exit(
        f"smollm2_reference.py: cannot import Python package '{e.name}' ({e}). "
        "Debian's /usr/bin/python3 provides numpy and torch (python3-numpy, python3-torch); "
        "scripts/install_test_pydeps.sh installs gguf (gguf==0.19.0, no deps) into build/pydeps, "
        "which the parity test puts on PYTHONPATH with $CROSSREG_PYDEPS.")

MAGIC = b"XRREF001"
QUERY_CHUNK = 256  # query rows per attention step: bounds the score matrix to heads x 256 x n


def field(reader, key):
    f = reader.get_field(key)
    if f is None:
        sys.exit(f"smollm2_reference.py: GGUF key {key} is missing")
    return f.contents()


def load(path):
    """The hyperparameters and every tensor as an f32 torch tensor, shaped (out, in)."""
    reader = gguf.GGUFReader(path)
    arch = field(reader, "general.architecture")
    if arch != "llama":
        sys.exit(f"smollm2_reference.py: {path} is architecture {arch}, not llama")
    hp = {
        "layers": int(field(reader, "llama.block_count")),
        "dim": int(field(reader, "llama.embedding_length")),
        "heads": int(field(reader, "llama.attention.head_count")),
        "kv_heads": int(field(reader, "llama.attention.head_count_kv")),
        "theta": float(field(reader, "llama.rope.freq_base")),
        "eps": float(field(reader, "llama.attention.layer_norm_rms_epsilon")),
    }
    tensors = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        # GGUF lists dimensions innermost first; rows of `in` values, one per output.
        shape = [int(d) for d in reversed(t.shape)]
        # A copy: F32 tensors come back as views of the read-only mapped file.
        tensors[t.name] = torch.from_numpy(np.array(values, dtype=np.float32).reshape(shape))
    if "output.weight" not in tensors:  # tied embeddings
        tensors["output.weight"] = tensors["token_embd.weight"]
    return hp, tensors


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_interleaved(x, cos, sin):
    """x: (n, heads, head_dim), pairs (2i, 2i + 1); cos, sin: (n, 1, head_dim / 2)."""
    pairs = x.unflatten(-1, (-1, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def causal_attention(q, k, v, group):
    """q: (n, heads, hd); k, v: (n, kv_heads, hd); query head h reads kv head h // group."""
    n, heads, hd = q.shape
    k = k.repeat_interleave(group, dim=1).transpose(0, 1)  # (heads, n, hd)
    v = v.repeat_interleave(group, dim=1).transpose(0, 1)
    q = q.transpose(0, 1) / math.sqrt(hd)
    out = torch.empty(heads, n, hd)
    for begin in range(0, n, QUERY_CHUNK):
        end = min(begin + QUERY_CHUNK, n)
        scores = q[:, begin:end] @ k[:, :end].transpose(1, 2)  # (heads, rows, end)
        scores.masked_fill_(torch.arange(end) > torch.arange(begin, end).unsqueeze(1), float("-inf"))
        out[:, begin:end] = torch.softmax(scores, dim=-1) @ v[:, :end]
    return out.transpose(0, 1).reshape(n, heads * hd)


def hidden_states(hp, w, ids):
    """The final-norm hidden state of every position, (n, dim)."""
    n, heads, kv_heads = len(ids), hp["heads"], hp["kv_heads"]
    hd = hp["dim"] // heads
    inv_freq = hp["theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.arange(n, dtype=torch.float64).unsqueeze(1) * inv_freq  # (n, hd / 2)
    cos, sin = angles.cos().float().unsqueeze(1), angles.sin().float().unsqueeze(1)
    x = w["token_embd.weight"][torch.tensor(ids, dtype=torch.long)]
    for i in range(hp["layers"]):
        p = f"blk.{i}."
        h = rms_norm(x, w[p + "attn_norm.weight"], hp["eps"])
        q = rotate_interleaved((h @ w[p + "attn_q.weight"].T).view(n, heads, hd), cos, sin)
        k = rotate_interleaved((h @ w[p + "attn_k.weight"].T).view(n, kv_heads, hd), cos, sin)
        v = (h @ w[p + "attn_v.weight"].T).view(n, kv_heads, hd)
        x = x + causal_attention(q, k, v, heads // kv_heads) @ w[p + "attn_output.weight"].T
        h = rms_norm(x, w[p + "ffn_norm.weight"], hp["eps"])
        gate = torch.nn.functional.silu(h @ w[p + "ffn_gate.weight"].T)
        x = x + (gate * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
    return rms_norm(x, w["output_norm.weight"], hp["eps"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--full-every", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))  # Debian's torch starts with one
    start = time.monotonic()
    with open(args.tokens) as f:
        ids = json.load(f)
    hp, w = load(args.gguf)
    vocab = w["output.weight"].shape[0]
    if not ids or min(ids) < 0 or max(ids) >= vocab:
        sys.exit(f"smollm2_reference.py: {args.tokens}: token ids must be a non-empty list in [0, {vocab})")
    loaded = time.monotonic()
    with torch.no_grad():
        x = hidden_states(hp, w, ids)
        n = len(ids)
        argmax = torch.empty(n, dtype=torch.int32)
        top_ids = torch.empty(n, args.top_k, dtype=torch.int32)
        top_logits = torch.empty(n, args.top_k)
        full = []
        for begin in range(0, n, QUERY_CHUNK):  # (rows, vocab) logits a chunk at a time
            logits = x[begin:begin + QUERY_CHUNK] @ w["output.weight"].T
            # torch.argmax's choice among equal maxima is unspecified; take the lowest id.
            is_max = (logits == logits.max(dim=-1, keepdim=True).values).int()
            argmax[begin:begin + QUERY_CHUNK] = (is_max * torch.arange(vocab, 0, -1, dtype=torch.int32)).argmax(-1)
            values, indices = logits.topk(args.top_k, dim=-1)
            top_ids[begin:begin + QUERY_CHUNK] = indices.int()
            top_logits[begin:begin + QUERY_CHUNK] = values
            first = (-begin) % args.full_every
            full.append(logits[first::args.full_every])
    with open(args.out, "wb") as f:
        f.write(MAGIC)
        f.write(np.array([n, vocab, args.top_k, args.full_every], dtype="<i4").tobytes())
        for t in (argmax, top_ids, top_logits, torch.cat(full)):
            f.write(t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes())
    print(f"smollm2_reference.py: {n} positions, load {loaded - start:.1f} s, "
          f"forward {time.monotonic() - loaded:.1f} s, {torch.get_num_threads()} threads", file=sys.stderr)


if __name__ == "__main__":
    main()
