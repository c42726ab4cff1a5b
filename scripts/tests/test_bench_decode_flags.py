"""crossreg-bench-decode's list flags: a bad item ends the run before the probes with the
flag's name and the item (a typo must never shorten a table silently), and --gemm_shapes /
--gemm_rows choose the kernel table's calls."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CROSSREG_BIN", os.path.join(ROOT, "build/bin"))


def bench():
    path = os.path.join(BIN, "crossreg-bench-decode")
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built")
    return path


@pytest.mark.parametrize("flags, message", [
    (["--rows", "1,0"], "--rows: '0' is not a count from 1 to 1024"),
    (["--batches", "1,x"], "--batches: 'x' is not a count from 1 to 256"),
    (["--attention_rows", "-3"], "--attention_rows: '-3' is not a count from 1 to 1024"),
    (["--gemm_rows", "5000"], "--gemm_rows: '5000' is not a count from 1 to 4096"),
    (["--gemm_shapes", "2304by768"], "--gemm_shapes: '2304by768' is not OUTxIN"),
    (["--gemm_types", "q4_k", "--gemm_shapes", "2304x760"],
     "--gemm_shapes: 2304x760: Q4_K weights take inputs in blocks of 256"),
])
def test_bad_list_items_are_refused_by_name(flags, message):
    run = subprocess.run([bench(), "--random100m=false", "--batches="] + flags if "--batches" not in flags
                         else [bench(), "--random100m=false"] + flags, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Measured peaks" not in run.stdout  # refused before the probes


def test_gemm_table_takes_the_shapes_and_rows_asked_for():
    run = subprocess.run([bench(), "--random100m=false", "--batches=", "--repeats", "1", "--gemm_types", "q8_0",
                          "--gemm_shapes", "64x256,96x512", "--gemm_rows", "3,1"],
                         capture_output=True, text=True, timeout=300, check=True)
    rows = re.findall(r"^\| (\d+) x (\d+) \| (\d+) \| [0-9.]+ \|", run.stdout, re.M)
    assert rows == [("64", "256", "3"), ("64", "256", "1"), ("96", "512", "3"), ("96", "512", "1")]
