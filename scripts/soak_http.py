#!/usr/bin/env python3
"""A bounded loopback soak of the HTTP front door: many clients at once, mixing what
real and hostile clients do, while the server's RSS is sampled.

Each client loops over: greedy completions (checked token for token against solo runs
made before the load), streams (their text checked the same way), streams it drops
after the first chunk, requests that outlive their X-Request-Timeout, long requests that
press the KV cache (a small cache forces preemption), pipelined pairs on one connection,
ambiguous framing and unknown fields (both must be 400). Beside them, slow-header
connections trickle bytes and are replaced when the server closes them. A small
--max_queue makes some requests 429 (the queue limit holding).

At the end the running and KV gauges must be back to 0 and the server must exit 0 on
SIGTERM. Prints one summary (and --json writes it); exits 1 on any mismatch.

  scripts/soak_http.py --minutes 30                  # the full soak
  scripts/soak_http.py --seconds 20 --clients 6      # a smoke run (the pytest does this)
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORIES = os.path.join(ROOT, "../shared/models/stories260K/stories260K.gguf")
PROMPTS = ["Once upon a time", "The little dog", "Tom and Lily went", "One day, a girl", "The sun was"]
LENGTHS = [16, 48]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def scrape(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def metric_sum(values, prefix):
    return sum(v for k, v in values.items() if k == prefix or k.startswith(prefix + "{"))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.tokens = 0
        self.failures = []

    def add(self, key, tokens=0):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            self.tokens += tokens
        if key.startswith("429"):
            time.sleep(0.1)  # a client told the queue is full backs off, as real ones do

    def fail(self, what):
        with self.lock:
            self.counts["FAILED"] = self.counts.get("FAILED", 0) + 1
            if len(self.failures) < 20:
                self.failures.append(what)


def post(port, body, timeout=120, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/v1/completions", json.dumps(body),
                 dict({"Content-Type": "application/json"}, **(headers or {})))
    res = conn.getresponse()
    data = res.read()
    conn.close()
    return res.status, data


def raw(port, payload, timeout=60):
    """Sends bytes on a fresh connection, returns everything until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def request_bytes(body, close=False):
    data = json.dumps(body).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n" + ("Connection: close\r\n" if close else "") + "\r\n")
    return head.encode() + data


def split_responses(data):
    """(status, body) of each Content-Length-framed response in `data`, in order."""
    out = []
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            break
        head = data[:end].decode("latin-1")
        length = int(re.search(r"(?im)^content-length: *(\d+)", head).group(1))
        out.append((int(head[9:12]), data[end + 4:end + 4 + length]))
        data = data[end + 4 + length:]
    return out


def greedy_body(prompt, length, mode, **extra):
    return dict({"prompt": prompt, "max_tokens": length, "temperature": 0, "mode": mode, "ignore_eos": True}, **extra)


