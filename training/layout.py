"""The Cross-Regression attention layout, shared by training, the fixture and the tests.

For a sequence with committed tokens x (0-based, L = |x|, x_last = x[L-1] at position L-1):
  * the cached prefix = base-model (control) K/V of positions 0 .. L-2;
  * gamma predictive rows with tokens [x_last, d_1, ..., d_{gamma-1}] at RoPE positions
    L-1 ... L+gamma-2 (empty draft slots hold the placeholder token) run with base+LoRA weights,
    attending the whole cached prefix plus predictive rows 0..k (their own LoRA K/V), causally;
  * predictive row k outputs Q_{k+1}: the distribution of the token at position L+k.
Control rows are the same tokens and positions with base weights (= plain AR verification).
Batches may mix prefix lengths: prefixes are left-padded, and padded keys are masked out.

The outcome-block layout (docs/algorithm.md "Outcome blocks") has no predictive chain: the
block for outcome n is f placeholder rows at positions L+n ... L+n+f-1, base+LoRA weights,
attending the cached prefix, the control rows x_last, d_1 .. d_n (base K/V) and every row of
its own block in both directions; block row i proposes the token at position L+n+i+1.
"""
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from .model import LlamaForCausalLM, KV, concat_kv


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, device=None
             ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns ids [B, Lmax], valid bool [B, Lmax], positions [B, Lmax] (pads get position 0)."""
    lmax = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), lmax), pad_id, dtype=torch.long)
    valid = torch.zeros(len(seqs), lmax, dtype=torch.bool)
    for b, s in enumerate(seqs):
        if len(s):
            ids[b, lmax - len(s):] = torch.tensor(list(s), dtype=torch.long)
            valid[b, lmax - len(s):] = True
    pos = (valid.long().cumsum(1) - 1).clamp(min=0)
    return ids.to(device), valid.to(device), pos.to(device)


def padded_causal_mask(valid: torch.Tensor) -> torch.Tensor:
    """valid: bool [B, T] -> bool [B, T, T]: causal over valid keys; a pad row sees itself only
    (so no row has an empty softmax)."""
    B, T = valid.shape
    tri = torch.tril(torch.ones(T, T, dtype=torch.bool, device=valid.device))
    eye = torch.eye(T, dtype=torch.bool, device=valid.device)
    return (tri[None] & valid[:, None, :]) | eye[None]


def rows_mask(prefix_valid: torch.Tensor, n_rows: int) -> torch.Tensor:
    """prefix_valid: bool [B, S] -> bool [B, n_rows, S + n_rows]: every row sees the valid cached
    prefix and rows 0..k (causal among rows)."""
    B, S = prefix_valid.shape
    tri = torch.tril(torch.ones(n_rows, n_rows, dtype=torch.bool, device=prefix_valid.device))
    return torch.cat([prefix_valid[:, None, :].expand(B, n_rows, S),
                      tri[None].expand(B, n_rows, n_rows)], dim=2)


def grouped_prefix_see(prefix_valid: torch.Tensor, cached: torch.Tensor) -> torch.Tensor:
    """bool [G, K, S]: the keys of the left-padded prefix (prefix_valid [G, S]) that window k of
    sequence g sees: the valid ones before its anchor, cached[g, k] tokens in."""
    S = prefix_valid.shape[1]
    dev = prefix_valid.device
    first = S - prefix_valid.sum(1)                                   # left padding [G]
    key = torch.arange(S, device=dev)[None, None, :] - first[:, None, None]   # prefix position
    return prefix_valid[:, None, :] & (key < cached.to(dev)[:, :, None])


def block_rows_mask(prefix_see: torch.Tensor, w: int, anchors: torch.Tensor, f: int) -> torch.Tensor:
    """Outcome blocks over K windows of w control rows per sequence. prefix_see: bool [G, K, S]
    (each window's visible prefix keys); anchors: long [G, K, A], the outcome n of each of a
    window's A blocks (0 <= n < w); f rows per block. Keys are [prefix (S), control rows (K*w,
    window by window), block rows (K*A*f)]; block row (k, a, i) sees window k's prefix keys, its
    control rows 0 .. anchors[g, k, a] and all f rows of its own block (bidirectional).
    -> bool [G, K*A*f, S + K*w + K*A*f]."""
    G, K, S = prefix_see.shape
    A = anchors.shape[2]
    dev = prefix_see.device
    n = K * A * f
    pre = prefix_see[:, :, None, None, :].expand(G, K, A, f, S).reshape(G, n, S)
    upto = torch.arange(w, device=dev)[None, None, None, :] <= anchors.to(dev)[..., None]   # [G, K, A, w]
    same = torch.eye(K, dtype=torch.bool, device=dev)[None, :, None, :, None]                # [1, K, 1, K, 1]
    ctl = (same & upto[:, :, :, None, :])[:, :, :, None].expand(G, K, A, f, K, w).reshape(G, n, K * w)
    own = torch.block_diag(*([torch.ones(f, f, dtype=torch.bool, device=dev)] * (K * A)))
    return torch.cat([pre, ctl, own[None].expand(G, n, n)], dim=2)


def block_positions(x_last_pos: torch.Tensor, anchors: torch.Tensor, f: int) -> torch.Tensor:
    """Positions of the block rows: x_last_pos [G, K] (window k's row 0), anchors [G, K, A] ->
    [G, K*A*f]: block (k, a) starts right after control row anchors[g, k, a]."""
    G, K, A = anchors.shape
    pos = x_last_pos.to(anchors.device)[:, :, None, None] + anchors[..., None] + 1 \
        + torch.arange(f, device=anchors.device)[None, None, None, :]
    return pos.reshape(G, K * A * f)


def grouped_rows_mask(prefix_valid: torch.Tensor, cached: torch.Tensor, w: int) -> torch.Tensor:
    """K windows of w rows over one left-padded cached prefix (prefix_valid [G, S]); window k
    of sequence g is anchored after its first cached[g, k] prefix tokens. -> bool
    [G, K*w, S + K*w]: a window's rows see the valid prefix keys before their anchor and their
    own window causally, nothing of the other windows: each window is exactly the one-window
    layout of its own shorter prefix (rows_mask), sharing the prefix's K/V."""
    G, S = prefix_valid.shape
    K = cached.shape[1]
    dev = prefix_valid.device
    see = grouped_prefix_see(prefix_valid, cached)                    # [G, K, S]
    prefix_part = see[:, :, None, :].expand(G, K, w, S).reshape(G, K * w, S)
    tri = torch.tril(torch.ones(w, w, dtype=torch.bool, device=dev))
    rows_part = torch.block_diag(*([tri] * K))
    return torch.cat([prefix_part, rows_part[None].expand(G, K * w, K * w)], dim=2)


@torch.no_grad()
def base_prefix_kv(model: LlamaForCausalLM, ids: torch.Tensor, valid: torch.Tensor,
                   pos: torch.Tensor, logits: str = "all") -> Tuple[Optional[torch.Tensor], List[KV]]:
    """Control-stream (base weights, no LoRA) forward over a left-padded prefix. logits:
    "all" [B, S, V], "last" [B, 1, V] (the next token's), or "none" (K/V only): a batch of
    1024 prefixes of 768 tokens has 51 GB of float32 logits, of which generation needs one
    row a prefix."""
    h, kv = model(ids, pos, None, padded_causal_mask(valid), use_lora=False, return_kv=True,
                  return_hidden=True)
    if logits == "none":
        return None, kv
    if logits == "last":
        h = h[:, -1:]
    return F.linear(h, model.output_weight()).float(), kv


def stream_rows_forward(model: LlamaForCausalLM, prefix_kv: List[KV], prefix_valid: torch.Tensor,
                        row_ids: torch.Tensor, row_pos: torch.Tensor, use_lora: bool,
                        return_kv: bool = False, mask: Optional[torch.Tensor] = None):
    """Rows [B, n] at positions row_pos [B, n] attending the cached prefix (prefix_valid [B, S])
    and each other causally (or as `mask` [B, n, S + n] says, e.g. grouped_rows_mask).
    use_lora=True: predictive rows; False: control rows."""
    if mask is None:
        mask = rows_mask(prefix_valid, row_ids.shape[1])
    return model(row_ids, row_pos, prefix_kv, mask, use_lora=use_lora, return_kv=return_kv)


def predictive_logits(model: LlamaForCausalLM, prefixes: Sequence[Sequence[int]],
                      rows: Sequence[Sequence[int]], pad_id: int = 0, device=None):
    """Convenience wrapper: prefixes = committed tokens x (each len L >= 1), rows = predictive
    row tokens (first must be x_last). Returns (control_logits, predictive_logits), [B, n, V]."""
    for x, r in zip(prefixes, rows):
        if r[0] != x[-1]:
            raise ValueError("first predictive row must hold x_last")
    cached = [list(x[:-1]) for x in prefixes]
    if max(len(c) for c in cached) == 0:
        cached = [[pad_id] for _ in cached]  # one masked pad column keeps shapes simple
        ids, valid, pos = left_pad(cached, pad_id, device)
        valid[:] = False
    else:
        ids, valid, pos = left_pad(cached, pad_id, device)
    _, kv = base_prefix_kv(model, ids, valid, pos, logits="none")
    lens = torch.tensor([len(x) for x in prefixes], device=ids.device)
    n = len(rows[0])
    row_ids = torch.tensor([list(r) for r in rows], dtype=torch.long, device=ids.device)
    row_pos = (lens[:, None] - 1) + torch.arange(n, device=ids.device)[None]
    ctl, _ = stream_rows_forward(model, kv, valid, row_ids, row_pos, use_lora=False)
    prd, _ = stream_rows_forward(model, kv, valid, row_ids, row_pos, use_lora=True)
    return ctl, prd


def outcome_block_logits(model: LlamaForCausalLM, prefix: Sequence[int], control: Sequence[int],
                         anchors: Sequence[int], f: int, placeholder: int):
    """One sequence in the outcome-block layout: committed tokens `prefix` (x_last = prefix[-1]),
    control rows `control` = [x_last, d_1 .. d_m], and a block of f placeholder rows after
    each outcome n in `anchors`. -> (control logits [m+1, V], block logits [len(anchors), f, V])."""
    if control[0] != prefix[-1]:
        raise ValueError("the first control row must hold x_last")
    cached = list(prefix[:-1]) or [0]
    ids, valid, pos = left_pad([cached], 0)
    if len(prefix) == 1:
        valid[:] = False  # one masked pad column keeps shapes simple
    _, kv = base_prefix_kv(model, ids, valid, pos, logits="none")
    w = len(control)
    ctl_ids = torch.tensor([list(control)], dtype=torch.long)
    ctl_pos = len(prefix) - 1 + torch.arange(w)[None]
    ctl, ctl_kv = stream_rows_forward(model, kv, valid, ctl_ids, ctl_pos, use_lora=False, return_kv=True)
    a = torch.tensor([[list(anchors)]], dtype=torch.long)
    mask = block_rows_mask(valid[:, None, :], w, a, f)
    rows = torch.full((1, len(anchors) * f), placeholder, dtype=torch.long)
    blk, _ = stream_rows_forward(model, concat_kv(kv, ctl_kv), None, rows,
                                 block_positions(ctl_pos[:, :1], a, f), use_lora=True, mask=mask)
    return ctl[0], blk[0].reshape(len(anchors), f, -1)


@torch.no_grad()
def generate(model: LlamaForCausalLM, prefixes: Sequence[Sequence[int]], n_new: int,
             temperature: float = 0.0, generator: Optional[torch.Generator] = None,
             pad_id: int = 0, device=None) -> torch.Tensor:
    """Base-model continuation (greedy if temperature == 0) of left-padded prefixes with a KV
    cache. Returns [B, n_new] token ids."""
    ids, valid, pos = left_pad(prefixes, pad_id, device)
    logits, kv = base_prefix_kv(model, ids, valid, pos, logits="last")
    last = logits[:, -1]
    nxt_pos = pos[:, -1] + 1
    out = []
    for i in range(n_new):
        if temperature <= 0:
            tok = last.argmax(-1)
        else:
            probs = torch.softmax(last / temperature, -1)
            tok = torch.multinomial(probs.cpu(), 1, generator=generator)[:, 0].to(last.device)
        out.append(tok)
        if i == n_new - 1:
            break
        one = torch.ones(len(prefixes), 1, dtype=torch.bool, device=valid.device)
        mask = torch.cat([valid, one], 1)[:, None, :]
        logits, new = model(tok[:, None], nxt_pos[:, None], kv, mask, return_kv=True)
        kv = [(torch.cat([k, nk], 2), torch.cat([v, nv], 2)) for (k, v), (nk, nv) in zip(kv, new)]
        valid = torch.cat([valid, one], 1)
        last = logits[:, -1]
        nxt_pos = nxt_pos + 1
    return torch.stack(out, 1)


def match_run_lengths(noisy: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
    """s_t of Alg. 3 line 6, per predictive row. noisy/clean: [B, w] row tokens where row 0 is
    x_last (always clean, never counted). s_t = number of consecutive rows t, t-1, ..., >= 1
    whose noisy token equals the clean one: the draft run that row t's prediction rests on.
    Placeholder rows never equal the clean token, so they break the run."""
    eq = (noisy == clean).long()
    eq[:, 0] = 0
    s = torch.zeros_like(eq)
    run = torch.zeros_like(eq[:, 0])
    for t in range(eq.shape[1]):
        run = (run + 1) * eq[:, t]
        s[:, t] = run
    return s


def weighted_distill_loss(logits_q: torch.Tensor, p: torch.Tensor, s: torch.Tensor,
                          weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """L = -sum_t (s_t+1) p_t . log q_t / sum_t (s_t+1), per sequence, averaged over the batch.
    logits_q: [B, w, V]; p: [B, w, V] probabilities; s: [B, w]. `weights` [B, w] replaces
    (s_t+1) when given (e.g. heavier placeholder rows)."""
    w = (s + 1).float() if weights is None else weights.float()
    ce = -(p * torch.log_softmax(logits_q.float(), -1)).sum(-1)
    return ((w * ce).sum(1) / w.sum(1)).mean()
