"""scripts/soak_http.py, run briefly against the real server on stories260K: every greedy
reply equals its solo run, hostile requests get their statuses, the small cache preempts,
and the gauges return to 0 (the 30-minute soak is the same script, longer)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CROSSREG_BIN", os.path.join(ROOT, "build/bin"))
STORIES = os.path.join(ROOT, "../shared/models/stories260K/stories260K.gguf")


def test_a_short_soak_is_exact_and_settles(tmp_path):
    server = os.path.join(BIN, "crossreg-server")
    if not os.access(server, os.X_OK):
        pytest.skip(f"{server} is not built")
    if not os.path.exists(STORIES):
        pytest.skip(f"{STORIES} is missing")
    out = tmp_path / "soak.json"
    run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/soak_http.py"), "--server", server,
                          "--seconds", "12", "--clients", "6", "--slow", "8", "--json", str(out)],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["failed"] == 0, summary["failures"]
    assert summary["exact"] > 20
    for kind in ("greedy exact", "stream exact", "pipelined exact", "400 framing", "400 unknown field"):
        assert summary["counts"].get(kind, 0) > 0, kind
    assert summary["preemptions"] > 0
    assert summary["gauges_back_to_zero"] and summary["server_exit"] == 0
