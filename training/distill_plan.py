"""`python3 -m training distill --plan`: what a distillation will cost before it runs.

For the base's config.json (weights are not read: any Llama-family size plans on any machine)
and the run's settings it prints
  * the memory one GPU needs, by part: the frozen base, the adapter with its gradients and
    AdamW state, the prefix K/V, the vocabulary-sized rows (p, q logits, log-softmax and its
    gradient) and the predictive rows' kept activations (or, with --grad-checkpoint, each
    layer's input);
  * a measured step: the trainer's own step (prefix K/V, control rows, predictive rows,
    backward, AdamW) on random weights of the config's shapes, timed at 1 and N decoder layers
    on this device and extrapolated per layer to the config's depth (the embedding and output
    layer are in both runs, so they are counted once); on CUDA the peak memory likewise;
  * GPU-hours for --plan-tokens trained rows on --plan-gpus GPUs (the batch split between
    them, the adapter's gradients all-reduced once a step), and the PyTorch generation of the
    targets the same way (crossreg-distill-data makes them on the engine instead).
Run it on the machine that will train: the figures are this device's. Every batch is timed
at prefixes of --prefix-max tokens, since a batch costs its longest prefix.
"""
import json
import os
import time

import numpy as np
import torch

from . import accel
from .common import log, write_json
from .distill_batch import forward_batch  # the trainer's own step
from .distill_data import Examples
from .layout import generate
from .model import LlamaConfig, LlamaForCausalLM

GIB = 1024 ** 3
# NCCL ring all-reduce bus bandwidth assumed between GPUs of one node (NVLink H100 systems
# measure 350-450 GB/s in nccl-tests; PCIe ones about 20): used only for the all-reduce line.
ALLREDUCE_GBPS = 300.0


def read_config(base: str) -> LlamaConfig:
    path = base if base.endswith(".json") else os.path.join(base, "config.json")
    if not os.path.exists(path):
        raise SystemExit(f"--plan: no config.json at {path} (--base takes a model directory or "
                         f"its config.json)")
    with open(path) as f:
        try:
            return LlamaConfig.from_hf(json.load(f), path)
        except (ValueError, json.JSONDecodeError) as e:
            raise SystemExit(f"--plan: {e}")


def lora_params(cfg: LlamaConfig, rank: int, targets) -> int:
    d, f, q, kv = (cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads * cfg.hd,
                   cfg.num_key_value_heads * cfg.hd)
    shapes = {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d),
              "gate_proj": (d, f), "up_proj": (d, f), "down_proj": (f, d)}
    return cfg.num_hidden_layers * sum(rank * sum(shapes[t]) for t in targets)


def base_params(cfg: LlamaConfig) -> int:
    d, f, q, kv = (cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads * cfg.hd,
                   cfg.num_key_value_heads * cfg.hd)
    layer = d * q + 2 * d * kv + q * d + 3 * d * f + 2 * d
    emb = cfg.vocab_size * d * (1 if cfg.tie_word_embeddings else 2)
    return cfg.num_hidden_layers * layer + emb + d


