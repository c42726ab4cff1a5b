"""Distillation examples: prefixes of a token stream and the base's continuation of each.

An example i is (stream[start[i] : start[i] + length[i]], continuation[i]) with the
continuation the frozen base's next `window` tokens. Two sources give the same structure:
  * `make_examples` in training/distill.py (the base generates in PyTorch), kept in data.pt;
  * `crossreg-distill-data` (the C++ engine generates, batched, on either backend), a file read
    here by memory map, so a 0.3B-token run's examples (about 1.4 GB at window 16 and 19 M
    examples, plus the corpus) are paged in as batches touch them, never loaded whole.

The engine's file (little-endian): b"CRXDIST1", uint64 header length H, H bytes of header
JSON, then arrays at the absolute byte offsets the header's "arrays" names
("train.stream" int32, "train.start" int64, "train.length" int32, "train.continuation" int32
[examples * window], the same four for "eval."). The header's "windows_per_prefix" K (1 when
absent) groups the train split's examples in runs of K sharing a start; eval examples stand
alone.
"""
import json
import os
import struct
from typing import Dict, List, Tuple

import numpy as np
import torch

MAGIC = b"CRXDIST1"
SPLITS = ("train", "eval")
_FIELDS = {"stream": np.int32, "start": np.int64, "length": np.int32, "continuation": np.int32}


class Examples:
    """Prefixes by reference into a token stream, continuations [n, window]. With group K > 1
    the examples come in runs of K that share a start (nested prefixes of one text, each
    window anchored at its own length): training runs one prefix forward for the K windows."""

    def __init__(self, stream, start, length, cont, group: int = 1):
        self.stream = stream
        self.start = np.asarray(start, np.int64)
        self.length = np.asarray(length, np.int64)
        self.cont = cont  # np or memmap [n, w]
        self.group = int(group)
        if self.cont.ndim != 2 or len(self.cont) != len(self.start) or len(self.start) != len(
                self.length):
            raise ValueError("examples: start, length and continuation rows disagree in number")
        if self.group < 1 or len(self.start) % self.group:
            raise ValueError(f"examples: {len(self.start)} examples do not form groups of "
                             f"{self.group}")
        if self.group > 1 and len(self.start) and not (
                self.start.reshape(-1, self.group) == self.start[::self.group, None]).all():
            raise ValueError(f"examples: a group of {self.group} windows does not share its start")

    def __len__(self) -> int:
        return len(self.start)

    @property
    def window(self) -> int:
        return int(self.cont.shape[1])

    def lens(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.length[idx.numpy()])

    def prefix(self, i: int) -> List[int]:
        s = int(self.start[i])
        return np.asarray(self.stream[s:s + int(self.length[i])], np.int64).tolist()

    def continuation(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.asarray(self.cont[idx.numpy()], np.int64))

    @property
    def groups(self) -> int:
        return len(self) // self.group

    def head(self, n: int) -> "Examples":
        """The first n examples, rounded down to whole groups (all when n <= 0 or n >= len)."""
        if n <= 0 or n >= len(self):
            return self
        n -= n % self.group
        return Examples(self.stream, self.start[:n], self.length[:n], self.cont[:n], self.group)

    def state(self) -> dict:
        """Tensors for torch.save (data.pt)."""
        return {"stream": torch.from_numpy(np.asarray(self.stream, np.int64)),
                "start": torch.from_numpy(self.start), "len": torch.from_numpy(self.length),
                "cont": torch.from_numpy(np.asarray(self.cont, np.int64)), "group": self.group}

    @staticmethod
    def from_state(d: dict) -> "Examples":
        return Examples(d["stream"].numpy(), d["start"].numpy(), d["len"].numpy(),
                        d["cont"].numpy(), d.get("group", 1))


def read_header(path: str) -> dict:
    with open(path, "rb") as f:
        head = f.read(16)
        if len(head) < 16 or head[:8] != MAGIC:
            raise SystemExit(f"--data {path}: not a crossreg-distill-data file (magic "
                             f"{head[:8]!r}, expected {MAGIC!r})")
        (n,) = struct.unpack("<Q", head[8:16])
        size = os.fstat(f.fileno()).st_size
        if n > size - 16:
            raise SystemExit(f"--data {path}: header of {n} bytes runs past the end of the file "
                             f"({size} bytes): truncated?")
        try:
            return json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SystemExit(f"--data {path}: the header is not JSON ({e})")


