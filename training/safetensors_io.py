"""Minimal safetensors writer/reader (no `safetensors` package).

File layout: u64 little-endian header length N, N bytes of JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
then the raw little-endian tensor bytes; offsets are relative to the end of the header.
"""
import json
import struct
from typing import Dict, Optional

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, numpy dtype used for the raw bytes)
_DTYPES = {
    "F64": (torch.float64, np.dtype("<f8")),
    "F32": (torch.float32, np.dtype("<f4")),
    "F16": (torch.float16, np.dtype("<f2")),
    "BF16": (torch.bfloat16, np.dtype("<i2")),  # raw bits, reinterpreted via torch.view
    "I64": (torch.int64, np.dtype("<i8")),
    "I32": (torch.int32, np.dtype("<i4")),
    "I16": (torch.int16, np.dtype("<i2")),
    "I8": (torch.int8, np.dtype("i1")),
    "U8": (torch.uint8, np.dtype("u1")),
    "BOOL": (torch.bool, np.dtype("?")),
}
_TORCH_TO_NAME = {v[0]: k for k, v in _DTYPES.items()}


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    name = _TORCH_TO_NAME.get(t.dtype)
    arr = t.numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _header(tensors: Dict[str, torch.Tensor], path: str,
            metadata: Optional[Dict[str, str]]) -> bytes:
    """The padded JSON header for tensors stored in sorted-name order."""
    header = {}
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in _TORCH_TO_NAME:
            raise ValueError(f"{path}: unsupported dtype {t.dtype} for tensor {name}")
        header[name] = {"dtype": _TORCH_TO_NAME[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + _nbytes(t)]}
        offset += _nbytes(t)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return hjson + b" " * ((8 - len(hjson) % 8) % 8)  # keep data 8-byte aligned


def file_size(tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None) -> int:
    """Exact size save_file would write, without serialising the data (for shard planning)."""
    return 8 + len(_header(tensors, "<size>", metadata)) + sum(_nbytes(t) for t in tensors.values())


def save_file(tensors: Dict[str, torch.Tensor], path: str,
              metadata: Optional[Dict[str, str]] = None) -> None:
    hjson = _header(tensors, path, metadata)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for name in sorted(tensors):
            f.write(_tensor_bytes(tensors[name]))


def read_header(path: str):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n).decode("utf-8"))
    return n, header


def load_file(path: str) -> Dict[str, torch.Tensor]:
    n, header = read_header(path)
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        tdtype, npdtype = _DTYPES[dt]
        b, e = info["data_offsets"]
        shape = info["shape"]
        count = int(np.prod(shape)) if shape else 1
        if e - b != count * npdtype.itemsize:
            raise ValueError(f"{path}: tensor {name}: {e - b} bytes for shape {shape} {dt}")
        arr = np.frombuffer(raw[base + b: base + e].tobytes(), dtype=npdtype).copy()
        t = torch.from_numpy(arr.astype(npdtype.newbyteorder("="), copy=False))
        if dt == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = t.reshape(shape)
    return out
