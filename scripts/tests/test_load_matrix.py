"""scripts/load_matrix.py, run small against the real server on stories260K: a table row per
concurrency and mode, with AR at 1.00x, the server's own speedup beside the measured one, and
the figures file it writes."""
import os
import subprocess
import sys

import pytest

from built_programs import BIN, ROOT, program

STORIES = os.path.join(ROOT, "../shared/models/stories260K/stories260K.gguf")
SCRIPT = os.path.join(ROOT, "scripts/load_matrix.py")


def test_a_small_matrix_prints_every_cell_and_writes_its_figures(tmp_path):
    program("crossreg-server")
    if not os.path.exists(STORIES):
        pytest.skip(f"{STORIES} is missing")
    out = tmp_path / "matrix.md"
    run = subprocess.run([sys.executable, SCRIPT, "--bin", BIN, "--model", STORIES, "--modes", "ar,ngram",
                          "--concurrency", "1,3", "--rounds", "1", "--max-tokens", "16", "--prompts", "2", "--min-requests", "2",
                          "--requests-per-slot", "1",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| 1 |") or line.startswith("| 3 |")]
    assert len(rows) == 4, run.stdout
    for c in ("1", "3"):
        ar = next(r for r in rows if r.startswith(f"| {c} | ar |"))
        assert "| 1.00x (1.00-1.00) |" in ar, ar
        ngram = next(r for r in rows if r.startswith(f"| {c} | ngram |")).split("|")
        assert float(ngram[8]) > 0, ngram  # the server's speedup for the cell
    text = out.read_text()
    assert "load_matrix.py" in text.splitlines()[0] and "| 3 | ngram |" in text


def test_an_unknown_mode_is_refused_by_name():
    run = subprocess.run([sys.executable, SCRIPT, "--modes", "ar,turbo"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--modes: unknown turbo" in run.stderr
