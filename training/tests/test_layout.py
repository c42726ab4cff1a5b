import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training.layout import predictive_logits, match_run_lengths, weighted_distill_loss  # noqa
from training.layout import outcome_block_logits, block_rows_mask, grouped_prefix_see  # noqa: E402
from training.tests.reference import xr_reference, naive_forward  # noqa: E402
from training.tests.test_model import tiny  # noqa: E402


def lora_model():
    m = tiny(seed=5)
    m.add_lora(4, 8, seed=1)
    g = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return m


def test_predictive_rows_match_brute_force_reference():
    m = lora_model()
    PH = 49
    xs = [[3, 14, 15, 9, 26, 5], [2, 7], [8]]          # ragged batch, incl. empty cache
    rows = [[5, 35, 8, PH], [7, 1, PH, PH], [8, 4, 4, 2]]
    ctl, prd = predictive_logits(m, xs, rows)
    for b in range(len(xs)):
        ref_p = xr_reference(m, xs[b], rows[b], use_lora_rows=True)
        ref_c = xr_reference(m, xs[b], rows[b], use_lora_rows=False)
        assert (prd[b].double() - ref_p).abs().max() < 1e-5
        assert (ctl[b].double() - ref_c).abs().max() < 1e-5
    assert (prd - ctl).abs().max() > 1e-3


def test_control_rows_equal_plain_ar_forward():
    m = lora_model()
    x, d = [3, 14, 15, 9], [26, 5, 35]
    ctl, _ = predictive_logits(m, [x], [[x[-1]] + d])
    with torch.no_grad():
        full, _ = m(torch.tensor([x + d]))
    assert torch.allclose(ctl[0], full[0, len(x) - 1:], atol=1e-5)


def test_loss_weighting_hand_made_example():
    PH = 99
    clean = torch.tensor([[10, 5, 6, 7, 8, 9]])
    noisy = torch.tensor([[10, 5, 1, 7, 8, PH]])
    s = match_run_lengths(noisy, clean)
    assert s.tolist() == [[0, 1, 0, 1, 2, 0]]
    # one-hot p; q puts prob 0.5 on the target for rows 0..2 and 1/V elsewhere for rows 3..5
    V = 4
    p = torch.zeros(1, 6, V)
    p[0, :, 0] = 1.0
    q = torch.zeros(1, 6, V)
    q[0, :3, 0] = 10.0
    ce = -torch.log_softmax(q, -1)[0, :, 0]
    want = ((torch.tensor([1., 2, 1, 2, 3, 1]) * ce).sum() / 10).item()
    got = weighted_distill_loss(q, p, s).item()
    assert abs(got - want) < 1e-6


def test_explicit_weights_replace_run_lengths():
    V = 4
    p = torch.zeros(1, 3, V)
    p[0, :, 0] = 1.0
    q = torch.zeros(1, 3, V)
    q[0, 0, 0] = 5.0
    ce = -torch.log_softmax(q, -1)[0, :, 0]
    w = torch.tensor([[1.0, 4.0, 4.0]])
    got = weighted_distill_loss(q, p, torch.zeros(1, 3, dtype=torch.long), w).item()
    assert abs(got - ((w[0] * ce).sum() / w.sum()).item()) < 1e-6


def test_fork_layout_noise_is_a_clean_prefix_then_placeholders():
    import argparse
    from training.distill_batch import add_noise
    PH, B, w = 99, 64, 8
    clean = torch.arange(B * w).reshape(B, w) % 50
    a = argparse.Namespace(noise_max=0.5, replay_frac=0.75, placeholder_prob=0.5, fork_frac=1.0)
    noisy = add_noise(clean, torch.arange(B), torch.zeros(B, w, dtype=torch.long),
                      torch.zeros(B, dtype=torch.bool), a, 50, PH, torch.Generator().manual_seed(3))
    for b in range(B):
        row = noisy[b].tolist()
        j = max(t for t in range(w) if row[t] != PH)  # last clean row
        assert row[:j + 1] == clean[b, :j + 1].tolist()
        assert all(t == PH for t in row[j + 1:])
    assert (noisy == PH).any(1).all()  # every window has at least one placeholder row


