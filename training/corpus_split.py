"""The training corpus and its held-out split: which files the trainer never sees.

Deterministic and free of numpy and torch, so that evaluation scripts run by the system Python
(scripts/acceptance_report.py, scripts/load_matrix.py) prompt with the same held-out files.
"""
import hashlib
import os
from typing import List

DEFAULT_CORPUS_ROOT = "/usr/lib/python3.11"
_EXCLUDED_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


def list_corpus(root: str, pattern_ext: str = ".py") -> List[str]:
    """Sorted relative paths of *.py under root, skipping test dirs and site/dist-packages."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _EXCLUDED_DIRS)
        for fn in filenames:
            if fn.endswith(pattern_ext):
                out.append(os.path.relpath(os.path.join(dirpath, fn), root))
    return sorted(out)


def is_heldout(relpath: str, pct: float) -> bool:
    """Deterministic split: a file is held out when sha256(path) maps below pct percent."""
    h = int.from_bytes(hashlib.sha256(relpath.encode()).digest()[:8], "big")
    return (h % 10000) < pct * 100
