#!/usr/bin/env python3
"""Writes a random Llama model as a Hugging Face directory (config.json, one
model.safetensors, the default model's tokenizer), for load-time figures on shapes no model
in the repository has: `crossreg-generate --model DIR --quantize q4_k` prints how long the
quantizing took (docs/benchmarks.md, "Xeon AMX: Cross-Regression, quantizing, a ~1.1B
model from DRAM").

The default shape is TinyLlama-1.1B's (22 x 2048, ffn 5632, 32 heads, 4 K/V heads) with the
default model's vocabulary of 16384: about 1.04 B weights, 2.1 GB in bf16. Weights are
normal with standard deviation 0.02 (the usual initializer), norms 1. Needs numpy.
"""

import argparse
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(REPO, "models", "default")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="directory to write (created; files in it are replaced)")
    p.add_argument("--layers", type=int, default=22)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--ffn", type=int, default=5632)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv_heads", type=int, default=4)
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for name in ("layers", "hidden", "ffn", "heads", "kv_heads"):
        if getattr(args, name) <= 0:
            print(f"write_random_hf_model.py: --{name} must be positive", file=sys.stderr)
            return 2
    if args.hidden % args.heads != 0 or args.heads % args.kv_heads != 0:
        print("write_random_hf_model.py: --hidden must be a multiple of --heads, and --heads of --kv_heads",
              file=sys.stderr)
        return 2
    try:
        import numpy as np
    except ImportError:
        print("write_random_hf_model.py: needs numpy (apt install python3-numpy)", file=sys.stderr)
        return 1

    cfg = json.load(open(os.path.join(DEFAULT_MODEL, "config.json")))
    cfg.pop("crossreg_draft", None)
    head_dim = args.hidden // args.heads
    vocab = cfg["vocab_size"]
    cfg.update(hidden_size=args.hidden, intermediate_size=args.ffn, num_hidden_layers=args.layers,
               num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, head_dim=head_dim,
               tie_word_embeddings=False,
               torch_dtype={"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[args.dtype])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(DEFAULT_MODEL, name), os.path.join(args.out, name))

    rng = np.random.default_rng(args.seed)
    st_dtype = {"bf16": "BF16", "f16": "F16", "f32": "F32"}[args.dtype]

    def encode(a):  # float32 array -> bytes of the chosen dtype
        if args.dtype == "f32":
            return a.astype(np.float32)
        if args.dtype == "f16":
            return a.astype(np.float16)
        bits = a.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even

    shapes = [("model.embed_tokens.weight", (vocab, args.hidden)), ("lm_head.weight", (vocab, args.hidden)),
              ("model.norm.weight", (args.hidden,))]
    for layer in range(args.layers):
        pre = f"model.layers.{layer}."
        shapes += [(pre + "input_layernorm.weight", (args.hidden,)),
                   (pre + "post_attention_layernorm.weight", (args.hidden,)),
                   (pre + "self_attn.q_proj.weight", (args.heads * head_dim, args.hidden)),
                   (pre + "self_attn.k_proj.weight", (args.kv_heads * head_dim, args.hidden)),
                   (pre + "self_attn.v_proj.weight", (args.kv_heads * head_dim, args.hidden)),
                   (pre + "self_attn.o_proj.weight", (args.hidden, args.heads * head_dim)),
                   (pre + "mlp.gate_proj.weight", (args.ffn, args.hidden)),
                   (pre + "mlp.up_proj.weight", (args.ffn, args.hidden)),
                   (pre + "mlp.down_proj.weight", (args.hidden, args.ffn))]
    item = {"bf16": 2, "f16": 2, "f32": 4}[args.dtype]
    header, offset = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape)) * item
        header[name] = {"dtype": st_dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    path = os.path.join(args.out, "model.safetensors")
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for i, (name, shape) in enumerate(shapes):
            if name.endswith("norm.weight"):
                values = np.ones(shape, np.float32)
            else:
                values = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            f.write(encode(values).tobytes())
            print(f"\r[write_random_hf_model] {i + 1}/{len(shapes)} tensors", end="", file=sys.stderr)
    print(f"\n[write_random_hf_model] {path}: {offset / 1e9:.2f} GB, "
          f"{offset // item / 1e9:.2f} B weights", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
