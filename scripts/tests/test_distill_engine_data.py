"""The user's path of docs/training.md on a tiny model, with the real programs: the engine
generates the targets (crossreg-distill-data, nested prefixes sharing cached blocks), two
torchrun processes train on its file, and the engine loads the adapter and decodes lossless
output identical to AR. The same file trains an outcome-block adapter, which the server serves
in its layout, lossless = AR."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from training import pretrain  # noqa: E402
from training.distill_data import read_engine_file  # noqa: E402
from training.hf_io import load_model_dir  # noqa: E402
from training.layout import generate  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from soak_http import free_port, post, wait_ready  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from built_programs import program  # noqa: E402



@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny base pretrained on a few of the trainer's own sources, and those sources as the
    user's prompts (JSONL)."""
    d = tmp_path_factory.mktemp("tiny")
    corpus = d / "corpus"
    corpus.mkdir()
    texts = []
    for name in ("model.py", "layout.py", "distill_data.py", "budget.py"):
        text = open(os.path.join(ROOT, "training", name)).read()
        (corpus / name).write_text(text)
        texts.append(text)
    out = str(d / "pretrain")
    assert pretrain.main(["--out", out, "--corpus-root", str(corpus), "--vocab-size", "300",
                          "--hidden", "32", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                          "--ffn", "48", "--seq-len", "64", "--batch", "4", "--steps", "30",
                          "--eval-every", "30", "--device", "cpu", "--holdout-pct", "30"]) == 0
    prompts = d / "prompts.jsonl"
    with open(prompts, "w") as f:
        for t in texts:  # one document per line, and one split in two to have five
            f.write(json.dumps({"text": t}) + "\n")
        f.write(json.dumps({"prompt": texts[0][:2000]}) + "\n")
    return os.path.join(out, "model"), str(prompts), d


