import json
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import random_model  # noqa: E402
from training.hf_io import load_model_dir  # noqa: E402
from training.tokenizer import train_bpe, DEFAULT_SPECIALS  # noqa: E402


def test_random_model_writes_a_loadable_bf16_llama_of_the_asked_shape(tmp_path):
    tok = train_bpe(["def f(x):\n    return x + 1\n" * 8], 300, DEFAULT_SPECIALS)
    tok_path = str(tmp_path / "tokenizer.json")
    tok.save(tok_path)
    out = str(tmp_path / "model")
    assert random_model.main(["--out", out, "--tokenizer", tok_path, "--hidden", "32", "--layers", "2",
                              "--heads", "4", "--kv-heads", "2", "--ffn", "64", "--context", "128"]) == 0
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_key_value_heads"]) == (32, 2, 2)
    assert cfg["vocab_size"] == tok.vocab_size and cfg["torch_dtype"] == "bfloat16"
    model = load_model_dir(out)
    weights = [p for n, p in model.named_parameters() if n.endswith("q_proj.weight")]
    assert len(weights) == 2 and 0.005 < float(weights[0].std()) < 0.05  # std 0.02, not zeros
    assert os.path.exists(os.path.join(out, "tokenizer.json"))
