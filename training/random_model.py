"""Write a Llama model with random weights (Hugging Face directory, bf16) at a chosen size,
for serving benchmarks where no trained model of that size is at hand (the GPU machine
has no network). Its text is noise; its greedy output loops, as random models' do.

python3 -m training.random_model --out /tmp/random-1b --tokenizer models/default/tokenizer.json
"""
import argparse
import time

import torch

from .hf_io import save_model_dir, DTYPES
from .model import LlamaConfig, LlamaForCausalLM
from .tokenizer import ByteBPETokenizer


def build_parser():
    p = argparse.ArgumentParser(prog="python3 -m training.random_model", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--tokenizer", default="models/default/tokenizer.json",
                   help="tokenizer.json to ship with the model (sets the vocabulary size)")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=5632)
    p.add_argument("--context", type=int, default=4096)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--std", type=float, default=0.02, help="standard deviation of the weights")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    return p


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    start = time.time()
    tok = ByteBPETokenizer.load(a.tokenizer)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=a.hidden, intermediate_size=a.ffn,
                      num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, max_position_embeddings=a.context,
                      tie_word_embeddings=False, bos_token_id=tok.specials.get("<|bos|>"),
                      eos_token_id=tok.specials.get("<|eos|>"))
    model = LlamaForCausalLM(cfg)
    model.init_weights(a.seed, std=a.std)
    params = sum(p.numel() for p in model.parameters())
    save_model_dir(model, a.out, tok, DTYPES[a.dtype])
    print(f"wrote {a.out}: {params / 1e6:.0f}M parameters ({a.layers} layers, hidden {a.hidden}, "
          f"ffn {a.ffn}, heads {a.heads}/{a.kv_heads}, vocab {tok.vocab_size}), {a.dtype}, "
          f"{time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