class Client(threading.Thread):
    def __init__(self, index, port, refs, stats, deadline):
        super().__init__(daemon=True)
        self.rng = random.Random(index)
        self.port, self.refs, self.stats, self.deadline = port, refs, stats, deadline

    def run(self):
        actions = [(self.greedy, 30), (self.stream, 20), (self.drop_stream, 10), (self.late, 5), (self.long, 10),
                   (self.pipelined, 10), (self.framing, 5), (self.unknown_field, 5)]
        population = [a for a, w in actions for _ in range(w)]
        while time.time() < self.deadline:
            action = self.rng.choice(population)
            try:
                action()
            except Exception as e:  # a client-side failure is a finding, not a crash of the soak
                self.stats.fail(f"{action.__name__}: {type(e).__name__}: {e}")

    def pick(self):
        return self.rng.choice(PROMPTS), self.rng.choice(LENGTHS), self.rng.choice(["ar", "ngram"])

    def check(self, kind, status, data, prompt, length):
        if status == 429:
            self.stats.add("429 queue full")
            return
        if status != 200:
            self.stats.fail(f"{kind}: status {status}: {data[:200]!r}")
            return
        reply = json.loads(data)
        ids = reply["choices"][0]["token_ids"]
        if ids == self.refs[(prompt, length)]["ids"]:
            self.stats.add(f"{kind} exact", len(ids))
        else:
            self.stats.fail(f"{kind}: {prompt!r} x{length}: ids differ from the solo run")

    def greedy(self):
        prompt, length, mode = self.pick()
        status, data = post(self.port, greedy_body(prompt, length, mode, return_token_ids=True))
        self.check("greedy", status, data, prompt, length)

    def stream(self):
        prompt, length, mode = self.pick()
        status, data = post(self.port, greedy_body(prompt, length, mode, stream=True,
                                                   stream_options={"include_usage": True}))
        if status == 429:
            self.stats.add("429 queue full")
            return
        text, usage = "", None
        for line in data.decode().split("\n\n"):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices", []):
                text += choice.get("text", "")
        if status == 200 and text == self.refs[(prompt, length)]["text"] and usage:
            self.stats.add("stream exact", usage["completion_tokens"])
        else:
            self.stats.fail(f"stream: status {status}, {prompt!r} x{length}: text differs from the solo run")

    def drop_stream(self):
        payload = request_bytes(greedy_body(self.rng.choice(PROMPTS), 400, "ar", stream=True))
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as s:
            s.sendall(payload)
            got = b""
            while b'"text"' not in got and b" 429 " not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        self.stats.add("429 queue full" if b" 429 " in got[:20] else "stream dropped")

    def late(self):
        status, data = post(self.port, greedy_body("Once", 1000, "ar"), headers={"X-Request-Timeout": "0.2"})
        if status in (504, 429):
            self.stats.add(f"{status} deadline" if status == 504 else "429 queue full")
        else:
            self.stats.fail(f"late: status {status} (want 504): {data[:200]!r}")

    def long(self):
        status, data = post(self.port, greedy_body(self.rng.choice(PROMPTS), 300, "ar"))
        if status in (200, 429):
            self.stats.add("long" if status == 200 else "429 queue full",
                           json.loads(data)["usage"]["completion_tokens"] if status == 200 else 0)
        else:
            self.stats.fail(f"long: status {status}: {data[:200]!r}")

    def pipelined(self):
        prompt, length, mode = self.pick()
        one = request_bytes(greedy_body(prompt, length, mode, return_token_ids=True))
        two = request_bytes(greedy_body(prompt, length, mode, return_token_ids=True), close=True)
        responses = split_responses(raw(self.port, one + two))
        if len(responses) != 2:
            self.stats.fail(f"pipelined: {len(responses)} responses to 2 requests")
            return
        for status, body in responses:
            self.check("pipelined", status, body, prompt, length)

    def framing(self):
        body = json.dumps({"prompt": "x", "max_tokens": 2}).encode()
        payload = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: 5\r\n\r\n"
                   % len(body)) + body
        reply = raw(self.port, payload)
        if reply.startswith(b"HTTP/1.1 400 "):
            self.stats.add("400 framing")
        else:
            self.stats.fail(f"framing: {reply[:80]!r}")

    def unknown_field(self):
        status, data = post(self.port, {"prompt": "def f():", "temprature": 0, "max_token": 5})
        if status == 400 and b"temprature" in data:
            self.stats.add("400 unknown field")
        else:
            self.stats.fail(f"unknown field: status {status}")


def slow_headers(port, count, stop, stats):
    """Holds `count` connections that never finish their headers, replacing closed ones."""
    conns = []
    while not stop.is_set():
        while len(conns) < count:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
                conns.append(s)
            except OSError:
                break
        alive = []
        for s in conns:
            try:
                s.sendall(b"X-Slow: 1\r\n")
                alive.append(s)
            except OSError:
                stats.add("slow connection closed by the server")
                s.close()
        conns = alive
        stop.wait(1.0)
    for s in conns:
        s.close()


def references(port):
    refs = {}
    for prompt in PROMPTS:
        for length in LENGTHS:
            status, data = post(port, greedy_body(prompt, length, "ar", return_token_ids=True))
            if status != 200:
                raise SystemExit(f"reference run failed: {status} {data[:200]!r}")
            choice = json.loads(data)["choices"][0]
            refs[(prompt, length)] = {"ids": choice["token_ids"], "text": choice["text"]}
    return refs