def memory_model(cfg: LlamaConfig, a, per_gpu: int, weight_bytes: int) -> dict:
    """Bytes per GPU by part: what the trainer holds at its peak, the predictive rows'
    backward ("transient_prefix" is the prefix forward's one-layer working set, which comes
    earlier: the peak counts the larger of it and the backward's parts)."""
    L, d, f, V = cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    kv, heads = cfg.num_key_value_heads * cfg.hd, cfg.num_attention_heads * cfg.hd
    rows, S, K = per_gpu * a.window, a.prefix_max, a.windows_per_prefix
    groups = per_gpu // K  # prefixes run per step
    act = 2 if weight_bytes == 2 else 4  # autocast keeps bf16 activations on CUDA
    # Kept per predictive row and layer for backward: the norms' inputs and outputs, q/k/v,
    # attention output, the MLP's gate, up, their product and the LoRA down-projections
    # (~7 d + 4 f values) and the attention weights over prefix + rows (f32, per head); per
    # prefix and layer, its K/V and its rows' repeated to every query head (grouped-query
    # attention runs on repeated K/V here), which attention keeps for backward.
    per_row = (7 * d + 4 * f) * act + cfg.num_attention_heads * (S + K * a.window) * 4
    per_seq = 2 * (S + K * a.window) * heads * act
    layer = rows * per_row + groups * per_seq
    kept = L * rows * d * act + layer if a.grad_checkpoint else L * layer
    return {
        "base": base_params(cfg) * weight_bytes,
        "lora_and_adamw": lora_params(cfg, a.rank, a.targets_list) * 16,  # f32 w, g, m, v
        "prefix_kv": L * 2 * groups * S * kv * weight_bytes,
        "vocab_rows": 4 * rows * V * 4,  # p, q logits, log-softmax and its gradient (f32)
        "activations": kept,
        "transient_prefix": groups * S * (3 * f + 4 * d + 2 * heads) * act,
    }


def flops_per_step(cfg: LlamaConfig, a, per_gpu: int) -> dict:
    """Multiply-adds x 2 of one GPU's step by pass: the prefix's K/V (a batch costs its longest
    prefix), the control rows, the predictive rows forward and backward (the base is frozen:
    backward computes input gradients, about one more forward, plus the adapter's small
    weight gradients), and the output layer of both row passes. Attention scores are left
    out (under 5% at these lengths)."""
    layers = base_params(cfg) - cfg.vocab_size * cfg.hidden_size * (
        1 if cfg.tie_word_embeddings else 2) - cfg.hidden_size
    rows = per_gpu * a.window
    head = 2 * cfg.vocab_size * cfg.hidden_size
    return {"prefix": 2 * layers * per_gpu // a.windows_per_prefix * a.prefix_max,
            "control_rows": (2 * layers + head) * rows,
            "predictive_rows": 2 * (2 * layers + head) * rows}


def peak_of(mem: dict) -> int:
    fixed = mem["base"] + mem["lora_and_adamw"] + mem["prefix_kv"]
    return fixed + max(mem["vocab_rows"] + mem["activations"], mem["transient_prefix"])


