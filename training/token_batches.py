"""Random-window language-model batches from a packed token stream.

The whole stream lives on the training device (a 40M-token stream is 160 MB as int32, nothing
on an 80 GB GPU), so a batch is one gather kernel: no host copies, no data-loader processes.
Window starts come from numpy's generator seeded with (seed, step), so the batches of a run
depend only on the seed and the step number, and a resumed run sees the data it would have.
"""
import numpy as np
import torch


class TokenStream:
    def __init__(self, ids: np.ndarray, device: torch.device):
        # int32 because torch 1.13 has no uint16; ids become int64 per batch only.
        self.n = len(ids)
        self.device = device
        self.data = torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int32)).to(device)

    def windows(self, starts, seq: int):
        """(x, y), each int64 [len(starts), seq]: y is x shifted by one token."""
        st = torch.as_tensor(np.asarray(starts, dtype=np.int64))
        if self.device.type == "cuda":
            st = st.pin_memory().to(self.device, non_blocking=True)
        idx = st[:, None] + torch.arange(seq + 1, device=self.device)[None, :]
        chunk = self.data[idx].long()
        return chunk[:, :-1], chunk[:, 1:]

    def random_starts(self, seed: int, step: int, batch: int, seq: int) -> np.ndarray:
        """The training batch of `step`: uniform window starts from a generator seeded with
        (seed, step), so a run resumed from its checkpoint, or repeated with its seed, sees
        the same data order."""
        rng = np.random.default_rng([seed, step])
        return rng.integers(0, self.n - seq - 1, batch)

    def eval_starts(self, n_windows: int, seq: int) -> np.ndarray:
        """Fixed, evenly spaced windows: every evaluation scores the same tokens."""
        span = self.n - seq - 1
        if span <= 0:
            return np.zeros(0, dtype=np.int64)
        return np.linspace(0, span, n_windows).astype(np.int64)
