"""A deliberately naive, loop-based Llama forward (float64) used as an independent reference.

Each token carries its RoPE position, whether it runs with LoRA, and the list of tokens it may
attend to. The K/V of a token at every layer comes from its own hidden state, so a prefix token
flagged base-only provides exactly the "cached control K/V" of the engine layout."""
import math

import torch


def _lin(m, x, lora):
    y = m.weight.double() @ x
    if lora and m.lora_A is not None:
        y = y + m.scale * (m.lora_B.double() @ (m.lora_A.double() @ x))
    return y


def _rms(w, x, eps):
    return w.double() * (x / math.sqrt(float((x * x).mean()) + eps))


def _rope(v, pos, theta):
    d = v.shape[0]
    half = d // 2
    out = v.clone()
    for i in range(half):
        f = 1.0 / (theta ** (2 * i / d))
        c, s = math.cos(pos * f), math.sin(pos * f)
        a, b = v[i].item(), v[i + half].item()
        out[i] = a * c - b * s
        out[i + half] = b * c + a * s
    return out


def naive_forward(model, tokens, positions, lora_flags, visible):
    cfg = model.config
    nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hd
    rep = nh // nkv
    h = [model.embed_tokens.weight[t].double().clone() for t in tokens]
    for layer in model.layers:
        at = layer.self_attn
        qs, ks, vs = [], [], []
        for i, x in enumerate(h):
            xn = _rms(layer.input_layernorm.weight, x, cfg.rms_norm_eps)
            q = _lin(at.q_proj, xn, lora_flags[i]).view(nh, hd)
            k = _lin(at.k_proj, xn, lora_flags[i]).view(nkv, hd)
            v = _lin(at.v_proj, xn, lora_flags[i]).view(nkv, hd)
            qs.append(torch.stack([_rope(q[j], positions[i], cfg.rope_theta) for j in range(nh)]))
            ks.append(torch.stack([_rope(k[j], positions[i], cfg.rope_theta) for j in range(nkv)]))
            vs.append(v)
        new_h = []
        for i, x in enumerate(h):
            heads = []
            for j in range(nh):
                kv_head = j // rep
                sc = torch.tensor([float(qs[i][j] @ ks[u][kv_head]) / math.sqrt(hd)
                                   for u in visible[i]], dtype=torch.float64)
                pr = torch.softmax(sc, 0)
                heads.append(sum(pr[n] * vs[u][kv_head] for n, u in enumerate(visible[i])))
            x = x + _lin(at.o_proj, torch.cat(heads), lora_flags[i])
            xn = _rms(layer.post_attention_layernorm.weight, x, cfg.rms_norm_eps)
            mlp = layer.mlp
            g = _lin(mlp.gate_proj, xn, lora_flags[i])
            u_ = _lin(mlp.up_proj, xn, lora_flags[i])
            x = x + _lin(mlp.down_proj, torch.nn.functional.silu(g) * u_, lora_flags[i])
            new_h.append(x)
        h = new_h
    W = model.output_weight().double()
    return torch.stack([W @ _rms(model.norm.weight, x, cfg.rms_norm_eps) for x in h])


def xr_reference(model, x, rows, use_lora_rows=True):
    """Engine layout: prefix x[:-1] (base, causal), then rows at positions L-1.. that see the
    whole cached prefix and rows 0..k. Returns logits of the rows [n, V]."""
    L, n = len(x), len(rows)
    cached = list(x[:-1])
    tokens = cached + list(rows)
    positions = list(range(L - 1)) + list(range(L - 1, L - 1 + n))
    flags = [False] * (L - 1) + [use_lora_rows] * n
    visible = [list(range(i + 1)) for i in range(L - 1)]
    visible += [list(range(L - 1)) + [L - 1 + r for r in range(k + 1)] for k in range(n)]
    return naive_forward(model, tokens, positions, flags, visible)[L - 1:]
