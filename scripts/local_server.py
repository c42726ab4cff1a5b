"""crossreg-server on loopback for a benchmark script: free ports, started, waited for, stopped.

    with local_server.running(bin_dir, ["--model=M"]) as (http_port, metrics_port):
        ...
"""
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(bin_dir, args, wait_s=240):
    """Starts bin_dir/crossreg-server with `args` on free loopback ports and yields (HTTP port,
    metrics port) once /health answers; exits the script naming the command if the server
    dies first. The server is stopped when the block ends."""
    http, grpc, metrics = free_port(), free_port(), free_port()
    cmd = [os.path.join(bin_dir, "crossreg-server"), "--host=127.0.0.1", f"--port={grpc}", f"--http_port={http}",
           f"--metrics_port={metrics}"] + list(args)
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + wait_s
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=1)
                break
            except OSError:
                if server.poll() is not None:
                    sys.exit(f"crossreg-server exited ({server.returncode}): {' '.join(cmd)}")
                if time.time() > deadline:
                    sys.exit(f"crossreg-server did not answer /health in {wait_s} s: {' '.join(cmd)}")
                time.sleep(0.2)
        yield http, metrics
    finally:
        server.terminate()
        server.wait(timeout=60)