def wait_ready(port, proc, timeout=60):
    start = time.time()
    while time.time() - start < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode} while starting")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not become ready")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.path.join(os.environ.get("CROSSREG_BIN", os.path.join(ROOT, "build/bin")),
                                                     "crossreg-server"))
    ap.add_argument("--model", default=STORIES, help="a model path, or 'default' for the embedded default model")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, help="duration in seconds (overrides --minutes)")
    ap.add_argument("--clients", type=int, default=24)
    ap.add_argument("--slow", type=int, default=64, help="slow-header connections held open")
    ap.add_argument("--kv_blocks", type=int, default=48, help="a small cache forces preemption")
    ap.add_argument("--max_queue", type=int, default=12)
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args()
    duration = args.seconds if args.seconds is not None else args.minutes * 60

    http_port, metrics_port = free_port(), free_port()
    log_path = os.path.join(tempfile.gettempdir(), f"soak_http_server_{os.getpid()}.log")
    log = open(log_path, "w")
    model = [] if args.model == "default" else ["--model", args.model]
    proc = subprocess.Popen([args.server] + model + ["--host", "127.0.0.1", "--port", "0",
                             "--http_port", str(http_port), "--metrics_port", str(metrics_port),
                             "--kv_blocks", str(args.kv_blocks), "--max_queue", str(args.max_queue),
                             "--max_running", "16"], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(http_port, proc)
        refs = references(http_port)
        stats = Stats()
        start = time.time()
        deadline = start + duration
        stop = threading.Event()
        slow = threading.Thread(target=slow_headers, args=(http_port, args.slow, stop, stats), daemon=True)
        slow.start()
        clients = [Client(i, http_port, refs, stats, deadline) for i in range(args.clients)]
        for c in clients:
            c.start()
        samples = []
        marks = sorted({min(60.0, duration / 30), min(600.0, duration / 3), duration})
        reported = {}
        while time.time() < deadline and proc.poll() is None:
            elapsed = time.time() - start
            samples.append((elapsed, rss_mb(proc.pid)))
            for mark in marks:
                if mark not in reported and elapsed >= mark - 5:
                    reported[mark] = samples[-1][1]
            print(f"[soak] {elapsed:7.0f} s  RSS {samples[-1][1]:6.1f} MB  {dict(sorted(stats.counts.items()))}",
                  flush=True)
            time.sleep(min(10.0, max(1.0, duration / 60)))
        for c in clients:
            c.join(timeout=180)
        stop.set()
        slow.join(timeout=10)
        reported[duration] = rss_mb(proc.pid)
        settled = False
        for _ in range(100):
            values = scrape(metrics_port)
            if values.get("crossreg_num_requests_running", 1) == 0 and values.get("crossreg_kv_cache_usage_perc", 1) == 0:
                settled = True
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(timeout=60)
        summary = {
            "seconds": round(duration),
            "clients": args.clients,
            "requests": sum(stats.counts.values()),
            "completion_tokens": stats.tokens,
            "exact": sum(v for k, v in stats.counts.items() if k.endswith("exact")),
            "failed": stats.counts.get("FAILED", 0),
            "counts": dict(sorted(stats.counts.items())),
            "failures": stats.failures,
            "rss_mb": {f"{mark / 60:.1f} min": round(v, 1) for mark, v in sorted(reported.items())},
            "rss_mb_min_max_after_first_mark": [round(min(v for t, v in samples if t >= marks[0]), 1) if samples else 0,
                                                round(max(v for _, v in samples), 1) if samples else 0],
            "preemptions": metric_sum(values, "crossreg_num_preemptions_total"),
            "requests_ended": {re.sub(r"^crossreg_requests_ended_total", "", k): int(v) for k, v in sorted(values.items())
                               if k.startswith("crossreg_requests_ended_total") and v > 0},
            "gauges_back_to_zero": settled,
            "server_exit": exit_code,
        }
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    ok = summary["failed"] == 0 and summary["gauges_back_to_zero"] and summary["server_exit"] == 0
    if ok:
        os.remove(log_path)  # kept only when something went wrong
    else:
        print(f"[soak] the server's log: {log_path}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