def _time_steps(cfg: LlamaConfig, layers: int, a, per_gpu: int, device, dtype):
    """(seconds per training step, seconds per generated batch, peak bytes or None) of the
    trainer's step at `layers` decoder layers, random weights."""
    c = LlamaConfig(**{**cfg.__dict__, "num_hidden_layers": layers, "extra": {}})
    model = LlamaForCausalLM(c)  # uninitialised CPU storage is not touched, so this is cheap
    model.to(device=device, dtype=dtype)
    torch.manual_seed(a.seed)
    with torch.no_grad():  # random weights drawn on the device (8B of them on the CPU is slow)
        for name, p in model.named_parameters():
            p.fill_(1.0) if "norm" in name else p.normal_(0.0, 0.02)
    for p in model.parameters():
        p.requires_grad_(False)
    model.grad_checkpoint = a.grad_checkpoint
    model.add_lora(a.rank, a.alpha, a.targets_list, seed=a.seed)
    model.to(device)
    lora = model.lora_parameters()
    opt, _ = accel.adamw(lora, device, lr=a.lr, betas=(0.9, 0.99), weight_decay=0.0)
    rng = np.random.default_rng(a.seed)
    n = a.prefix_max + a.window
    stream = rng.integers(0, c.vocab_size, per_gpu * n)
    K = a.windows_per_prefix
    ex = Examples(stream, np.repeat(np.arange(per_gpu // K) * n, K), np.full(per_gpu, a.prefix_max),
                  rng.integers(0, c.vocab_size, (per_gpu, a.window)), group=K)
    idx = torch.arange(per_gpu)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def step():
        loss, *_ = forward_batch(model, ex, idx, device, None, lambda: accel.autocast(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()  # allocation and kernel selection
    sync()
    t = time.time()
    for _ in range(a.plan_steps):
        step()
    sync()
    step_s = (time.time() - t) / a.plan_steps
    prefixes = [ex.prefix(i) for i in range(per_gpu)]  # generation: one prefix per example
    with accel.autocast(device):
        generate(model, prefixes, a.window, device=device)
        sync()
        t = time.time()
        generate(model, prefixes, a.window, device=device)
        sync()
    gen_s = time.time() - t
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    del model, opt
    return step_s, gen_s, peak


def _extrapolate(x1, y1, x2, y2, x):
    return y1 if x2 == x1 else y1 + (y2 - y1) / (x2 - x1) * (x - x1)


def main(a) -> int:
    cfg = read_config(a.base)
    a.targets_list = [t for t in a.targets.split(",") if t]
    if a.plan_gpus < 1 or a.batch % a.plan_gpus:
        raise SystemExit(f"--plan-gpus {a.plan_gpus}: must be >= 1 and divide --batch {a.batch}")
    if a.windows_per_prefix < 1 or (a.batch // a.plan_gpus) % a.windows_per_prefix:
        raise SystemExit(f"--windows-per-prefix {a.windows_per_prefix}: must divide the "
                         f"{a.batch // a.plan_gpus} windows per GPU")
    if a.plan_steps < 0:
        raise SystemExit("--plan-steps must be >= 0 (0: the memory model only)")
    from .common import pick_device
    device = pick_device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    accel.configure(device)
    dtype_name = a.dtype if a.dtype != "auto" else ("bf16" if device.type == "cuda" else "f32")
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    wbytes = 2 if dtype == torch.bfloat16 else 4
    per_gpu = a.batch // a.plan_gpus
    rows_per_step = a.batch * a.window
    nb, nl = base_params(cfg), lora_params(cfg, a.rank, a.targets_list)
    plan = {"config": {"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
                       "ffn": cfg.intermediate_size, "heads": cfg.num_attention_heads,
                       "kv_heads": cfg.num_key_value_heads, "vocab": cfg.vocab_size},
            "base_params": nb, "lora_params": nl, "gpus": a.plan_gpus, "batch": a.batch,
            "windows_per_gpu": per_gpu, "window": a.window, "prefix_max": a.prefix_max,
            "windows_per_prefix": a.windows_per_prefix,
            "weights": dtype_name, "grad_checkpoint": a.grad_checkpoint,
            "device": str(device), "tokens": a.plan_tokens}
    log(f"plan: Llama {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, ffn "
        f"{cfg.intermediate_size}, heads {cfg.num_attention_heads}/{cfg.num_key_value_heads}, "
        f"vocab {cfg.vocab_size}: {nb / 1e9:.2f}B parameters ({dtype_name} weights)")
    log(f"plan: LoRA r {a.rank} on {','.join(a.targets_list)}: {nl / 1e6:.1f}M parameters")
    log(f"plan: {a.plan_gpus} GPU(s), {per_gpu} windows of {a.window} rows each, "
        f"{a.windows_per_prefix} per prefix, prefixes up to {a.prefix_max} tokens "
        f"(batch {a.batch})")
    mem = memory_model(cfg, a, per_gpu, wbytes)
    plan["memory_model_bytes"] = mem
    total = peak_of(mem)
    plan["memory_model_peak_bytes"] = total
    log("plan: memory per GPU (model): " + ", ".join(
        f"{k} {v / GIB:.2f}" for k, v in mem.items()) + f" GiB: peak {total / GIB:.2f} GiB"
        + ("" if a.grad_checkpoint else " (--grad-checkpoint keeps "
           f"{memory_model(cfg, _with(a, grad_checkpoint=True), per_gpu, wbytes)['activations'] / GIB:.2f} GiB"
           " of activations instead)"))
    fl = flops_per_step(cfg, a, per_gpu)
    plan["flops_per_step"] = fl
    log(f"plan: per GPU and step {sum(fl.values()) / 1e12:.1f} TFLOP: " + ", ".join(
        f"{k} {v / sum(fl.values()):.0%}" for k, v in fl.items())
        + f" (one prefix forward for {a.window * a.windows_per_prefix} trained rows"
        + (": --windows-per-prefix shares it between windows)" if fl["prefix"] > sum(
            fl.values()) / 2 else ")"))
    if a.plan_steps > 0:
        L = cfg.num_hidden_layers
        hi = min(L, a.plan_layers or (L if device.type == "cuda" and total < _device_bytes(device)
                                      else 2))
        runs = {n: _time_steps(cfg, n, a, per_gpu, device, dtype) for n in sorted({1, hi})}
        lo_s, hi_s = runs[1], runs[hi]
        step_s = _extrapolate(1, lo_s[0], hi, hi_s[0], L)
        gen_s = _extrapolate(1, lo_s[1], hi, hi_s[1], L)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        log(f"plan: measured on {device} ({name}): " + ", ".join(
            f"{n} layer(s) {r[0]:.3f} s/step" for n, r in runs.items())
            + f" -> {L} layers {step_s:.3f} s/step")
        plan.update(step_s=step_s, gen_batch_s=gen_s, measured={
            str(n): {"step_s": r[0], "gen_batch_s": r[1], "peak_bytes": r[2]}
            for n, r in runs.items()})
        if lo_s[2] is not None:
            peak = _extrapolate(1, lo_s[2], hi, hi_s[2], L)
            plan["peak_bytes"] = peak
            log(f"plan: measured peak memory {lo_s[2] / GIB:.2f} GiB at 1 layer, "
                f"{hi_s[2] / GIB:.2f} at {hi} -> {peak / GIB:.2f} GiB at {L} layers")
        steps = int(np.ceil(a.plan_tokens / rows_per_step))
        reduce_s = (2 * (a.plan_gpus - 1) / a.plan_gpus * nl * 4 / (ALLREDUCE_GBPS * 1e9)
                    if a.plan_gpus > 1 else 0.0)
        wall_h = steps * (step_s + reduce_s) / 3600
        examples = a.n_examples
        gen_h = examples / per_gpu * gen_s / 3600 / a.plan_gpus
        plan.update(steps=steps, allreduce_s=reduce_s, train_wall_h=wall_h,
                    train_gpu_h=wall_h * a.plan_gpus, gen_wall_h=gen_h,
                    gen_gpu_h=gen_h * a.plan_gpus)
        log(f"plan: {a.plan_tokens / 1e6:.0f}M trained rows = {steps:,} steps of "
            f"{rows_per_step:,} rows at {step_s:.3f} s"
            + (f" + all-reduce {nl * 4 / 1e9:.2f} GB at {ALLREDUCE_GBPS:.0f} GB/s "
               f"({reduce_s * 1000:.1f} ms)" if a.plan_gpus > 1 else "")
            + f": {wall_h:.1f} h on {a.plan_gpus} GPU(s) = {wall_h * a.plan_gpus:.1f} GPU-hours")
        log(f"plan: targets for --n-examples {examples:,} (each seen "
            f"{steps * a.batch / max(examples, 1):.1f} times) generated in PyTorch "
            f"({gen_s:.3f} s per {per_gpu} prefixes): {gen_h:.1f} h = "
            f"{gen_h * a.plan_gpus:.1f} GPU-hours (crossreg-distill-data generates them on "
            f"the engine instead)")
        if device.type == "cpu":
            log("plan: timed on the CPU: run --plan on the GPU machine that will train for "
                "its GPU-hours")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        write_json(os.path.join(a.out, "plan.json"), plan)
    return 0


def _with(a, **kw):
    import argparse
    return argparse.Namespace(**{**vars(a), **kw})


def _device_bytes(device) -> int:
    return torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else 0
