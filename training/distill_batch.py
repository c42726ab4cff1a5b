"""One distillation batch in the inference layout (training/README.md, "Training example"):
the prefix K/V, the clean control rows and their targets, the noisy predictive rows, the
outcome blocks, and the loss. The trainer (training/distill.py) and its cost plan
(training/distill_plan.py) both run these.
"""
import numpy as np
import torch

from .distill_data import Examples
from .layout import (left_pad, base_prefix_kv, stream_rows_forward, grouped_rows_mask,
                     match_run_lengths, weighted_distill_loss, grouped_prefix_see,
                     block_rows_mask, block_positions)
from .model import concat_kv


def clean_rows(data: Examples, idx: torch.Tensor) -> torch.Tensor:
    """[B, w] rows of the clean window: x_last, then the base's continuation c_1..c_{w-1}."""
    x_last = torch.tensor([data.prefix(i)[-1] for i in idx.tolist()], dtype=torch.long)
    return torch.cat([x_last[:, None], data.continuation(idx)[:, :data.window - 1]], 1)


def batch_tensors(data: Examples, idx, device):
    """-> cached prefix (ids, valid, pos) [G, S], clean rows [B, w], row positions [G, B/G*w],
    the rows' attention mask (None: one window per prefix, G = B). With groups of K (idx holds
    whole groups in order) the G = B / K prefixes are each group's longest, and each window
    sees the part of it before its own anchor (layout.grouped_rows_mask)."""
    lens = data.lens(idx)
    rows = clean_rows(data, idx).to(device)
    K, w = data.group, data.window
    if K == 1:
        cached = [data.prefix(i)[:-1] for i in idx.tolist()]
        ids, valid, pos = left_pad(cached, 0, device)
        row_pos = (lens[:, None] - 1 + torch.arange(w)[None]).to(device)
        return ids, valid, pos, rows, row_pos, None
    if len(idx) % K or not torch.equal(idx.view(-1, K) - idx.view(-1, K)[:, :1],
                                       torch.arange(K).expand(len(idx) // K, K)) \
            or bool((idx.view(-1, K)[:, 0] % K).any()):
        raise ValueError(f"batch_tensors: indices must be whole groups of {K}")
    firsts = idx.view(-1, K)[:, 0].tolist()
    glens = lens.view(-1, K)
    longest = [int(data.start[i]) for i in firsts]
    cached = [np.asarray(data.stream[s:s + int(m) - 1], np.int64).tolist()
              for s, m in zip(longest, glens.max(1).values.tolist())]
    ids, valid, pos = left_pad(cached, 0, device)
    row_pos = (glens[:, :, None] - 1 + torch.arange(w)[None, None]).reshape(len(firsts), K * w)
    mask = grouped_rows_mask(valid, glens - 1, w)
    return ids, valid, pos, rows, row_pos.to(device), mask


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
    src = torch.where(use_replay, replay[idx].long(), rand_tok)
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
    """Loss (mean over the batch's sequences), q logits, p, the rows run and the clean rows.
    noisy_fn(clean rows) gives the predictive rows (None: the clean rows)."""
    ids, valid, pos, clean, row_pos, mask = batch_tensors(data, idx, device)
    B, w = clean.shape
    G = ids.shape[0]

    def rows_forward(rows, use_lora):  # [B, w] windows -> [B, w, V] logits
        logits, _ = stream_rows_forward(model, kv, valid, rows.reshape(G, B // G * w), row_pos,
                                        use_lora=use_lora, mask=mask)
        return logits.reshape(B, w, -1)

    with torch.no_grad(), autocast():
        _, kv = base_prefix_kv(model, ids, valid, pos, logits="none")  # control prefix K/V
        p = torch.softmax(rows_forward(clean, False).float(), -1)  # p_t on the clean window
    rows = noisy_fn(clean) if noisy_fn else clean
    with autocast():
        q_logits = rows_forward(rows, True)
    s = match_run_lengths(rows, clean)
    weights = row_weights(rows, s, placeholder, placeholder_weight, placeholder_decay)
    return weighted_distill_loss(q_logits, p, s, weights), q_logits, p, rows, clean


def block_anchors(B: int, w: int, count: int, gen: torch.Generator) -> torch.Tensor:
    """[B, A]: distinct outcomes n in [0, w-2] per window (count 0: all of them, in order)."""
    if count <= 0 or count >= w - 1:
        return torch.arange(w - 1).expand(B, w - 1).clone()
    return torch.rand(B, w - 1, generator=gen).argsort(1)[:, :count]


def forward_blocks(model, data, idx, device, anchors, f, autocast=None, placeholder=0,
                   placeholder_weight=1.0, placeholder_decay=1.0):
    """The outcome-block layout: the frozen base runs the prefix and the clean window (control
    rows), then each window's blocks (anchors [B, A]; f placeholder rows each, LoRA) attend the
    base's K/V of the clean text up to their outcome and their own block both ways. Block row i
    after outcome n is scored against the base's p at window row n+1+i (the token at position
    L+n+i+1), where the window has one. -> loss (per window, averaged), q [B, A, f, V], p
    [B, w, V], has-target mask [B, A, f]."""
    ids, valid, pos, clean, row_pos, _ = batch_tensors(data, idx, device)
    B, w = clean.shape
    G, K = ids.shape[0], B // ids.shape[0]
    A = anchors.shape[1]
    lens = data.lens(idx)
    see = grouped_prefix_see(valid, (lens.view(G, K) - 1).to(device))
    ctl_mask = None if K == 1 else grouped_rows_mask(valid, lens.view(G, K) - 1, w)
    with torch.no_grad(), autocast():
        _, kv = base_prefix_kv(model, ids, valid, pos, logits="none")
        ctl, ctl_kv = stream_rows_forward(model, kv, valid, clean.reshape(G, K * w), row_pos,
                                          use_lora=False, return_kv=True, mask=ctl_mask)
        p = torch.softmax(ctl.float(), -1).reshape(B, w, -1)
    a = anchors.to(device).reshape(G, K, A)
    mask = block_rows_mask(see, w, a, f)
    rows = torch.full((G, K * A * f), placeholder, dtype=torch.long, device=device)
    bpos = block_positions(row_pos.reshape(G, K, w)[:, :, 0], a, f)
    with autocast():
        q, _ = stream_rows_forward(model, concat_kv(kv, ctl_kv), None, rows, bpos, use_lora=True,
                                   mask=mask)
    q = q.reshape(B, A, f, -1)
    target_row = anchors.to(device)[:, :, None] + 1 + torch.arange(f, device=device)[None, None]
    has = target_row < w                                                   # [B, A, f]
    pt = torch.gather(p, 1, target_row.clamp(max=w - 1).reshape(B, A * f)[..., None]
                      .expand(B, A * f, p.shape[-1])).reshape(B, A, f, -1)
    weight = placeholder_weight * placeholder_decay ** torch.arange(f, device=device).float()
    weight = has.float() * weight[None, None]
    ce = -(pt * torch.log_softmax(q.float(), -1)).sum(-1)                  # [B, A, f]
    loss = ((weight * ce).sum((1, 2)) / weight.sum((1, 2)).clamp(min=1e-9)).mean()
    return loss, q, p, has
