"""scripts/write_random_hf_model.py writes a directory crossreg loads: a tiny shape loads,
quantizes at load (the summary names the matrices, the sizes and the time) and decodes."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from built_programs import program  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts/write_random_hf_model.py")


def test_tiny_model_loads_and_quantizes(tmp_path):
    pytest.importorskip("numpy")
    generate = program("crossreg-generate")
    out = tmp_path / "model"
    subprocess.run([sys.executable, SCRIPT, str(out), "--layers", "2", "--hidden", "256", "--ffn", "512",
                    "--heads", "4", "--kv_heads", "2"], check=True, capture_output=True)
    run = subprocess.run([generate, "--model", str(out), "--quantize", "q4_k", "--prompt", "def f(x):",
                          "--max_new_tokens", "3"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    # 2 layers x 7 matrices + embedding + output, every row whole blocks of 256.
    line = re.search(r"quantized (\d+) matrices to Q4_K, ([\d.]+) MB -> ([\d.]+) MB in ([\d.]+) s", run.stderr)
    assert line, run.stderr
    assert int(line.group(1)) == 16
    assert float(line.group(3)) < float(line.group(2)) / 3  # 4.5 bits a weight against 16


def test_shape_errors_name_the_flag(tmp_path):
    run = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "m"), "--heads", "3"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "--hidden must be a multiple of --heads" in run.stderr