def test_placeholder_rows_weigh_less_the_further_they_are_from_the_last_token_row():
    from training.distill_batch import placeholder_run_index, row_weights
    PH = 99
    rows = torch.tensor([[5, 6, PH, PH, PH, 7, PH],
                         [5, PH, PH, 8, 9, PH, PH]])
    assert placeholder_run_index(rows, PH).tolist() == [[-1, -1, 0, 1, 2, -1, 0],
                                                        [-1, 0, 1, -1, -1, 0, 1]]
    s = torch.tensor([[0, 1, 0, 0, 0, 0, 0],
                      [0, 0, 0, 0, 0, 0, 0]])
    w = row_weights(rows, s, PH, placeholder_weight=2.0, placeholder_decay=0.5)
    assert w.tolist() == [[1.0, 2.0, 2.0, 1.0, 0.5, 1.0, 2.0],
                          [1.0, 2.0, 1.0, 1.0, 1.0, 2.0, 1.0]]
    # The defaults keep Alg. 3's s_t + 1 weights (the loss's own default).
    assert row_weights(rows, s, PH) is None


def block_reference(model, x, control, anchor, f, placeholder, causal=False):
    """Naive outcome block: prefix x[:-1] and control rows (base, causal), then f placeholder
    rows (LoRA) at positions L+anchor .. that see the prefix, control rows 0..anchor and one
    another in both directions."""
    L, m1 = len(x), len(control)
    tokens = list(x[:-1]) + list(control) + [placeholder] * f
    positions = list(range(L - 1 + m1)) + [L + anchor + i for i in range(f)]
    flags = [False] * (L - 1 + m1) + [True] * f
    visible = [list(range(i + 1)) for i in range(L - 1 + m1)]
    block = list(range(L - 1 + m1, L - 1 + m1 + f))
    visible += [list(range(L + anchor)) + (block[:i + 1] if causal else block) for i in range(f)]
    return naive_forward(model, tokens, positions, flags, visible)[L - 1 + m1:]


def test_outcome_blocks_match_brute_force_reference():
    m = lora_model()
    PH = 49
    for x, control in (([3, 14, 15, 9, 26, 5], [5, 35, 8, 2]), ([8], [8, 4, 4])):
        anchors = list(range(len(control)))
        ctl, blk = outcome_block_logits(m, x, control, anchors, 3, PH)
        assert (ctl.double() - xr_reference(m, x, control, use_lora_rows=False)).abs().max() < 1e-5
        for a, n in enumerate(anchors):
            ref = block_reference(m, x, control, n, 3, PH)
            assert (blk[a].double() - ref).abs().max() < 1e-5, (x, n)
        # Bidirectional: the first row of a block sees the rows after it.
        causal = block_reference(m, x, control, anchors[0], 3, PH, causal=True)
        assert (blk[0, 0].double() - causal[0]).abs().max() > 1e-4
        assert (blk[0, 2].double() - causal[2]).abs().max() > 1e-4  # rows 0, 1 differ below it


def test_block_rows_mask_grouped_windows():
    prefix_valid = torch.tensor([[False, True, True, True]])       # one padded prefix of 3 tokens
    see = grouped_prefix_see(prefix_valid, torch.tensor([[2, 3]]))  # windows anchored after 2, 3
    mask = block_rows_mask(see, 2, torch.tensor([[[0], [1]]]), 2)   # w = 2, one block each, f = 2
    assert mask.shape == (1, 4, 4 + 4 + 4)
    want = torch.tensor([
        # prefix       control (k0 r0, r1, k1 r0, r1)   blocks
        [0, 1, 1, 0,   1, 0, 0, 0,                     1, 1, 0, 0],
        [0, 1, 1, 0,   1, 0, 0, 0,                     1, 1, 0, 0],
        [0, 1, 1, 1,   0, 0, 1, 1,                     0, 0, 1, 1],
        [0, 1, 1, 1,   0, 0, 1, 1,                     0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask[0], want)
