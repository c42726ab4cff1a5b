"""PyTorch peer of crossreg-bench-gpu: the same Llama-3-8B shapes with random bf16
weights on the GPU, eager PyTorch with SDPA over a preallocated K/V cache.

Reports, per batch size, ms per decode forward (one new token per sequence) and the
cost of a forward of 1 + m + gamma new tokens per sequence relative to it: the
numbers crossreg-bench-gpu prints for the CUDA backend.

    python3 engine/cuda/tools/bench_pytorch_peer.py [--layers 32] [--context 512]

Needs only torch with CUDA (present on the device machine). Nothing is downloaded.
"""
import argparse
import time

import torch
import torch.nn.functional as F


class Config:
    vocab, hidden, ffn, heads, kv_heads, head_dim, theta = 128256, 4096, 14336, 32, 8, 128, 500000.0


def rope(x, positions, inv_freq):
    # x: (B, H, T, D); NeoX/HF pairs (i, i + D/2).
    angles = positions[:, None, :, None].float() * inv_freq  # (B, 1, T, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x0, x1 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


class Model:
    def __init__(self, c, layers, device):
        g = torch.Generator(device=device).manual_seed(1)

        def w(out, inp):
            return (torch.rand(out, inp, generator=g, device=device, dtype=torch.bfloat16) * 2 - 1) / inp**0.5

        self.c = c
        self.embed = w(c.vocab, c.hidden)
        self.out = w(c.vocab, c.hidden)
        qkv = (c.heads + 2 * c.kv_heads) * c.head_dim
        self.layers = [
            dict(wqkv=w(qkv, c.hidden), wo=w(c.hidden, c.heads * c.head_dim), wgu=w(2 * c.ffn, c.hidden),
                 wd=w(c.hidden, c.ffn), n1=torch.ones(c.hidden, device=device, dtype=torch.bfloat16),
                 n2=torch.ones(c.hidden, device=device, dtype=torch.bfloat16))
            for _ in range(layers)
        ]
        self.norm = torch.ones(c.hidden, device=device, dtype=torch.bfloat16)
        self.inv_freq = 1.0 / (c.theta ** (torch.arange(0, c.head_dim, 2, device=device).float() / c.head_dim))

    @torch.no_grad()
    def forward(self, tokens, start, cache):
        """tokens (B, T) appended at positions [start, start + T) of every sequence."""
        c = self.c
        B, T = tokens.shape
        positions = torch.arange(start, start + T, device=tokens.device).expand(B, T)
        x = self.embed[tokens]
        for i, l in enumerate(self.layers):
            h = F.rms_norm(x, (c.hidden,), l["n1"], 1e-5)
            q, k, v = (h @ l["wqkv"].T).split([c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim], -1)
            q = rope(q.view(B, T, c.heads, c.head_dim).transpose(1, 2), positions, self.inv_freq)
            k = rope(k.view(B, T, c.kv_heads, c.head_dim).transpose(1, 2), positions, self.inv_freq)
            kc, vc = cache[i]
            kc[:, :, start : start + T] = k
            vc[:, :, start : start + T] = v.view(B, T, c.kv_heads, c.head_dim).transpose(1, 2)
            keys, values = kc[:, :, : start + T], vc[:, :, : start + T]
            mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril(start)
            a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(B, T, -1) @ l["wo"].T
            h = F.rms_norm(x, (c.hidden,), l["n2"], 1e-5)
            gate, up = (h @ l["wgu"].T).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ l["wd"].T
        return F.rms_norm(x, (c.hidden,), self.norm, 1e-5) @ self.out.T


def time_forward(model, tokens, start, cache, iters):
    for _ in range(3):
        model.forward(tokens, start, cache)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        model.forward(tokens, start, cache)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / iters


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--gammas", default="4,8,16,30")
    p.add_argument("--accepted", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_pytorch_peer: no CUDA device")
    c, dev = Config(), "cuda"
    model = Model(c, args.layers, dev)
    gammas = [int(g) for g in args.gammas.split(",")]
    print(f"PyTorch {torch.__version__} eager + SDPA, {args.layers} layers, bf16 weights and K/V, context {args.context}")
    print(f"{'batch':>6} {'AR ms':>10}" + "".join(f"   T(1+m+{g})/T(1)" for g in gammas))
    for b in (int(x) for x in args.batches.split(",")):
        length = args.context + 1 + args.accepted + max(gammas)
        cache = [(torch.zeros(b, c.kv_heads, length, c.head_dim, device=dev, dtype=torch.bfloat16),
                  torch.zeros(b, c.kv_heads, length, c.head_dim, device=dev, dtype=torch.bfloat16))
                 for _ in range(args.layers)]
        for begin in range(0, args.context, 512):
            n = min(512, args.context - begin)
            model.forward(torch.randint(0, 1000, (b, n), device=dev), begin, cache)
        ar = time_forward(model, torch.full((b, 1), 7, device=dev), args.context, cache, args.iters)
        ratios = []
        for g in gammas:
            rows = torch.full((b, 1 + args.accepted + g), 7, device=dev)
            ratios.append(time_forward(model, rows, args.context, cache, args.iters) / ar)
        print(f"{b:>6} {ar:>10.3f}" + "".join(f"   {r:>14.2f}" for r in ratios))
        del cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
