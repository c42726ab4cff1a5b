"""pretrain --hybrid: the outcome-block loss is the engine layout's, block by block."""
import types

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import pretrain  # noqa: E402
from training.layout import outcome_block_logits  # noqa: E402
from training.tests.test_model import tiny  # noqa: E402

PH = 49


def hybrid_trainer(model, anchors, rows, target, anchor_offset):
    """What Trainer._hybrid_parts reads of a Trainer, around a tiny model."""
    args = types.SimpleNamespace(hybrid_anchors=anchors, hybrid_rows=rows, hybrid_target=target)
    return types.SimpleNamespace(a=args, model=model, device=torch.device("cpu"), placeholder=PH,
                                 anchor_offset=anchor_offset)


def test_hybrid_block_loss_equals_the_layout_block_by_block():
    m = tiny(seed=3)
    m.eval()
    g = torch.Generator().manual_seed(4)
    B, T, A, f = 2, 12, 3, 4
    toks = torch.randint(0, 48, (B, T + 1), generator=g)
    x, y = toks[:, :-1], toks[:, 1:]
    trainer = hybrid_trainer(m, A, f, "text", anchor_offset=5)
    with torch.no_grad():
        clean, blocks = pretrain.Trainer._hybrid_parts(trainer, x, y)
        logits, _ = m(x)
    assert abs(clean.item() - torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                                y.reshape(-1)).item()) < 1e-5
    span = T - 1
    total, count = 0.0, 0
    for b in range(B):
        for j in range(A):
            a = (j * span // A + 5 + 13 * b) % span
            # The engine's block after outcome n = a of control rows x_0 .. x_{T-1} over an
            # empty cache is the block of committed tokens x_0 .. x_a with no drafts.
            _, blk = outcome_block_logits(m, x[b, :a + 1].tolist(), [int(x[b, a])], [0], f, PH)
            for i in range(f):
                t = a + 2 + i
                if t <= T:
                    total += torch.nn.functional.cross_entropy(blk[0, i][None], toks[b, t][None]).item()
                    count += 1
    assert abs(blocks.item() - total / count) < 1e-4


def test_self_target_scores_each_block_row_against_the_models_own_distribution():
    """--hybrid-target self: block row i after anchor a learns the clean row a+1+i's
    next-token distribution (soft cross-entropy), not the text's token."""
    m = tiny(seed=5)
    m.eval()
    g = torch.Generator().manual_seed(6)
    B, T, A, f = 2, 10, 2, 3
    toks = torch.randint(0, 48, (B, T + 1), generator=g)
    x, y = toks[:, :-1], toks[:, 1:]
    trainer = hybrid_trainer(m, A, f, "self", anchor_offset=2)
    with torch.no_grad():
        _, blocks = pretrain.Trainer._hybrid_parts(trainer, x, y)
        logits, _ = m(x)
    span = T - 1
    total, count = 0.0, 0
    for b in range(B):
        for j in range(A):
            a = (j * span // A + 2 + 13 * b) % span
            _, blk = outcome_block_logits(m, x[b, :a + 1].tolist(), [int(x[b, a])], [0], f, PH)
            for i in range(f):
                t = a + 2 + i
                if t <= T:
                    p = torch.softmax(logits[b, t - 1], -1)
                    total += -(p * torch.log_softmax(blk[0, i], -1)).sum().item()
                    count += 1
    assert abs(blocks.item() - total / count) < 1e-4
    trainer.a.hybrid_target = "text"
    with torch.no_grad():
        _, text_blocks = pretrain.Trainer._hybrid_parts(trainer, x, y)
    assert abs(text_blocks.item() - blocks.item()) > 1e-3


def test_agreement_counts_the_drafts_greedy_serving_would_accept():
    """The held-out acceptance figure: per block whose first 4 targets are in the window, the
    leading rows whose argmax is the model's own argmax at their target, block by block
    through the engine's layout."""
    m = tiny(seed=7)
    m.eval()
    g = torch.Generator().manual_seed(8)
    B, T, A, f = 2, 16, 3, 5
    toks = torch.randint(0, 48, (B, T + 1), generator=g)
    x, y = toks[:, :-1], toks[:, 1:]
    trainer = hybrid_trainer(m, A, f, "self", anchor_offset=4)
    agree = torch.zeros(2 + f, dtype=torch.float64)
    with torch.no_grad():
        pretrain.Trainer._hybrid_parts(trainer, x, y, agree)
        logits, _ = m(x)
    span = T - 1
    blocks, leading, rows = 0, 0, [0] * f
    for b in range(B):
        for j in range(A):
            a = (j * span // A + 4 + 13 * b) % span
            if a + 2 + 3 > T:  # the 4th row's target is past the window
                continue
            _, blk = outcome_block_logits(m, x[b, :a + 1].tolist(), [int(x[b, a])], [0], f, PH)
            eq = [int(blk[0, i].argmax()) == int(logits[b, a + 1 + i].argmax()) if a + 2 + i <= T else False
                  for i in range(f)]
            blocks += 1
            for i in range(4):
                if not eq[i]:
                    break
                leading += 1
            rows = [r + int(e) for r, e in zip(rows, eq)]
    assert blocks > 0 and agree[0].item() == blocks
    assert agree[1].item() == leading
    assert agree[2:].tolist() == rows
