"""Hugging Face directory export/import (LlamaForCausalLM) and PEFT LoRA adapters."""
import json
import math
import os
from typing import Dict, List, Optional

import torch

from .model import LlamaConfig, LlamaForCausalLM, LORA_TARGETS
from . import safetensors_io as st
from .safetensors_shards import save_weights

DTYPES = {"f32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
          "bfloat16": torch.bfloat16, "f16": torch.float16, "float16": torch.float16}
_DTYPE_NAME = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def hf_state_dict(model: LlamaForCausalLM, dtype=torch.float32) -> Dict[str, torch.Tensor]:
    """Base weights under HF names (LoRA excluded), in module order (embedding, layers, final
    norm, lm_head) so that shards hold whole neighbouring layers."""
    out = {"model.embed_tokens.weight": model.embed_tokens.weight}
    for i, layer in enumerate(model.layers):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = layer.input_layernorm.weight
        out[p + "post_attention_layernorm.weight"] = layer.post_attention_layernorm.weight
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out[p + f"self_attn.{n}.weight"] = getattr(layer.self_attn, n).weight
        for n in ("gate_proj", "up_proj", "down_proj"):
            out[p + f"mlp.{n}.weight"] = getattr(layer.mlp, n).weight
    out["model.norm.weight"] = model.norm.weight
    if model.lm_head is not None:
        out["lm_head.weight"] = model.lm_head.weight
    return {k: v.detach().to(dtype).cpu() for k, v in out.items()}


def save_model_dir(model: LlamaForCausalLM, path: str, tokenizer=None, dtype=torch.float32,
                   generation_config: Optional[dict] = None, max_shard_bytes: int = 0) -> None:
    """HF directory. max_shard_bytes > 0 splits the weights into files of at most that many
    bytes (training/safetensors_shards.py) when they do not fit in one."""
    os.makedirs(path, exist_ok=True)
    cfg = model.config.to_hf()
    cfg["torch_dtype"] = _DTYPE_NAME[dtype]
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_weights(hf_state_dict(model, dtype), path, max_shard_bytes, {"format": "pt"})
    gen = {"bos_token_id": model.config.bos_token_id, "eos_token_id": model.config.eos_token_id,
           "do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_length":
           model.config.max_position_embeddings}
    gen.update(generation_config or {})
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    if tokenizer is not None:
        tokenizer.save(os.path.join(path, "tokenizer.json"))
        tc = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length":
              model.config.max_position_embeddings, "clean_up_tokenization_spaces": False}
        inv = {i: s for s, i in tokenizer.specials.items()}
        if model.config.bos_token_id in inv:
            tc["bos_token"] = inv[model.config.bos_token_id]
        if model.config.eos_token_id in inv:
            tc["eos_token"] = inv[model.config.eos_token_id]
        with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
            json.dump(tc, f, indent=2)


def _weight_files(path: str) -> List[str]:
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return [single]
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            return [os.path.join(path, s) for s in sorted(set(json.load(f)["weight_map"].values()))]
    raise FileNotFoundError(f"{path}: no model.safetensors or model.safetensors.index.json")


def _base_parameters(model: LlamaForCausalLM) -> Dict[str, torch.nn.Parameter]:
    """HF name -> the model's parameter (no copies, unlike hf_state_dict)."""
    named = dict(model.named_parameters())
    out = {}
    for name in ["model.embed_tokens.weight", "model.norm.weight"] + (
            ["lm_head.weight"] if model.lm_head is not None else []):
        out[name] = named[name[len("model."):] if name.startswith("model.") else name]
    for i, layer in enumerate(model.layers):
        for n, p in layer.named_parameters():
            if "lora_" not in n:
                out[f"model.layers.{i}.{n}"] = p
    return out


def load_model_dir(path: str, dtype=torch.float32, device="cpu") -> LlamaForCausalLM:
    """The model in `dtype` on `device`. The parameters are allocated there first and filled
    one shard at a time, so host memory holds one shard, not the model in float32 (an 8B base
    would need 32 GB per process, times the processes of a torchrun)."""
    cpath = os.path.join(path, "config.json")
    with open(cpath) as f:
        cfg = LlamaConfig.from_hf(json.load(f), cpath)
    files = _weight_files(path)
    model = LlamaForCausalLM(cfg).to(device=device, dtype=dtype)
    ours = _base_parameters(model)
    seen = set()
    with torch.no_grad():
        for file in files:
            for k, v in st.load_file(file).items():
                if k not in ours:
                    if "rotary_emb" in k or (k == "lm_head.weight" and cfg.tie_word_embeddings):
                        continue
                    raise ValueError(f"{path}: weights mismatch; unexpected {k}")
                p = ours[k]
                if tuple(p.shape) != tuple(v.shape):
                    raise ValueError(f"{path}: {k}: shape {tuple(v.shape)} != {tuple(p.shape)}")
                p.copy_(v.float() if dtype == torch.float32 else v)
                seen.add(k)
    missing = sorted(set(ours) - seen)
    if missing:
        raise ValueError(f"{path}: weights mismatch; missing {missing[:5]}")
    return model


