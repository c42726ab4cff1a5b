"""Data-parallel distillation under torchrun (gloo, 2 CPU processes) against one process, the
data-parallel helpers, resuming, activation checkpointing and the engine's data file."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import distill, distributed, layout  # noqa: E402
from training.distill_data import Examples, read_engine_file, write_engine_file  # noqa: E402
from training.hf_io import save_model_dir, load_model_dir  # noqa: E402
from training.model import LlamaConfig, LlamaForCausalLM  # noqa: E402
from training import safetensors_io as st  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = 64
# Agreement of the 2-process adapter with the 1-process one: the gradients differ only in
# rounding (each process sums its slice and pads its prefixes to its own longest, then the
# all-reduce adds the two), about 1e-7 relative. AdamW divides by sqrt(v), so an element whose
# gradient is near its eps can move by up to 2 lr per step on such a difference; the bound is a
# hundredth of lr (1e-2 here). Measured after 3 steps: 1.6e-7 with one window per prefix,
# 1.1e-5 with groups of 3.
ATOL = 1e-4


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("base")
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    m = LlamaForCausalLM(cfg)
    m.init_weights(7, std=0.2)
    save_model_dir(m, str(d / "model"), None, torch.float32)
    rng = np.random.default_rng(3)
    # A token stream with structure the model can learn a little of: repeated phrases.
    phrases = [rng.integers(0, VOCAB - 1, rng.integers(3, 9)) for _ in range(12)]
    stream = np.concatenate([phrases[i] for i in rng.integers(0, 12, 400)]).astype(np.int64)
    np.save(d / "tokens.npy", stream)
    return str(d / "model"), str(d / "tokens.npy")


def args_for(base, out, steps, extra=()):
    model, tokens = base
    return ["--base", model, "--out", out, "--corpus-tokens", tokens, "--n-examples", "24",
            "--n-eval", "6", "--prefix-min", "4", "--prefix-max", "20", "--window", "6",
            "--gen-batch", "5", "--rank", "4", "--alpha", "8", "--batch", "6", "--lr", "1e-2",
            "--warmup", "1", "--eval-every", "2", "--log-every", "1", "--device", "cpu",
            "--threads", "1", "--placeholder-token-id", str(VOCAB - 1), "--holdout-pct", "20",
            "--steps", str(steps)] + list(extra)


def torchrun(n, argv, env_extra=None):
    # TMPDIR: the launcher leaves a torchelastic_* directory behind in it on every start.
    with tempfile.TemporaryDirectory(prefix="crossreg-torchrun-") as tmp:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, TMPDIR=tmp, **(env_extra or {}))
        cmd = [sys.executable, "-m", "training.torchrun", "--standalone", "--nnodes", "1",
               "--nproc_per_node", str(n), "-m", "training", "distill"] + argv
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout + r.stderr


def adapter(out):
    return st.load_file(os.path.join(out, "adapter", "adapter_model.safetensors"))


def max_diff(a, b):
    assert set(a) == set(b)
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


@pytest.fixture(scope="module")
def one_process(base, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("one"))
    assert distill.main(args_for(base, out, 3)) == 0
    return out


def test_two_processes_train_the_one_process_adapter(base, one_process, tmp_path):
    out = str(tmp_path / "two")
    text = torchrun(2, args_for(base, out, 3))
    assert "2 processes (gloo), 3 windows each" in text
    assert text.count("exported") == 1                  # rank 0 alone writes
    one, two = adapter(one_process), adapter(out)
    assert max_diff(one, two) < ATOL
    moved = max((one[k].float()).abs().max().item() for k in one if "lora_B" in k)
    assert moved > 100 * ATOL                           # the steps changed the adapter
    h1 = json.load(open(os.path.join(one_process, "run.json")))["history"]
    h2 = json.load(open(os.path.join(out, "run.json")))["history"]
    assert [h["step"] for h in h1] == [h["step"] for h in h2] == [0, 2, 3]
    for a, b in zip(h1, h2):  # the sharded evaluation adds up to the one-process evaluation
        assert abs(a["empty_loss"] - b["empty_loss"]) < 1e-4
        assert a["empty_row_agree"] == b["empty_row_agree"]
    # The examples the two processes generated (each every other batch) are the same.
    d1 = torch.load(os.path.join(one_process, "data.pt"))
    d2 = torch.load(os.path.join(out, "data.pt"))
    assert torch.equal(d1["train"]["cont"], d2["train"]["cont"])
    assert torch.equal(d1["eval"]["start"], d2["eval"]["start"])


def test_two_processes_resume_where_they_stopped(base, one_process, tmp_path):
    out = str(tmp_path / "resumed")
    torchrun(2, args_for(base, out, 2))
    text = torchrun(2, args_for(base, out, 3, ["--resume"]))
    assert "resumed from" in text and "at step 2" in text and "step 3/3" in text
    assert max_diff(adapter(one_process), adapter(out)) < ATOL


def test_batch_must_split_evenly(base, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    cmd = [sys.executable, "-m", "training.torchrun", "--standalone", "--nproc_per_node", "2",
           "-m", "training", "distill"] + args_for(base, str(tmp_path / "x"), 1, ["--batch", "5"])
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "--batch 5 must be a multiple of the 2 processes" in r.stderr


def test_world_shards_and_gathers_in_rank_order():
    sizes = [(distributed.World(r, 3).shard(8)) for r in range(3)]
    assert [(s.start, s.stop) for s in sizes] == [(0, 3), (3, 6), (6, 8)]
    assert distributed.World().shard(5) == slice(0, 5)
    assert not distributed.from_env().enabled or "WORLD_SIZE" in os.environ


def test_grad_checkpoint_gives_the_same_gradients(base):
    m = load_model_dir(base[0])
    m.add_lora(4, 8.0, seed=1)
    for n, p in m.named_parameters():
        p.requires_grad_("lora_" in n)
    lora = m.lora_parameters()
    with torch.no_grad():
        for p in lora:
            p.normal_(0, 0.1)
    ids = torch.randint(0, VOCAB, (3, 10), generator=torch.Generator().manual_seed(0))
    grads = []
    for ckpt in (False, True):
        m.grad_checkpoint = ckpt
        for p in lora:
            p.grad = None
        logits, _ = m(ids, use_lora=True)
        logits.logsumexp(-1).sum().backward()
        grads.append([p.grad.clone() for p in lora])
    assert all(g is not None for g in grads[1])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))


def test_engine_data_file_round_trips_and_trains(base, tmp_path):
    """A file in crossreg-distill-data's format (written here by the Python writer) drives
    training in place of PyTorch generation; a corrupt one is refused by name."""
    model_dir, tokens = base
    stream = np.load(tokens)
    rng = np.random.default_rng(0)
    splits = {}
    for name, n in (("train", 10), ("eval", 4)):
        lens = rng.integers(4, 12, n)
        starts = rng.integers(0, len(stream) - 12, n)
        cont = rng.integers(0, VOCAB - 1, (n, 6)).astype(np.int32)
        splits[name] = Examples(stream.astype(np.int32), starts, lens, cont)
    path = str(tmp_path / "d.bin")
    write_engine_file(path, {"window": 6, "vocab_size": VOCAB, "model": model_dir}, splits)
    h, back = read_engine_file(path)
    assert h["window"] == 6 and len(back["train"]) == 10 and len(back["eval"]) == 4
    for name in ("train", "eval"):
        assert all(back[name].prefix(i) == splits[name].prefix(i) for i in range(4))
        assert np.array_equal(np.asarray(back[name].cont), splits[name].cont)
    assert all(spec["offset"] % 8 == 0 for spec in h["arrays"].values())
    out = str(tmp_path / "from_file")
    argv = [x for x in args_for(base, out, 2)]
    argv[argv.index("--corpus-tokens"):argv.index("--corpus-tokens") + 2] = ["--data", path]
    assert distill.main(argv) == 0
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["data"]["data_file"] == os.path.abspath(path) and run["steps_done"] == 2
    assert not os.path.exists(os.path.join(out, "data.pt"))  # nothing generated in PyTorch

    bad = str(tmp_path / "bad.bin")
    shutil.copy(path, bad)
    with open(bad, "r+b") as f:
        f.truncate(os.path.getsize(path) - 16)
    with pytest.raises(SystemExit, match="runs past the end of the file"):
        read_engine_file(bad)
    with open(bad, "r+b") as f:
        f.write(b"NOTADIST")
    with pytest.raises(SystemExit, match="not a crossreg-distill-data file"):
        read_engine_file(bad)
    argv[argv.index("--data") + 1] = path
    with pytest.raises(SystemExit, match="vocabulary of 65 tokens, the base has 64"):
        big = str(tmp_path / "big.bin")
        write_engine_file(big, {"window": 6, "vocab_size": 65}, splits)
        argv[argv.index("--data") + 1] = big
        distill.main(argv)


def random_lora_model(path):
    """The base at `path` with a rank-4 LoRA of non-zero random weights."""
    m = load_model_dir(path)
    m.add_lora(4, 8.0, seed=1)
    with torch.no_grad():
        for p in m.lora_parameters():
            p.normal_(0, 0.1)
    return m


def test_grouped_windows_equal_one_window_per_prefix(base):
    """K windows over one prefix forward give each window's logits of its own prefix."""
    m = random_lora_model(base[0])
    stream = np.load(base[1])
    rng = np.random.default_rng(5)
    K, G, w = 3, 2, 6
    lens = rng.integers(4, 20, (G, K)).reshape(-1)
    lens[1] = lens[0]                               # equal anchors in a group are allowed
    starts = np.repeat(rng.integers(0, len(stream) - 20, G), K)
    cont = rng.integers(0, VOCAB - 1, (G * K, w))
    grouped = Examples(stream, starts, lens, cont, group=K)
    alone = Examples(stream, starts, lens, cont)
    idx = torch.arange(G * K)
    noisy = lambda clean: torch.where(torch.arange(w)[None] >= 3, VOCAB - 1, clean)  # noqa
    ctx = __import__("contextlib").nullcontext
    outs = [distill.forward_batch(m, d, idx, "cpu", noisy, ctx, VOCAB - 1) for d in (grouped, alone)]
    (lg, qg, pg, rg, cg), (la, qa, pa, ra, ca) = outs
    assert torch.equal(rg, ra) and torch.equal(cg, ca)
    assert torch.allclose(qg, qa, atol=1e-5) and torch.allclose(pg, pa, atol=1e-5)
    assert abs(lg.item() - la.item()) < 1e-5
    with pytest.raises(ValueError, match="whole groups of 3"):
        distill.forward_batch(m, grouped, torch.arange(1, 4), "cpu", None, ctx)
    with pytest.raises(ValueError, match="does not share its start"):
        Examples(stream, starts[::-1].copy() + np.arange(G * K), lens, cont, group=K)


