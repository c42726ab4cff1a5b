"""pretrain and distill end to end on a tiny corpus (a few seconds each on CPU)."""
import json
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import pretrain, distill, export_fixture  # noqa: E402
from training.hf_io import load_model_dir, load_adapter  # noqa: E402
from training import safetensors_io as st  # noqa: E402

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_ARGS = ["--vocab-size", "300", "--hidden", "32", "--layers", "2", "--heads", "4",
              "--kv-heads", "2", "--ffn", "48", "--seq-len", "32", "--batch", "4",
              "--eval-batches", "1", "--log-every", "1", "--device", "cpu", "--holdout-pct", "30"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    for name in ("model.py", "layout.py", "tokenizer.py", "hf_io.py"):
        with open(os.path.join(PKG, name)) as f:
            (d / name).write_text(f.read())
    (d / "tests").mkdir()
    (d / "tests" / "skipped.py").write_text("this file must be excluded\n")
    return str(d)


@pytest.fixture(scope="module")
def pretrained(corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("pt"))
    args = ["--out", out, "--corpus-root", corpus, "--eval-every", "3"] + MODEL_ARGS
    assert pretrain.main(args + ["--steps", "3"]) == 0
    return out, args


def test_pretrain_exports_loadable_model(pretrained, corpus):
    out, _ = pretrained
    mdir = os.path.join(out, "model")
    for f in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert os.path.exists(os.path.join(mdir, f)), f
    m = load_model_dir(mdir)
    assert m.config.vocab_size == 300
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["corpus"]["n_files"] == 4  # tests/ excluded
    assert len(run["corpus"]["manifest_sha256"]) == 64
    assert run["final"]["step"] == 3 and run["final"]["heldout_loss"] > 0
    lines = open(os.path.join(out, "corpus_files.txt")).read().split("\n")
    assert [ln.split("  ")[1] for ln in lines if ln] == sorted(
        ["hf_io.py", "layout.py", "model.py", "tokenizer.py"])


def test_pretrain_resume_continues_step_count(pretrained, capsys):
    out, args = pretrained
    assert pretrain.main(args + ["--steps", "5", "--resume"]) == 0
    text = capsys.readouterr().out
    assert "resumed from" in text and "at step 3" in text
    assert "step 4/5" in text and "step 1/5" not in text
    assert torch.load(os.path.join(out, "checkpoint.pt"))["step"] == 5


def test_pretrain_init_model_starts_from_its_weights(pretrained, corpus, tmp_path, capsys):
    """--init-model: the architecture and weights come from the directory (the size flags are
    ignored); with --hybrid the export says it drafts for itself. A model read through
    another tokenizer is refused."""
    out, _ = pretrained
    src = os.path.join(out, "model")
    dst = str(tmp_path / "init")
    base = ["--out", dst, "--corpus-root", corpus, "--seq-len", "32", "--batch", "4", "--eval-batches", "1",
            "--log-every", "1", "--device", "cpu", "--holdout-pct", "30", "--vocab-size", "300",
            "--init-model", src]
    assert pretrain.main(base + ["--steps", "0", "--hidden", "64"]) == 0
    a, b = load_model_dir(src), load_model_dir(os.path.join(dst, "model"))
    assert b.config.hidden_size == 32
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n
    assert pretrain.main(base + ["--steps", "2", "--hybrid", "--hybrid-anchors", "2", "--hybrid-rows", "2",
                                 "--hybrid-target", "self", "--out", str(tmp_path / "hy")]) == 0
    cfg = json.load(open(os.path.join(tmp_path / "hy", "model", "config.json")))
    assert cfg["crossreg_draft"]["draft_layout"] == "blocks" and cfg["hidden_size"] == 32
    assert cfg["crossreg_draft"]["block_rows"] == 2  # --hybrid-rows: the depth a server defaults to
    with pytest.raises(SystemExit, match="tokenizer.json is missing or differs"):
        pretrain.main(base + ["--steps", "1", "--vocab-size", "280", "--out", str(tmp_path / "other")])


def test_distill_exports_peft_adapter_and_resumes(pretrained, corpus, tmp_path, capsys):
    out, _ = pretrained
    base = os.path.join(out, "model")
    dout = str(tmp_path / "distill")
    args = ["--base", base, "--out", dout, "--corpus-root", corpus, "--n-examples", "16",
            "--n-eval", "8", "--prefix-min", "4", "--prefix-max", "24", "--gen-batch", "8",
            "--rank", "4", "--alpha", "8", "--batch", "4", "--eval-every", "2",
            "--log-every", "1", "--device", "cpu"]
    assert distill.main(args + ["--steps", "2"]) == 0
    adir = os.path.join(dout, "adapter")
    cfg = json.load(open(os.path.join(adir, "adapter_config.json")))
    assert cfg["peft_type"] == "LORA" and cfg["r"] == 4 and cfg["lora_alpha"] == 8
    assert cfg["bias"] == "none" and cfg["task_type"] == "CAUSAL_LM"
    assert set(cfg["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                          "up_proj", "down_proj"}
    xr = json.load(open(os.path.join(adir, "crossreg_adapter.json")))
    assert xr["window"] == 16 and xr["placeholder_token_id"] == 299
    t = st.load_file(os.path.join(adir, "adapter_model.safetensors"))
    a = t["base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"]
    b = t["base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"]
    assert tuple(a.shape) == (4, 32) and tuple(b.shape) == (32, 4)
    assert len(t) == 2 * 7 * 2
    m = load_model_dir(base)
    load_adapter(m, adir)
    capsys.readouterr()
    assert distill.main(args + ["--steps", "3", "--resume"]) == 0
    text = capsys.readouterr().out
    assert "reusing distillation data" in text and "at step 2" in text and "step 3/3" in text
    first = json.load(open(os.path.join(dout, "run.json")))["history"][-1]
    assert len(first["empty_row_agree"]) == 6 and 0.0 <= first["empty_fork_accepted"] <= 15.0
    t = st.load_file(os.path.join(adir, "adapter_model.safetensors"))  # after step 3

    # Starting from that adapter with no steps reproduces its evaluation and exports it
    # unchanged; the recipe options run.
    dout2 = str(tmp_path / "distill2")
    args2 = [dout2 if x == dout else x for x in args]
    assert distill.main(args2 + ["--steps", "0", "--init-adapter", adir]) == 0
    again = json.load(open(os.path.join(dout2, "run.json")))["history"][0]
    assert again["empty_row_agree"] == first["empty_row_agree"]
    assert abs(again["empty_loss"] - first["empty_loss"]) < 1e-5
    t2 = st.load_file(os.path.join(dout2, "adapter", "adapter_model.safetensors"))
    assert all(torch.equal(t[k], t2[k]) for k in t)
    assert distill.main(args2 + ["--steps", "2", "--init-adapter", adir, "--placeholder-decay",
                                 "0.5", "--lr-decay", "cosine"]) == 0
    t3 = st.load_file(os.path.join(dout2, "adapter", "adapter_model.safetensors"))
    assert any(not torch.equal(t[k], t3[k]) for k in t)


def test_export_fixture_is_deterministic_and_consistent(tmp_path):
    a = export_fixture.build_parser().parse_args(["--out", str(tmp_path / "a")])
    fx = export_fixture.make(a)
    b = export_fixture.build_parser().parse_args(["--out", str(tmp_path / "b")])
    assert export_fixture.make(b) == fx
    assert (tmp_path / "a" / "model" / "model.safetensors").read_bytes() == \
        (tmp_path / "b" / "model" / "model.safetensors").read_bytes()
    for c in fx["cases"]:
        L, ctl, prd = len(c["prefix"]), torch.tensor(c["control_logits"]), \
            torch.tensor(c["predictive_logits"])
        assert c["rows"][0] == c["prefix"][-1] and len(c["rows"]) == fx["gamma"]
        assert torch.allclose(ctl[0], torch.tensor(c["prefix_logits"][L - 1]), atol=1e-5)
        assert (ctl - prd).abs().max() > 1e-2


def test_distill_auto_steps_fits_the_schedule_to_the_budget(pretrained, corpus, tmp_path, capsys):
    out, _ = pretrained
    dout = str(tmp_path / "distill_auto")
    args = ["--base", os.path.join(out, "model"), "--out", dout, "--corpus-root", corpus,
            "--n-examples", "16", "--n-eval", "8", "--prefix-min", "4", "--prefix-max", "24",
            "--gen-batch", "8", "--rank", "4", "--alpha", "8", "--batch", "4", "--eval-every", "1000",
            "--log-every", "5", "--device", "cpu", "--warmup", "10", "--lr-decay", "cosine"]
    with pytest.raises(SystemExit, match="--auto-steps"):
        distill.main(args + ["--steps", "50", "--auto-steps"])
    assert distill.main(args + ["--steps", "1000000", "--auto-steps", "--time-budget-s", "8",
                                "--reserve-s", "2"]) == 0
    text = capsys.readouterr().out
    assert "auto-steps:" in text and "steps fit the budget" in text
    run = json.load(open(os.path.join(dout, "run.json")))
    planned = run["args"]["steps"]
    assert 10 < planned < 1000000          # fitted to the 8 s budget, not the asked-for count
    assert run["steps_done"] <= planned
    # A resumed run keeps the fitted schedule (its cosine's end), not the command line's count.
    assert distill.main(args + ["--steps", "1000000", "--auto-steps", "--time-budget-s", "8",
                                "--reserve-s", "2", "--resume"]) == 0
    resumed = json.load(open(os.path.join(dout, "run.json")))
    assert resumed["args"]["steps"] == planned
    assert resumed["steps_done"] <= planned


def test_distill_outcome_blocks_on_the_corpus(pretrained, corpus, tmp_path, capsys):
    out, _ = pretrained
    dout = str(tmp_path / "blocks")
    args = ["--base", os.path.join(out, "model"), "--out", dout, "--corpus-root", corpus,
            "--n-examples", "16", "--n-eval", "8", "--prefix-min", "4", "--prefix-max", "24",
            "--gen-batch", "8", "--rank", "4", "--alpha", "8", "--batch", "4", "--eval-every", "2",
            "--log-every", "1", "--device", "cpu", "--draft-layout", "blocks", "--block-anchors", "0",
            "--placeholder-weight", "2", "--placeholder-decay", "0.8", "--lr-decay", "cosine"]
    assert distill.main(args + ["--steps", "2"]) == 0
    xr = json.load(open(os.path.join(dout, "adapter", "crossreg_adapter.json")))
    assert xr["draft_layout"] == "blocks" and xr["window"] == 16
    hist = json.load(open(os.path.join(dout, "run.json")))["history"]
    assert [h["step"] for h in hist] == [0, 2]
    assert len(hist[-1]["empty_row_agree"]) == 6 and 0.0 <= hist[-1]["empty_fork_accepted"] <= 15.0
    t = st.load_file(os.path.join(dout, "adapter", "adapter_model.safetensors"))
    assert any(k.endswith("lora_B.weight") and t[k].abs().max() > 0 for k in t)  # it trained
    capsys.readouterr()
    assert distill.main(args + ["--steps", "3", "--resume"]) == 0
    assert "at step 2" in capsys.readouterr().out
