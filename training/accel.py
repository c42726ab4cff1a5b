"""GPU fast paths, each feature-detected so the same code runs on Debian's CPU torch 1.13.

* TF32 matmuls on CUDA (float32 work that autocast leaves, e.g. the loss and the optimizer).
* bf16 autocast on CUDA (weights stay float32 masters; matmuls run in bf16).
* fused AdamW: `torch.optim.AdamW(fused=True)` exists from torch 2.0 and only for CUDA tensors.
* torch.compile (torch >= 2.0), opt-in: it costs ~30-60 s of compilation at start-up, which
  pays off over a multi-minute run, not a smoke test.
* scaled_dot_product_attention is chosen inside training/model.py (_attention).
"""
import contextlib
import inspect
from typing import Callable, Dict, Tuple

import torch
import torch.nn.functional as F


def has_sdpa() -> bool:
    return hasattr(F, "scaled_dot_product_attention")


def has_fused_adamw() -> bool:
    return "fused" in inspect.signature(torch.optim.AdamW).parameters


def has_compile() -> bool:
    return hasattr(torch, "compile")


def configure(device: torch.device) -> None:
    """Process-wide math settings for the device (TF32 on CUDA; nothing on CPU)."""
    if device.type != "cuda":
        return
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        # torch >= 2.9 names the setting; the allow_tf32 flags warn there and are deprecated.
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        torch.backends.cudnn.conv.fp32_precision = "tf32"
    else:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def autocast(device: torch.device):
    """bf16 autocast on CUDA; a no-op elsewhere (CPU bf16 autocast is slower than f32 here)."""
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def adamw(groups, device: torch.device, **kw) -> Tuple[torch.optim.Optimizer, str]:
    """AdamW, fused into one kernel per step on CUDA when this torch has it."""
    if device.type == "cuda" and has_fused_adamw():
        return torch.optim.AdamW(groups, fused=True, **kw), "fused"
    return torch.optim.AdamW(groups, **kw), "default"


def maybe_compile(fn: Callable, enabled: bool) -> Tuple[Callable, str]:
    """torch.compile(fn) when asked for and available; else fn. Returns (fn, what happened)."""
    if not enabled:
        return fn, "off"
    if not has_compile():
        return fn, f"unavailable in torch {torch.__version__} (eager)"
    return torch.compile(fn), "on"


def describe(device: torch.device) -> Dict[str, object]:
    """What the run used, for logs and run.json."""
    d: Dict[str, object] = {"torch": torch.__version__, "device": str(device),
                            "sdpa": has_sdpa(), "fused_adamw": has_fused_adamw(),
                            "compile": has_compile(), "autocast_bf16": device.type == "cuda"}
    if device.type == "cuda":
        d["gpu"] = torch.cuda.get_device_name(device)
        d["tf32"] = True
    return d