def test_two_processes_with_grouped_windows(base, tmp_path):
    grouped = ["--windows-per-prefix", "3"]
    one = str(tmp_path / "one")
    assert distill.main(args_for(base, one, 2, grouped)) == 0
    d = torch.load(os.path.join(one, "data.pt"))
    assert d["train"]["group"] == 3 and d["eval"]["group"] == 1
    starts = d["train"]["start"].view(-1, 3)
    assert torch.equal(starts, starts[:, :1].expand(-1, 3))
    two = str(tmp_path / "two")
    text = torchrun(2, args_for(base, two, 2, grouped))
    assert "3 windows each" in text
    assert max_diff(adapter(one), adapter(two)) < ATOL
    with pytest.raises(SystemExit, match="--windows-per-prefix 4: must be >= 1 and divide"):
        distill.main(args_for(base, str(tmp_path / "x"), 1, ["--windows-per-prefix", "4"]))


def test_grouped_outcome_blocks_equal_one_window_per_prefix_and_the_layout(base):
    """Outcome blocks over grouped windows give each window's blocks of its own prefix, and
    equal the single-sequence layout (layout.outcome_block_logits, tested against a naive
    forward)."""
    m = random_lora_model(base[0])
    stream = np.load(base[1])
    rng = np.random.default_rng(6)
    K, G, w, f = 3, 2, 5, 3
    lens = rng.integers(4, 20, (G, K)).reshape(-1)
    starts = np.repeat(rng.integers(0, len(stream) - 20, G), K)
    cont = rng.integers(0, VOCAB - 1, (G * K, w))
    grouped = Examples(stream, starts, lens, cont, group=K)
    alone = Examples(stream, starts, lens, cont)
    idx = torch.arange(G * K)
    anchors = distill.block_anchors(G * K, w, 2, torch.Generator().manual_seed(3))
    ctx = __import__("contextlib").nullcontext
    (lg, qg, pg, hg), (la, qa, pa, ha) = [
        distill.forward_blocks(m, d, idx, "cpu", anchors, f, ctx, VOCAB - 1, 2.0, 0.5)
        for d in (grouped, alone)]
    assert torch.equal(hg, ha) and torch.allclose(pg, pa, atol=1e-5)
    assert torch.allclose(qg, qa, atol=1e-5) and abs(lg.item() - la.item()) < 1e-5
    for i in (0, 4):
        x = alone.prefix(i)
        control = [x[-1]] + [int(t) for t in cont[i, :w - 1]]
        _, ref = layout.outcome_block_logits(m, x, control, anchors[i].tolist(), f, VOCAB - 1)
        assert torch.allclose(qa[i], ref, atol=1e-5)
    # Rows past the window's end carry no loss: the last outcome's block has one target.
    last = distill.block_anchors(1, w, 0, torch.Generator())
    assert last[0].tolist() == list(range(w - 1))
    _, _, _, has = distill.forward_blocks(m, alone, idx[:1], "cpu", last, f, ctx, VOCAB - 1)
    assert has[0].sum(1).tolist() == [min(f, w - 1 - n) for n in range(w - 1)]