def read_engine_file(path: str) -> Tuple[dict, Dict[str, Examples]]:
    """(header, {"train": Examples, "eval": Examples}) of a crossreg-distill-data file, memory
    mapped; every array's offset, type and extent is checked against the file."""
    h = read_header(path)
    if h.get("format") != "crossreg-distill-data" or h.get("version") != 1:
        raise SystemExit(f"--data {path}: format {h.get('format')!r} version "
                         f"{h.get('version')!r}; this trainer reads crossreg-distill-data 1")
    size = os.path.getsize(path)
    w = int(h["window"])
    out = {}
    for split in SPLITS:
        arrays = {}
        for field, dtype in _FIELDS.items():
            name = f"{split}.{field}"
            spec = h.get("arrays", {}).get(name)
            if spec is None:
                raise SystemExit(f"--data {path}: the header has no array {name!r}")
            if np.dtype(spec["dtype"]) != np.dtype(dtype):
                raise SystemExit(f"--data {path}: {name} is {spec['dtype']}, expected "
                                 f"{np.dtype(dtype).name}")
            off, count = int(spec["offset"]), int(spec["count"])
            if off < 0 or off + count * np.dtype(dtype).itemsize > size:
                raise SystemExit(f"--data {path}: {name} ({count} x {np.dtype(dtype).name} at "
                                 f"byte {off}) runs past the end of the file ({size} bytes)")
            arrays[field] = (np.memmap(path, dtype=dtype, mode="r", offset=off, shape=(count,))
                             if count else np.zeros(0, dtype))
        n = len(arrays["start"])
        if len(arrays["continuation"]) != n * w:
            raise SystemExit(f"--data {path}: {split}.continuation has "
                             f"{len(arrays['continuation'])} tokens, expected {n} x {w}")
        S = len(arrays["stream"])
        st, ln = np.asarray(arrays["start"]), np.asarray(arrays["length"])
        if n and (st.min() < 0 or ln.min() < 1 or (st + ln).max() > S):
            raise SystemExit(f"--data {path}: a {split} prefix lies outside its stream of {S} "
                             f"tokens")
        group = int(h.get("windows_per_prefix", 1)) if split == "train" else 1
        try:
            out[split] = Examples(arrays["stream"], st, ln, arrays["continuation"].reshape(n, w),
                                  group)
        except ValueError as e:
            raise SystemExit(f"--data {path}: {split}: {e}")
    return h, out


def write_engine_file(path: str, header: dict, splits: Dict[str, Examples]) -> None:
    """The same format from Python (tests, and converting data.pt for other tools)."""
    arrays, blobs, at = {}, [], 0
    for split in SPLITS:
        ex = splits[split]
        for field, dtype in _FIELDS.items():
            src = {"stream": ex.stream, "start": ex.start, "length": ex.length,
                   "continuation": np.asarray(ex.cont).reshape(-1)}[field]
            b = np.ascontiguousarray(np.asarray(src), dtype=dtype).tobytes()
            blobs.append(b)
            arrays[f"{split}.{field}"] = {"dtype": np.dtype(dtype).name,
                                          "count": len(b) // np.dtype(dtype).itemsize}
    h = dict(header, format="crossreg-distill-data", version=1, arrays=arrays)
    # Offsets depend on the header's length, which depends on the offsets' digits: a few
    # rounds settle it (a header that shrank leaves padding, which offsets skip).
    for _ in range(3):
        text = json.dumps(h).encode()
        at = (16 + len(text) + 7) // 8 * 8
        for blob, name in zip(blobs, arrays):
            arrays[name]["offset"] = at
            at += (len(blob) + 7) // 8 * 8
    text = json.dumps(h).encode()
    if 16 + len(text) > arrays[next(iter(arrays))]["offset"]:
        raise RuntimeError("distill data header did not settle")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(text)) + text)
        for blob, name in zip(blobs, arrays):
            f.write(b"\0" * (arrays[name]["offset"] - f.tell()))
            f.write(blob)
        f.write(b"\0" * ((-f.tell()) % 8))
    os.replace(tmp, path)
