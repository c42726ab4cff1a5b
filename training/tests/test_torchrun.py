"""training.torchrun: two standalone launches on one machine, the first ending while the second
still runs, both succeed (with PyTorch 1.13's fixed localhost:29400 store the second one loses
its rendezvous store when the first exits and fails with RendezvousConnectionError)."""
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A worker that writes `started`, waits for `go`, then sleeps `linger` seconds: the test decides
# when each launch's workers end, so the overlap does not depend on the machine's speed.
WORKER = """
import os, sys, time
started, go, linger = sys.argv[1], sys.argv[2], float(sys.argv[3])
open(started, "w").close()
deadline = time.time() + 120
while not os.path.exists(go):
    if time.time() > deadline:
        sys.exit("no go file after 120 s")
    time.sleep(0.05)
time.sleep(linger)
"""


def wait_for(path, proc, what):
    deadline = time.time() + 120
    while not os.path.exists(path):
        assert proc.poll() is None, f"{what} exited early: {proc.communicate()}"
        assert time.time() < deadline, f"{what} did not start its worker in 120 s"
        time.sleep(0.05)


def test_a_standalone_launch_outlives_one_that_started_first(tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, TMPDIR=str(tmp_path))

    def launch(name, linger):
        # --monitor_interval 1: the launcher asks its rendezvous store for waiting nodes every
        # second while its worker runs, which is when a vanished store shows.
        cmd = [sys.executable, "-m", "training.torchrun", "--standalone", "--nproc_per_node", "1",
               "--monitor_interval", "1", str(worker), str(tmp_path / f"{name}.started"),
               str(tmp_path / f"{name}.go"), str(linger)]
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    first = launch("first", 0)
    wait_for(tmp_path / "first.started", first, "the first launch")
    second = launch("second", 4)
    try:
        wait_for(tmp_path / "second.started", second, "the second launch")
        (tmp_path / "first.go").touch()
        out1, err1 = first.communicate(timeout=120)
        assert first.returncode == 0, out1[-2000:] + err1[-2000:]
        # The second launch's worker runs on for 4 s (4 store polls) after the first has gone.
        (tmp_path / "second.go").touch()
        out2, err2 = second.communicate(timeout=120)
    finally:
        for p in (first, second):
            if p.poll() is None:
                p.kill()
    assert "RendezvousConnectionError" not in err2, err2[-3000:]
    assert second.returncode == 0, out2[-2000:] + err2[-2000:]
