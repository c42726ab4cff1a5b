"""A small Llama-architecture model in plain PyTorch, with LoRA and an explicit attention layout.

Matches Hugging Face LlamaForCausalLM numerics: RMSNorm (x * rsqrt(mean(x^2) + eps) * w, computed
in float32), RoPE in "rotate_half" order (the first half of each head pairs with the second
half), grouped-query attention (KV head j serves query heads j*n_rep ... (j+1)*n_rep-1), SwiGLU
MLP (down(silu(gate(x)) * up(x))), optional tied embeddings.

Attention-layout API: `LlamaForCausalLM.forward(input_ids, position_ids, past_kv, attn_mask,
use_lora, return_kv)`. Every row carries its own RoPE position; `past_kv` is a per-layer list of
already-rotated (K, V) of shape [B, n_kv_heads, S, head_dim]; `attn_mask` is a boolean
[B, T, S + T] (True = row may attend that key; keys are past first, then the new rows).
`use_lora` selects the predictive stream (base + LoRA) for all T rows; the control stream is
use_lora=False. The K/V returned are those of the new rows only, computed with the same weights
as the rows (LoRA K/V for predictive rows).
"""
import math
from dataclasses import dataclass, field, asdict
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

KV = Tuple[torch.Tensor, torch.Tensor]
_HAS_SDPA = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LlamaConfig:
    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 704
    num_hidden_layers: int = 8
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    head_dim: Optional[int] = None
    max_position_embeddings: int = 1024
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None
    tie_word_embeddings: bool = True
    bos_token_id: Optional[int] = None
    eos_token_id: Optional[int] = None
    extra: dict = field(default_factory=dict)  # unknown config.json keys, kept on export

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def validate(self, where: str = "config") -> None:
        if self.hidden_size % self.num_attention_heads and self.head_dim is None:
            raise ValueError(f"{where}: hidden_size not divisible by num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{where}: num_attention_heads not divisible by num_key_value_heads")
        if self.hd % 2:
            raise ValueError(f"{where}: head_dim must be even for RoPE")

    def to_hf(self) -> dict:
        d = dict(self.extra)
        d.update({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads, "head_dim": self.hd,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps, "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling, "tie_word_embeddings": self.tie_word_embeddings,
            "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "initializer_range": 0.02, "pretraining_tp": 1,
            "use_cache": True, "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id, "torch_dtype": "float32",
        })
        return d

    @classmethod
    def from_hf(cls, d: dict, where: str = "config.json") -> "LlamaConfig":
        if d.get("model_type", "llama") not in ("llama", "mistral", "qwen2"):
            raise ValueError(f"{where}: model_type {d.get('model_type')!r} is not llama")
        if d.get("hidden_act", "silu") != "silu":
            raise ValueError(f"{where}: hidden_act {d['hidden_act']!r} unsupported (need silu)")
        if d.get("attention_bias") or d.get("mlp_bias"):
            raise ValueError(f"{where}: attention_bias/mlp_bias are not supported")
        known = set(cls.__dataclass_fields__) - {"extra"}
        kw = {k: d[k] for k in known if k in d}
        for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                  "num_attention_heads"):
            if k not in kw:
                raise ValueError(f"{where}: missing key {k!r}")
        kw.setdefault("num_key_value_heads", kw["num_attention_heads"])
        kw.setdefault("tie_word_embeddings", False)  # HF LlamaConfig default
        kw.setdefault("rms_norm_eps", 1e-6)
        if isinstance(kw.get("eos_token_id"), list):
            kw["eos_token_id"] = kw["eos_token_id"][0]
        extra = {k: v for k, v in d.items() if k not in known}
        cfg = cls(**kw, extra=extra)
        cfg.validate(where)
        return cfg