def test_engine_data_trains_on_two_processes_and_serves_lossless(tiny):
    model, prompts, d = tiny
    data = str(d / "data.bin")
    r = subprocess.run([program("crossreg-distill-data"), "--model", model, "--prompts", prompts,
                        "--examples", "24", "--eval_examples", "6", "--holdout_pct", "30",
                        "--prefix_min", "20", "--prefix_max", "48", "--window", "6",
                        "--windows_per_prefix", "3", "--backend", "cpu", "--threads", "1",
                        "--kv_memory_mb", "16", "--out", data],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "windows per prefix: the prefix cache served" in r.stderr
    cached = int(r.stderr.split("the prefix cache served ")[1].split()[0])
    assert cached >= 8 * 2 * 16       # every follower found its leader's first block at least

    # The file as the trainer reads it: the engine's greedy continuations are the PyTorch
    # base's (float32 both; a near-tie could flip a token, hence the 90% floor).
    h, splits = read_engine_file(data)
    assert h["windows_per_prefix"] == 3 and splits["train"].group == 3
    assert len(splits["train"]) == 24 and len(splits["eval"]) == 6
    base = load_model_dir(model)
    ex = splits["train"]
    prefixes = [ex.prefix(i) for i in range(len(ex))]
    ours = torch.cat([generate(base, [p], 6) for p in prefixes])
    theirs = torch.from_numpy(ex.cont.astype("int64"))
    assert (ours == theirs).float().mean().item() >= 0.9

    out = str(d / "drafter")
    # TMPDIR: the launcher leaves a torchelastic_* directory behind in it on every start.
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, TMPDIR=str(d))
    r = subprocess.run([sys.executable, "-m", "training.torchrun", "--standalone", "--nproc_per_node",
                        "2", "-m", "training", "distill", "--base", model, "--data", data,
                        "--out", out, "--batch", "6", "--steps", "3", "--rank", "4", "--alpha",
                        "8", "--eval-every", "3", "--log-every", "1", "--device", "cpu",
                        "--threads", "1", "--windows-per-prefix", "3"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "2 processes (gloo), 3 windows each" in r.stdout + r.stderr
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["processes"] == 2 and run["data"]["data_file"] == os.path.abspath(data)

    outputs = {}
    for mode in ("ar", "lossless"):
        r = subprocess.run([program("crossreg-generate"), "--model", model, "--adapter",
                            os.path.join(out, "adapter"), "--mode", mode, "--prompt", "def f(",
                            "--max_new_tokens", "24", "--format", "jsonl", "--backend", "cpu",
                            "--threads", "1"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outputs[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    assert outputs["lossless"]["ids"] == outputs["ar"]["ids"]
    assert len(outputs["ar"]["ids"]) == 24
    # The engine's control and predictive logits with this adapter equal the trainer's: the
    # parity test run on the fixture of this model and the 2-process adapter.
    fixture = str(d / "fixture")
    from training import export_fixture
    assert export_fixture.main(["--out", fixture, "--model", model, "--adapter",
                                os.path.join(out, "adapter")]) == 0
    r = subprocess.run([program("crossreg_parity_tests")], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, CROSSREG_PARITY_FIXTURE=fixture))
    assert r.returncode == 0 and "PASSED" in r.stdout, r.stdout[-3000:]
    assert "SKIPPED" not in r.stdout

    # The outcome-block layout, trained on the same file (docs/algorithm.md "Outcome blocks").
    blocks = str(d / "blocks")
    r = subprocess.run([sys.executable, "-m", "training", "distill", "--base", model, "--data", data,
                        "--out", blocks, "--batch", "6", "--steps", "3", "--rank", "4", "--alpha",
                        "8", "--eval-every", "3", "--log-every", "1", "--device", "cpu", "--threads",
                        "1", "--windows-per-prefix", "3", "--draft-layout", "blocks",
                        "--block-anchors", "2", "--block-rows", "4"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    xr = json.load(open(os.path.join(blocks, "adapter", "crossreg_adapter.json")))
    assert xr["draft_layout"] == "blocks"
    # The server takes the adapter's layout for requests that leave draft_layout unset.
    port = free_port()
    log = open(str(d / "server.log"), "w")
    server = subprocess.Popen([program("crossreg-server"), "--model", model, "--adapter",
                               os.path.join(blocks, "adapter"), "--host", "127.0.0.1", "--port", "0",
                               "--http_port", str(port), "--metrics_port", str(free_port()),
                               "--threads", "1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(port, server)
        ids = {}
        for name, extra in (("ar", {"mode": "ar"}), ("blocks", {"mode": "lossless", "fork_depth": 4}),
                            ("blocks, every outcome", {"mode": "lossless", "gamma": 3,
                                                       "draft_layout": "blocks"}),
                            ("chain", {"mode": "lossless", "draft_layout": "chain"})):
            status, body = post(port, dict({"prompt": "def f(", "max_tokens": 24, "temperature": 0,
                                            "return_token_ids": True}, **extra))
            assert status == 200, (name, body[:300])
            ids[name] = json.loads(body)["choices"][0]["token_ids"]
        assert len(ids["ar"]) == 24
        for name in ("blocks", "blocks, every outcome", "chain"):
            assert ids[name] == ids["ar"], name
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert export_fixture.main(["--out", fixture, "--model", model, "--adapter",
                                os.path.join(blocks, "adapter")]) == 0
    r = subprocess.run([program("crossreg_parity_tests")], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, CROSSREG_PARITY_FIXTURE=fixture))
    assert r.returncode == 0 and "PASSED" in r.stdout, r.stdout[-3000:]


def serve_and_compare(model, extra_args, requests, d):
    """Greedy token ids of each named request from crossreg-server over HTTP."""
    port = free_port()
    log = open(str(d / "server.log"), "a")
    server = subprocess.Popen([program("crossreg-server"), "--model", model, "--host", "127.0.0.1",
                               "--port", "0", "--http_port", str(port), "--metrics_port",
                               str(free_port()), "--threads", "1"] + extra_args,
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(port, server)
        ids = {}
        for name, extra in requests:
            status, body = post(port, dict({"prompt": "def f(", "max_tokens": 24, "temperature": 0,
                                            "return_token_ids": True}, **extra))
            assert status == 200, (name, body[:300])
            ids[name] = json.loads(body)["choices"][0]["token_ids"]
        return ids
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_hybrid_model_drafts_for_itself_lossless(tiny):
    """pretrain --hybrid: a base that drafts in the outcome-block layout with no adapter; the
    engine reads config.json's crossreg_draft and serves it lossless = AR."""
    _, _, d = tiny
    out = str(d / "hybrid")
    assert pretrain.main(["--out", out, "--corpus-root", str(d / "corpus"), "--vocab-size", "300",
                          "--hidden", "32", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                          "--ffn", "48", "--seq-len", "64", "--batch", "4", "--steps", "20",
                          "--eval-every", "20", "--device", "cpu", "--holdout-pct", "30",
                          "--hybrid", "--hybrid-anchors", "3", "--hybrid-rows", "4"]) == 0
    model = os.path.join(out, "model")
    cfg = json.load(open(os.path.join(model, "config.json")))
    assert cfg["crossreg_draft"]["draft_layout"] == "blocks" and cfg["crossreg_draft"]["block_rows"] == 4
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["final"]["heldout_block_loss"] > 0
    outputs = {}
    for mode in ("ar", "lossless"):
        r = subprocess.run([program("crossreg-generate"), "--model", model, "--mode", mode, "--prompt",
                            "def f(", "--max_new_tokens", "24", "--format", "jsonl", "--backend", "cpu",
                            "--threads", "1"] + (["--gamma", "4", "--fork_depth", "4"] if mode != "ar" else []),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outputs[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    assert outputs["lossless"]["ids"] == outputs["ar"]["ids"] and len(outputs["ar"]["ids"]) == 24
    ids = serve_and_compare(model, [], [("ar", {"mode": "ar"}),
                                        ("lossless", {"mode": "lossless", "gamma": 4, "fork_depth": 4}),
                                        ("lossy", {"mode": "lossy", "gamma": 3})], d)
    assert ids["lossless"] == ids["ar"] and ids["lossy"] == ids["ar"]
