"""Write a parity fixture for the C++ engine: a tiny random Llama (HF directory), a random
non-zero LoRA adapter (PEFT directory) and fixture.json with the expected float32 logits of
control and predictive rows in the Cross-Regression layout, and of the outcome blocks of each
case's control rows (docs/algorithm.md; see training/README.md).

python3 -m training.export_fixture --out tests/fixtures/xr_tiny --seed 7
With --model DIR --adapter DIR the fixture is of that model and trained adapter instead
(copied into OUT), so crossreg_parity_tests checks the engine on an adapter the trainer made.
"""
import argparse
import json
import os
import shutil

import torch

from .common import seed_all
from .hf_io import save_model_dir, save_adapter, load_model_dir, load_adapter, DTYPES
from .layout import predictive_logits, outcome_block_logits
from .model import LlamaConfig, LlamaForCausalLM
from .tokenizer import train_bpe, DEFAULT_SPECIALS

BLOCK_ROWS = 3  # rows per outcome block in the fixture

_TOKENIZER_TEXT = ("def forward(self, x):\n    return self.proj(x) + x\n"
                   "for i in range(10):\n    print(i, 'hello world')\n") * 4


def build_parser():
    p = argparse.ArgumentParser(prog="python3 -m training.export_fixture", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default="training/runs/fixture", help="output directory")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--vocab-size", type=int, default=320)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=128)
    p.add_argument("--tied", action="store_true", help="tie lm_head to the embeddings")
    p.add_argument("--rank", type=int, default=4)
    p.add_argument("--alpha", type=float, default=8.0)
    p.add_argument("--gamma", type=int, default=5, help="predictive rows per case")
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"],
                   help="stored weight dtype (expected logits are computed from the stored "
                        "values, in float32)")
    p.add_argument("--device", default="cpu", choices=["cpu"], help="fixtures are made on CPU")
    p.add_argument("--model", default="", help="an existing HF model directory (with --adapter) "
                                               "instead of a random one")
    p.add_argument("--adapter", default="", help="the PEFT adapter trained for --model")
    return p


def copy_model_and_adapter(a) -> tuple:
    """--model/--adapter copied to OUT/model and OUT/adapter -> (vocab, placeholder, scale)."""
    if not (a.model and a.adapter):
        raise SystemExit("--model and --adapter go together")
    mdir, adir = os.path.join(a.out, "model"), os.path.join(a.out, "adapter")
    for src, dst in ((a.model, mdir), (a.adapter, adir)):
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst)
    with open(os.path.join(adir, "crossreg_adapter.json")) as f:
        placeholder = int(json.load(f)["placeholder_token_id"])
    with open(os.path.join(adir, "adapter_config.json")) as f:
        cfg = json.load(f)
    return placeholder, float(cfg["lora_alpha"]) / int(cfg["r"])


def make(a) -> dict:
    seed_all(a.seed)
    os.makedirs(a.out, exist_ok=True)
    if a.model or a.adapter:
        placeholder, scale = copy_model_and_adapter(a)
        mdir = os.path.join(a.out, "model")
        with open(os.path.join(mdir, "config.json")) as f:
            stored = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}.get(
                json.load(f).get("torch_dtype"), "f32")
        return write_cases(a, mdir, os.path.join(a.out, "adapter"), placeholder, scale, stored)
    tok = train_bpe([_TOKENIZER_TEXT], a.vocab_size, DEFAULT_SPECIALS)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=a.hidden, intermediate_size=a.ffn,
                      num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, max_position_embeddings=128,
                      tie_word_embeddings=a.tied, bos_token_id=tok.specials["<|bos|>"],
                      eos_token_id=tok.specials["<|eos|>"])
    model = LlamaForCausalLM(cfg)
    model.init_weights(a.seed, std=0.08)
    g = torch.Generator().manual_seed(a.seed + 1)
    with torch.no_grad():  # non-trivial norm weights so a skipped norm weight is caught
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
    model.add_lora(a.rank, a.alpha, seed=a.seed + 2)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    placeholder = tok.specials["<|draft|>"]
    mdir, adir = os.path.join(a.out, "model"), os.path.join(a.out, "adapter")
    save_model_dir(model, mdir, tok, DTYPES[a.dtype])
    save_adapter(model, adir, a.rank, a.alpha, "model", placeholder, a.gamma)
    return write_cases(a, mdir, adir, placeholder, a.alpha / a.rank, a.dtype)


def write_cases(a, mdir: str, adir: str, placeholder: int, scale: float, dtype: str) -> dict:
    """fixture.json: expected logits of three prefix/draft cases, computed from what was
    written (so from the stored, rounded values)."""
    ref = load_model_dir(mdir)
    cfg = ref.config
    load_adapter(ref, adir)
    ref.eval()
    cases = []
    for ci, (L, m) in enumerate([(7, 3), (4, a.gamma - 1), (1, 0)]):
        gen = torch.Generator().manual_seed(a.seed * 100 + ci)
        x = torch.randint(0, cfg.vocab_size - 3, (L,), generator=gen).tolist()
        drafts = torch.randint(0, cfg.vocab_size - 3, (m,), generator=gen).tolist()
        rows = [x[-1]] + drafts + [placeholder] * (a.gamma - 1 - m)
        with torch.no_grad():
            full, _ = ref(torch.tensor([x]))
            ctl, prd = predictive_logits(ref, [x], [rows])
            # Outcome blocks after every outcome n = 0 .. m of the control rows [x_last, d_1..d_m].
            _, blk = outcome_block_logits(ref, x, rows[:m + 1], list(range(m + 1)), BLOCK_ROWS, placeholder)
        cases.append({"prefix": x, "num_drafts": m, "rows": rows,
                      "row_positions": list(range(L - 1, L - 1 + a.gamma)),
                      "prefix_logits": full[0].tolist(), "control_logits": ctl[0].tolist(),
                      "predictive_logits": prd[0].tolist(),
                      "block_rows": BLOCK_ROWS, "block_logits": blk.tolist()})
    fx = {"format": "crossreg-fixture-v1", "seed": a.seed, "model_dir": "model",
          "adapter_dir": "adapter", "weights_dtype": dtype, "logits_dtype": "float32",
          "vocab_size": cfg.vocab_size, "gamma": a.gamma, "placeholder_token_id": placeholder,
          "lora_scale": scale, "cases": cases}
    with open(os.path.join(a.out, "fixture.json"), "w") as f:
        json.dump(fx, f)
    return fx


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    fx = make(a)
    print(f"wrote {a.out}/fixture.json ({len(fx['cases'])} cases), {a.out}/model, {a.out}/adapter")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
