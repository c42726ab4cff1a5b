"""The quickstart's first request on the embedded default model: scripts/pick_mode.py measures
every exact mode on it through a running crossreg-server, and the answer at the quickstart's
sampling settings does not loop."""
import collections
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from soak_http import free_port, wait_ready  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from built_programs import program  # noqa: E402
from pick_mode import choose  # noqa: E402

MODEL = os.path.join(ROOT, "models/default")
# scripts/quickstart.sh's request (PROMPT, REQUEST).
PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    '
SETTINGS = ["--max_tokens", "128", "--temperature", "0.8", "--top_p", "0.95", "--repetition_penalty", "1.1"]
REQUEST = SETTINGS + ["--seed", "1"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(os.path.join(MODEL, "config.json")):
        pytest.skip("no embedded default model")
    grpc_port, http_port = free_port(), free_port()
    log = open(str(tmp_path_factory.mktemp("pick") / "server.log"), "w")
    proc = subprocess.Popen([program("crossreg-server"), "--host", "127.0.0.1", "--port", str(grpc_port),
                             "--http_port", str(http_port), "--metrics_port", "0", "--adaptive_gamma"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(http_port, proc, timeout=120)
        yield f"127.0.0.1:{grpc_port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_every_exact_mode_is_measured_and_the_fastest_is_picked(server):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/pick_mode.py"), "--cli", program("crossreg"),
                          "--server", server, "--prompt", PROMPT, "--rounds", "1", "--"] + REQUEST,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2].startswith("pick: "), out.stdout
    rows = {ln.split()[0]: ln.split() for ln in lines[1:-2]}
    # The model drafts for itself: both lossless candidates run.
    assert set(rows) == {"ar", "ngram", "lossless", "lossless+ngram_assist"}, out.stdout
    speeds = {mode: float(r[1]) for mode, r in rows.items()}
    # Tokens per forward: adaptive γ may run lossless as plain AR where drafts do not pay.
    assert float(rows["ar"][3]) == 1.0 and float(rows["lossless"][3]) >= 1.0
    assert float(rows["lossless+ngram_assist"][3]) >= 1.0
    _, pick, pick_tps, ar_tps = lines[-1].split()
    # One round: the margin is 5%. A drafting pick beat AR by more than that with drafts accepted.
    if pick != "ar":
        assert speeds[pick] > 1.05 * speeds["ar"] and float(rows[pick][3]) > 1.05, out.stdout
        assert pick == max((m for m in speeds if m != "ar" and float(rows[m][3]) > 1.05), key=speeds.get)
    assert float(pick_tps) == pytest.approx(speeds[pick], abs=0.1)
    assert float(ar_tps) == pytest.approx(speeds["ar"], abs=0.1)


def rounds_of(**modes):
    return {name: [{"tps": tps, "tpf": tpf} for tps in speeds] for name, (speeds, tpf) in modes.items()}


def test_choose_picks_a_drafting_mode_only_past_the_margin_with_drafts_accepted():
    # A real speedup: 30% over AR's best with 2 tokens per forward.
    pick, margin, _ = choose(rounds_of(ar=([100, 98], 1.0), ngram=([130, 120], 2.0), lossless=([125], 2.5)))
    assert pick == "ngram" and margin == 0.05
    # Inside 5%: noise, AR stays.
    pick, _, reason = choose(rounds_of(ar=([100, 99], 1.0), ngram=([104], 1.6)))
    assert pick == "ar" and "margin" in reason
    # AR's own rounds spread 20%, so a 10% lead is within this host's noise.
    pick, margin, _ = choose(rounds_of(ar=([100, 120], 1.0), lossless=([132], 1.8)))
    assert pick == "ar" and margin == pytest.approx(0.2)
    # Faster but every forward ran as AR (the quickstart's 1.10x on a Zen 3 host): not a speedup.
    pick, _, reason = choose(rounds_of(ar=([673], 1.0), lossless=([743], 1.01), ngram=([600], 1.3)))
    assert pick == "ar" and "as AR" in reason
    # The fastest eligible one wins, not the fastest overall.
    pick, _, _ = choose(rounds_of(ar=([100], 1.0), lossless=([150], 1.02), ngram=([120], 1.5)))
    assert pick == "ngram"


def test_the_default_model_drafts_for_itself_through_the_server(server):
    """What the lossless row measures when adaptive γ lets it draft: the model's own blocks,
    with no adapter, accepted at a fixed γ (greedy, so the same on every run)."""
    out = subprocess.run([program("crossreg"), "--server", server, "--prompt", PROMPT, "--mode", "lossless",
                          "--gamma", "4", "--adaptive_gamma", "false", "--max_tokens", "64", "--format", "jsonl"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    done = [json.loads(line)["complete"] for line in out.stdout.splitlines() if '"complete"' in line][0]
    assert float(done["spec"]["tokens_per_forward"]) > 1.2 and int(done["spec"]["accepted"]) > 0


def test_pick_mode_names_a_mode_that_fails(server):
    # A request the server refuses in every mode (top_p out of range) is reported, not hidden.
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/pick_mode.py"), "--cli", program("crossreg"),
                          "--server", server, "--prompt", PROMPT, "--rounds", "1", "--", "--top_p", "1.5"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "AR failed" in out.stderr and "top_p" in out.stderr


def test_the_quickstart_answer_does_not_loop(server):
    """The target: no 8-token sequence more than three times in the answer's 128 tokens. Every
    exact mode writes AR's text for a seed, so AR's are checked: the quickstart's seed (4),
    whose answer must run its full length, and nine more. Which seeds loop, or end early,
    moves with the kernels' rounding: at penalty 1.1, of seeds 1-20 only seed 14 loops (four
    times) on the vdpbf16ps kernel and on the portable path, none on the widened kernel and
    the AVX2 path; seed 4 runs its 128 tokens on all four (seed 3 ends after 10). Without the
    penalty 9 of 20 loop on the vdpbf16ps kernel."""
    worst = {}
    for seed in range(1, 11):
        out = subprocess.run([program("crossreg"), "--server", server, "--prompt", PROMPT, "--mode", "ar",
                              "--format", "jsonl", "--seed", str(seed)] + SETTINGS,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        ids = []
        for line in out.stdout.splitlines():
            msg = json.loads(line)
            if "chunk" in msg:
                ids += msg["chunk"]["token_ids"]
        assert 0 < len(ids) <= 128
        grams = collections.Counter(tuple(ids[i:i + 8]) for i in range(len(ids) - 7))
        worst[seed] = max(grams.values(), default=0)
        if seed == 4:
            assert len(ids) == 128  # the quickstart's answer runs its full length
    assert max(worst.values()) <= 3, worst
