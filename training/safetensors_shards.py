"""Sharded safetensors in the Hugging Face layout.

`model-00001-of-0000N.safetensors` ... plus `model.safetensors.index.json` =
{"metadata": {"total_size": <tensor bytes>}, "weight_map": {tensor name: shard file}}, which
transformers and the C++ engine (engine/io/safetensors_file.cc) both read. Shards are filled
greedily in the given tensor order, and a shard's whole file (header included) stays within
the limit: the GPU machine returns files of at most 16 MiB each.
"""
import glob
import json
import os
from typing import Dict, List

import torch

from . import safetensors_io as st

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


def plan_shards(tensors: Dict[str, torch.Tensor], max_bytes: int,
                metadata=None) -> List[List[str]]:
    """Tensor names per shard, in order. A tensor larger than the limit on its own is an error
    (a shard cannot be split inside a tensor)."""
    shards: List[List[str]] = [[]]
    for name, t in tensors.items():
        alone = st.file_size({name: t}, metadata)
        if alone > max_bytes:
            raise ValueError(f"tensor {name} needs a {alone}-byte file, over the shard limit of "
                             f"{max_bytes} bytes")
        trial = {n: tensors[n] for n in shards[-1] + [name]}
        if shards[-1] and st.file_size(trial, metadata) > max_bytes:
            shards.append([])
        shards[-1].append(name)
    return shards


def shard_name(i: int, n: int) -> str:
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def remove_weights(path: str) -> None:
    """Delete weight files of either layout, so a directory never mixes an old export with a new
    one (loaders prefer one layout over the other, and would read the stale one)."""
    for f in [os.path.join(path, SINGLE), os.path.join(path, INDEX)] + \
            glob.glob(os.path.join(path, "model-*-of-*.safetensors")):
        if os.path.exists(f):
            os.remove(f)


def save_weights(tensors: Dict[str, torch.Tensor], path: str, max_shard_bytes: int = 0,
                 metadata=None) -> List[str]:
    """One model.safetensors when max_shard_bytes <= 0 or everything fits in one file (as
    transformers does), else shards + index. Returns the files written."""
    remove_weights(path)
    if max_shard_bytes <= 0 or st.file_size(tensors, metadata) <= max_shard_bytes:
        st.save_file(tensors, os.path.join(path, SINGLE), metadata)
        return [SINGLE]
    plan = plan_shards(tensors, max_shard_bytes, metadata)
    weight_map, files = {}, []
    for i, names in enumerate(plan):
        fname = shard_name(i, len(plan))
        st.save_file({n: tensors[n] for n in names}, os.path.join(path, fname), metadata)
        weight_map.update({n: fname for n in names})
        files.append(fname)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(path, INDEX), "w") as f:
        json.dump(index, f, indent=2)
    return files + [INDEX]