# ---- PEFT adapters ---------------------------------------------------------------------------
def peft_name(i: int, sub: str, proj: str, ab: str) -> str:
    return f"base_model.model.model.layers.{i}.{sub}.{proj}.lora_{ab}.weight"


CROSSREG_LAYOUT = "crossreg-v1"


def check_adapter_metadata(config: LlamaConfig, r: int, alpha: float, xr: dict) -> None:
    """The rules the engine's loader (engine/model/lora_adapter.cc) applies to
    adapter_config.json's r / lora_alpha and to crossreg_adapter.json, checked before
    writing so that an export the engine would refuse fails here instead."""
    if not (isinstance(r, int) and r >= 1):
        raise ValueError(f"r must be a positive integer, got {r!r}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"lora_alpha must be a positive number, got {alpha!r}")
    ph = xr.get("placeholder_token_id")
    if not (isinstance(ph, int) and 0 <= ph < config.vocab_size):
        raise ValueError(f"placeholder_token_id must be in [0, {config.vocab_size}), got {ph!r}")
    if config.bos_token_id is not None and ph == config.bos_token_id:
        raise ValueError(f"placeholder_token_id {ph} is the BOS token; the placeholder fills "
                         "empty draft slots and must not be BOS")
    eos = config.eos_token_id
    if ph in (eos if isinstance(eos, (list, tuple)) else [eos]):
        raise ValueError(f"placeholder_token_id {ph} is an end-of-sequence token")
    window = xr.get("window")
    if window is not None and not (isinstance(window, int) and
                                   1 <= window <= config.max_position_embeddings):
        raise ValueError(f"window must be in [1, {config.max_position_embeddings}] (the "
                         f"model's context length), got {window!r}")
    if xr.get("layout", CROSSREG_LAYOUT) != CROSSREG_LAYOUT:
        raise ValueError(f"layout {xr['layout']!r} is not {CROSSREG_LAYOUT!r}")
    if xr.get("draft_layout", "chain") not in ("chain", "blocks"):
        raise ValueError(f"draft_layout must be 'chain' or 'blocks', got {xr['draft_layout']!r}")


def save_adapter(model: LlamaForCausalLM, path: str, r: int, alpha: float,
                 base_model_name_or_path: str, placeholder_token_id: int, window: int,
                 extra_crossreg: Optional[dict] = None) -> None:
    xr = {"placeholder_token_id": int(placeholder_token_id), "window": int(window),
          "layout": CROSSREG_LAYOUT}
    xr.update(extra_crossreg or {})
    check_adapter_metadata(model.config, r, alpha, xr)
    os.makedirs(path, exist_ok=True)
    tensors, targets = {}, []
    for i, sub, proj, m in model.lora_modules():
        if m.lora_A is None:
            continue
        if proj not in targets:
            targets.append(proj)
        tensors[peft_name(i, sub, proj, "A")] = m.lora_A.detach().float().cpu()  # [r, in]
        tensors[peft_name(i, sub, proj, "B")] = m.lora_B.detach().float().cpu()  # [out, r]
    st.save_file(tensors, os.path.join(path, "adapter_model.safetensors"), {"format": "pt"})
    cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": alpha,
           "target_modules": targets, "base_model_name_or_path": base_model_name_or_path,
           "bias": "none", "lora_dropout": 0.0, "fan_in_fan_out": False,
           "inference_mode": True, "init_lora_weights": True, "modules_to_save": None,
           "use_rslora": False, "use_dora": False, "layers_to_transform": None,
           "rank_pattern": {}, "alpha_pattern": {}, "revision": None}
    with open(os.path.join(path, "adapter_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(path, "crossreg_adapter.json"), "w") as f:
        json.dump(xr, f, indent=2)


def load_adapter(model: LlamaForCausalLM, path: str) -> dict:
    """Attach a PEFT LoRA adapter (A, B, scale = lora_alpha / r) to `model`; returns its config."""
    cpath = os.path.join(path, "adapter_config.json")
    with open(cpath) as f:
        cfg = json.load(f)
    if cfg.get("peft_type") != "LORA":
        raise ValueError(f"{cpath}: peft_type {cfg.get('peft_type')!r} is not LORA")
    if cfg.get("use_rslora") or cfg.get("use_dora") or cfg.get("rank_pattern") or \
            cfg.get("alpha_pattern") or cfg.get("bias", "none") != "none":
        raise ValueError(f"{cpath}: rslora/dora/rank_pattern/alpha_pattern/bias unsupported")
    r, alpha = int(cfg["r"]), float(cfg["lora_alpha"])
    sd = st.load_file(os.path.join(path, "adapter_model.safetensors"))
    used = set()
    for i, sub, proj, m in model.lora_modules():
        ka, kb = peft_name(i, sub, proj, "A"), peft_name(i, sub, proj, "B")
        if ka not in sd:
            continue
        dev = m.weight.device
        m.lora_A = torch.nn.Parameter(sd[ka].float().to(dev))
        m.lora_B = torch.nn.Parameter(sd[kb].float().to(dev))
        m.scale = alpha / r
        used.update((ka, kb))
    unused = sorted(set(sd) - used)
    if unused:
        raise ValueError(f"{path}: adapter tensors not matched to the model: {unused[:4]}")
    return cfg