def rope_inv_freq(cfg: LlamaConfig) -> torch.Tensor:
    d = cfg.hd
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    rs = cfg.rope_scaling
    if rs:
        kind = rs.get("rope_type", rs.get("type"))
        if kind == "llama3":  # Llama-3.1 frequency-dependent scaling
            factor = rs["factor"]
            lo, hi = rs["low_freq_factor"], rs["high_freq_factor"]
            old = rs["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv
            scaled = torch.where(wavelen > old / lo, inv / factor, inv)
            smooth = (old / wavelen - lo) / (hi - lo)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = (wavelen >= old / hi) & (wavelen <= old / lo)
            inv = torch.where(medium, smoothed, scaled)
        elif kind == "linear":
            inv = inv / rs["factor"]
        elif kind != "default":
            raise ValueError(f"rope_scaling type {kind!r} is not supported")
    return inv.float()


def rope_cos_sin(pos: torch.Tensor, inv_freq: torch.Tensor):
    """pos: [B, T] integer positions -> (cos, sin), each float32 [B, 1, T, head_dim]."""
    ang = pos.to(torch.float32)[:, None, :, None] * inv_freq.to(pos.device)[None, None, None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [B, H, T, D]. HF rotate_half convention: x*cos + rotate_half(x)*sin."""
    xf = x.float()
    half = xf.shape[-1] // 2
    rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * cos + rot * sin).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class LoRALinear(nn.Module):
    """y = x W^T (+ scale * (x A^T) B^T when lora is on). W: [out, in], A: [r, in], B: [out, r]."""

    def __init__(self, in_f: int, out_f: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_f, in_f))
        self.lora_A: Optional[nn.Parameter] = None
        self.lora_B: Optional[nn.Parameter] = None
        self.scale = 0.0

    def add_lora(self, r: int, alpha: float, generator: Optional[torch.Generator] = None):
        out_f, in_f = self.weight.shape
        a = torch.empty(r, in_f)
        # PEFT default init: A ~ kaiming_uniform(a=sqrt(5)) i.e. U(-1/sqrt(in), 1/sqrt(in)); B = 0
        bound = 1.0 / math.sqrt(in_f)
        a.uniform_(-bound, bound, generator=generator)
        dev, dt = self.weight.device, self.weight.dtype
        self.lora_A = nn.Parameter(a.to(dev, torch.float32))
        self.lora_B = nn.Parameter(torch.zeros(out_f, r, device=dev))
        self.scale = alpha / r

    def forward(self, x, use_lora: bool = False):
        y = F.linear(x, self.weight)
        if use_lora and self.lora_A is not None:
            d = F.linear(F.linear(x.to(self.lora_A.dtype), self.lora_A), self.lora_B)
            y = y + (d * self.scale).to(y.dtype)
        return y

    def merged_weight(self) -> torch.Tensor:
        w = self.weight.detach().float()
        if self.lora_A is None:
            return w
        return w + self.scale * (self.lora_B.detach().float() @ self.lora_A.detach().float())


def _attention(q, k, v, mask: Optional[torch.Tensor], causal_fast: bool):
    """q: [B, H, T, D]; k, v: [B, H, S, D]; mask: bool [B, T, S] or None (= all visible).
    torch >= 2.0 has scaled_dot_product_attention: flash attention for plain causal batches
    (causal_fast: no cache, no explicit mask), memory-efficient attention for the masked XR
    layout. torch 1.13 (Debian) has none: the float32 math below, the reference for both."""
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is not None:
        if causal_fast:
            return sdpa(q, k, v, is_causal=True)
        return sdpa(q, k, v, attn_mask=None if mask is None else mask[:, None, :, :])
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None, :, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, v.float()).to(q.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.nh, self.nkv, self.hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hd
        self.q_proj = LoRALinear(cfg.hidden_size, self.nh * self.hd)   # [nh*hd, dim]
        self.k_proj = LoRALinear(cfg.hidden_size, self.nkv * self.hd)  # [nkv*hd, dim]
        self.v_proj = LoRALinear(cfg.hidden_size, self.nkv * self.hd)  # [nkv*hd, dim]
        self.o_proj = LoRALinear(self.nh * self.hd, cfg.hidden_size)   # [dim, nh*hd]

    def forward(self, x, rope, past: Optional[KV], mask, use_lora, causal_fast):
        B, T, _ = x.shape
        q = self.q_proj(x, use_lora).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x, use_lora).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x, use_lora).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q = apply_rope(q, *rope)
        k = apply_rope(k, *rope)
        new_kv = (k, v)
        if past is not None:
            k = torch.cat([past[0].to(k.dtype), k], dim=2)
            v = torch.cat([past[1].to(v.dtype), v], dim=2)
        rep = self.nh // self.nkv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        o = _attention(q, k, v, mask, causal_fast)
        o = o.transpose(1, 2).reshape(B, T, self.nh * self.hd)
        return self.o_proj(o, use_lora), new_kv


class MLP(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = LoRALinear(cfg.hidden_size, cfg.intermediate_size)  # [ffn, dim]
        self.up_proj = LoRALinear(cfg.hidden_size, cfg.intermediate_size)    # [ffn, dim]
        self.down_proj = LoRALinear(cfg.intermediate_size, cfg.hidden_size)  # [dim, ffn]

    def forward(self, x, use_lora):
        return self.down_proj(F.silu(self.gate_proj(x, use_lora)) * self.up_proj(x, use_lora),
                              use_lora)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, rope, past, mask, use_lora, causal_fast):
        a, kv = self.self_attn(self.input_layernorm(x), rope, past, mask, use_lora, causal_fast)
        x = x + a
        x = x + self.mlp(self.post_attention_layernorm(x), use_lora)
        return x, kv


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        cfg.validate()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)  # [V, dim]
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(
            cfg.hidden_size, cfg.vocab_size, bias=False)  # [V, dim]
        # float32 on purpose: kept out of the module's buffers so .to(bfloat16) cannot round it
        self._inv_freq = rope_inv_freq(cfg)
        # Activation checkpointing: forwards that build a graph keep only each layer's input
        # and recompute the layer in backward (an 8B base's predictive rows at 64 x 16 rows
        # otherwise keep ~5 GB of activations).
        self.grad_checkpoint = False

    @property
    def inv_freq(self) -> torch.Tensor:
        dev = self.embed_tokens.weight.device
        if self._inv_freq.device != dev:
            self._inv_freq = self._inv_freq.to(dev)
        return self._inv_freq

    # ---- initialisation / LoRA management -------------------------------------------------
    def init_weights(self, seed: int, std: float = 0.02) -> None:
        g = torch.Generator().manual_seed(seed)
        n_layers = self.config.num_hidden_layers
        for name, p in self.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                nn.init.ones_(p)
            elif "lora_" in name:
                continue
            else:
                s = std / math.sqrt(2 * n_layers) if name.endswith(("o_proj.weight",
                                                                     "down_proj.weight")) else std
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=g) * s)

    def lora_modules(self):
        for i, layer in enumerate(self.layers):
            for parent, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                                  (layer.mlp, ("gate_proj", "up_proj", "down_proj"))):
                for n in names:
                    sub = "self_attn" if parent is layer.self_attn else "mlp"
                    yield i, sub, n, getattr(parent, n)

    def add_lora(self, r: int, alpha: float, targets=LORA_TARGETS, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        for _, _, n, m in self.lora_modules():
            if n in targets:
                m.add_lora(r, alpha, g)

    def lora_parameters(self) -> List[nn.Parameter]:
        return [p for n, p in self.named_parameters() if "lora_" in n]

    # ---- forward ---------------------------------------------------------------------------
    def output_weight(self):
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, input_ids: torch.Tensor, position_ids: Optional[torch.Tensor] = None,
                past_kv: Optional[List[KV]] = None, attn_mask: Optional[torch.Tensor] = None,
                use_lora: bool = False, return_kv: bool = False, return_hidden: bool = False):
        """input_ids: [B, T]; position_ids: [B, T] or [1, T]; past_kv: per layer (K, V)
        [B, nkv, S, hd]; attn_mask: bool [B, T, S+T]. Default mask = all past keys + causal
        among the T rows (not built when SDPA's causal kernel runs instead); default positions
        = S ... S+T-1. Returns (logits [B, T, V] float32, new_kv or None)."""
        B, T = input_ids.shape
        S = 0 if past_kv is None else past_kv[0][0].shape[2]
        dev = input_ids.device
        if position_ids is None:  # [1, T]: RoPE tables broadcast over the batch
            position_ids = torch.arange(S, S + T, device=dev)[None, :]
        causal_fast = attn_mask is None and S == 0
        if attn_mask is None and not (causal_fast and _HAS_SDPA):
            attn_mask = causal_mask(T, S, dev)[None].expand(B, T, S + T)
        x = self.embed_tokens(input_ids)
        if x.dtype != self.norm.weight.dtype:
            x = x.to(self.norm.weight.dtype)
        new_kv = []
        rope = rope_cos_sin(position_ids, self.inv_freq)
        recompute = self.grad_checkpoint and torch.is_grad_enabled() and not return_kv
        for i, layer in enumerate(self.layers):
            past = None if past_kv is None else past_kv[i]
            if recompute:
                # Non-reentrant: the LoRA weights get gradients although the layer's input
                # (frozen embeddings) does not require any.
                x, kv = torch.utils.checkpoint.checkpoint(
                    layer, x, rope, past, attn_mask, use_lora, causal_fast, use_reentrant=False)
            else:
                x, kv = layer(x, rope, past, attn_mask, use_lora, causal_fast)
            if return_kv:
                new_kv.append(kv)
        h = self.norm(x)
        if return_hidden:
            return h, (new_kv if return_kv else None)
        logits = F.linear(h, self.output_weight()).float()
        return logits, (new_kv if return_kv else None)


def causal_mask(T: int, S: int, device=None) -> torch.Tensor:
    """bool [T, S+T]: row t sees all S past keys and new rows 0..t."""
    m = torch.ones(T, S + T, dtype=torch.bool, device=device)
    m[:, S:] = torch.tril(torch.ones(T, T, dtype=torch.bool, device=device))
    return m


def concat_kv(a: List[KV], b: List[KV]) -> List[KV]:
    return [(torch.cat([ka, kb], 2), torch.cat([va, vb], 2)) for (ka, va), (kb, vb) in zip(a, b)]


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
