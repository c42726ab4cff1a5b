"""distill --plan: the counts it plans with, and a measured plan on a tiny config."""
import json
import os

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import distill, distill_plan  # noqa: E402

LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
             "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
             "rope_theta": 500000.0, "max_position_embeddings": 8192,
             "tie_word_embeddings": False, "hidden_act": "silu"}
TINY = {"model_type": "llama", "vocab_size": 96, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 256, "tie_word_embeddings": True}


def write_config(tmp_path, cfg, name):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def plan_args(base, out, *extra):
    a = distill.build_parser().parse_args(["--plan", "--base", base, "--out", out] + list(extra))
    a.targets_list = [t for t in a.targets.split(",") if t]
    return a


def test_llama3_8b_counts_and_memory_model(tmp_path):
    base = write_config(tmp_path, LLAMA3_8B, "l8b")
    cfg = distill_plan.read_config(base)
    assert distill_plan.base_params(cfg) == 8_030_261_248       # Llama-3-8B's published count
    a = plan_args(base, "", "--rank", "32")
    assert distill_plan.lora_params(cfg, 32, a.targets_list) == 83_886_080
    mem = distill_plan.memory_model(cfg, a, 64, 2)
    assert mem["base"] == 2 * 8_030_261_248
    assert mem["lora_and_adamw"] == 16 * 83_886_080
    assert mem["prefix_kv"] == 32 * 2 * 64 * 192 * 1024 * 2   # --prefix-max 192 default
    ck = distill_plan.memory_model(cfg, plan_args(base, "", "--grad-checkpoint"), 64, 2)
    assert ck["activations"] < mem["activations"] / 10
    # One H100 (80 GB) holds the 8B distillation with checkpointing at batch 64, prefixes 768.
    a768 = plan_args(base, "", "--grad-checkpoint", "--prefix-max", "768", "--batch", "64")
    assert distill_plan.peak_of(distill_plan.memory_model(cfg, a768, 64, 2)) < 70 * 1024 ** 3


def test_memory_model_only_plan_for_any_size(tmp_path, capsys):
    base = write_config(tmp_path, LLAMA3_8B, "l8b")
    out = str(tmp_path / "plan")
    assert distill.main(["--plan", "--base", base, "--out", out, "--plan-steps", "0",
                         "--dtype", "bf16", "--plan-gpus", "8", "--batch", "64"]) == 0
    text = capsys.readouterr().out
    assert "8.03B parameters" in text and "83.9M parameters" in text
    assert "8 GPU(s), 8 windows of 16 rows each" in text
    plan = json.load(open(os.path.join(out, "plan.json")))
    assert plan["windows_per_gpu"] == 8 and "step_s" not in plan   # nothing measured


def test_measured_plan_extrapolates_from_fewer_layers(tmp_path, capsys):
    base = write_config(tmp_path, TINY, "tiny")
    out = str(tmp_path / "plan")
    assert distill.main(["--plan", "--base", base, "--out", out, "--plan-steps", "1",
                         "--batch", "4", "--prefix-max", "12", "--window", "4", "--rank", "2",
                         "--plan-gpus", "2", "--plan-tokens", "1000", "--n-examples", "50",
                         "--device", "cpu", "--threads", "1"]) == 0
    text = capsys.readouterr().out
    assert "1 layer(s)" in text and "2 layer(s)" in text and "-> 3 layers" in text
    plan = json.load(open(os.path.join(out, "plan.json")))
    assert set(plan["measured"]) == {"1", "2"}
    assert plan["steps"] == 63                   # ceil(1000 / (4 windows x 4 rows))
    assert plan["step_s"] > 0 and plan["gen_batch_s"] > 0
    assert plan["train_gpu_h"] == pytest.approx(2 * plan["train_wall_h"])
    assert plan["allreduce_s"] > 0


def test_bad_plans_are_refused_by_name(tmp_path):
    with pytest.raises(SystemExit, match="no config.json"):
        distill.main(["--plan", "--base", str(tmp_path)])
    bad = write_config(tmp_path, dict(TINY, hidden_act="gelu"), "gelu")
    with pytest.raises(SystemExit, match="hidden_act 'gelu' unsupported"):
        distill.main(["--plan", "--base", bad])
    base = write_config(tmp_path, TINY, "tiny")
    with pytest.raises(SystemExit, match="--plan-gpus 3: must be >= 1 and divide --batch 32"):
        distill.main(["--plan", "--base", base, "--plan-gpus", "3"])
