"""Data-parallel training under `torchrun` (PyTorch's own launcher and collectives).

`torchrun --nproc_per_node N -m training distill ...` starts N processes with RANK, WORLD_SIZE
and LOCAL_RANK in the environment; without them everything here is a no-op and the trainer is
the one-process program it always was.

Why not DDP or FSDP: the trainable parameters are a LoRA adapter (84 M for Llama-3-8B at r 32,
1.3 GB with AdamW's state), and the frozen base fits one 80 GB GPU in bf16 (16 GB for 8B), so
each process holds the whole base and only the adapter's gradients travel. The trainer runs
the base three ways per step (prefix K/V, control rows, predictive rows), which DDP's
module-call hooks do not see; one flattened all-reduce of the LoRA gradients after backward is
what DDP's bucketed hooks do, without the wrapper. FSDP would shard the base too, which a
70B base needs; at 8B it only adds traffic.

Exactness of the data-parallel step: every process draws the same global batch (indices and
noise are a function of (seed, step)), takes its slice, and scales its loss by its slice's
share of the batch, so the summed gradients are the one-process gradient of the whole batch
up to the order of floating-point additions.
"""
import datetime
import os
from dataclasses import dataclass
from typing import List

import torch
import torch.distributed as dist


@dataclass
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    backend: str = ""
    device: torch.device = torch.device("cpu")  # where collectives' tensors must live

    @property
    def enabled(self) -> bool:
        return self.size > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def shard(self, n: int) -> slice:
        """This process's contiguous slice of n items (the first n % size get one more)."""
        base, extra = divmod(n, self.size)
        lo = self.rank * base + min(self.rank, extra)
        return slice(lo, lo + base + (1 if self.rank < extra else 0))


def from_env() -> World:
    """World from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK); one process if unset."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    try:
        rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    except (KeyError, ValueError) as e:
        raise SystemExit(f"WORLD_SIZE={size} but RANK/LOCAL_RANK are missing or bad ({e}): "
                         f"start the trainer with torchrun")
    return World(rank, size, local)


def init(world: World, device_kind: str) -> World:
    """Joins the process group: NCCL between CUDA devices, gloo on the CPU."""
    if not world.enabled:
        return world
    world.backend = "nccl" if device_kind == "cuda" else "gloo"
    if device_kind == "cuda":
        world.device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(world.device)
    if not dist.is_initialized():
        dist.init_process_group(world.backend, timeout=datetime.timedelta(minutes=30))
    return world


def shutdown(world: World) -> None:
    if world.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def barrier(world: World) -> None:
    if world.enabled:
        dist.barrier()


def sum_(world: World, t: torch.Tensor) -> torch.Tensor:
    """In-place sum over processes (returns t)."""
    if world.enabled:
        on = t.to(world.device)
        dist.all_reduce(on, op=dist.ReduceOp.SUM)
        t.copy_(on)
    return t


def broadcast_(world: World, t: torch.Tensor) -> torch.Tensor:
    """In place: every process gets rank 0's t (decisions that must agree, such as stopping
    for the time budget, are taken there)."""
    if world.enabled:
        on = t.to(world.device)
        dist.broadcast(on, 0)
        t.copy_(on)
    return t


def sum_gradients(world: World, params: List[torch.nn.Parameter]) -> None:
    """Sums the parameters' gradients over processes in one flattened all-reduce (a missing
    gradient counts as zero, so every process sends the same shapes)."""
    if not world.enabled:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads]).to(world.device)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    at = 0
    for p, g in zip(params, grads):
        n = g.numel()
        if p.grad is None:
            p.grad = g
        p.grad.copy_(flat[at:at + n].view_as(g))
        at += n


def gather_rows(world: World, local: torch.Tensor, total: int) -> torch.Tensor:
    """Concatenates each process's shard(total) rows of `local` (all on one device) in rank
    order: [total, ...]. Shards differ in size by at most one row, so they are padded to the
    largest for all_gather."""
    if not world.enabled:
        return local
    biggest = -(-total // world.size)
    pad = torch.zeros((biggest,) + tuple(local.shape[1:]), dtype=local.dtype, device=world.device)
    pad[:len(local)] = local
    parts = [torch.empty_like(pad) for _ in range(world.size)]
    dist.all_gather(parts, pad)
    out = []
    for r, p in enumerate(parts):
        s = World(r, world.size).shard(total)
        out.append(p[:s.stop - s.start])
    return torch.cat(out).to(local.device)
