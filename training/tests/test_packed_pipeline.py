"""The GPU pipeline end to end at toy size on CPU: corpus -> packed streams -> pretrain (budget,
auto-steps, bf16 sharded export) -> distill from the packed corpus. ~15 s on 2 cores."""
import json
import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import corpus, packed_corpus, pretrain, distill  # noqa: E402
from training import safetensors_io as st  # noqa: E402
from training.hf_io import load_model_dir, load_adapter, hf_state_dict  # noqa: E402
from training.tokenizer import ByteBPETokenizer, train_bpe  # noqa: E402

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ("model.py", "layout.py", "tokenizer.py", "hf_io.py", "distill.py", "pretrain.py",
           "common.py", "corpus.py", "safetensors_io.py", "export_fixture.py", "budget.py",
           "accel.py", "token_batches.py", "packed_corpus.py")
MODEL = ["--hidden", "32", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "48",
         "--seq-len", "32", "--batch", "4", "--eval-batches", "1", "--log-every", "1",
         "--device", "cpu", "--threads", "1"]
SHARD_LIMIT = 24_000  # bytes: the toy model (~50 KB in bf16) needs several shards


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A source tree with every case the selection handles."""
    d = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        shutil.copy(os.path.join(PKG, name), d / name)
    (d / "pkg").mkdir()
    shutil.copy(os.path.join(PKG, "model.py"), d / "pkg" / "model_copy.py")  # duplicate content
    (d / "pkg" / "__init__.py").write_text("")                                # empty
    (d / "pkg" / "latin1.py").write_bytes(b"# caf\xe9\nx = 1\n")               # not UTF-8
    (d / "pkg" / "huge.py").write_text("x = 1\n" * 20000)                     # 120 KB: too large
    (d / "pkg" / "table.py").write_text("RULES.append(rule(a, b))\n" * 500)  # generated-looking
    for skip in ("tests", "_vendor"):
        (d / skip).mkdir()
        (d / skip / "skipped.py").write_text("must never be read\n")
    return str(d)


def build(tree, out, workers=2):
    return corpus.build(corpus.build_parser().parse_args([
        "--out", out, "--stdlib", "none", "--packages", "none", "--root", tree,
        "--vocab-size", "320", "--holdout-pct", "20", "--max-file-bytes", "100000",
        "--workers", str(workers)]))


@pytest.fixture(scope="module")
def packed(tree, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("corpus"))
    return out, build(tree, out)


def manifest_rows(path):
    lines = open(path).read().splitlines()
    assert lines[0] == "sha256\tbytes\tsplit\tsource\tpath"
    return [dict(zip(lines[0].split("\t"), ln.split("\t"))) for ln in lines[1:]]


def test_corpus_selection_manifest_and_split(packed, tree):
    out, meta = packed
    rows = manifest_rows(os.path.join(out, "manifest.tsv"))
    paths = [r["path"] for r in rows]
    assert paths == sorted(paths) and set(paths) == set(SOURCES)  # no copy, empty, bad, big, table, tests
    assert meta["files"]["skipped"] == {"too_large": 1, "not_utf8": 1, "empty": 1,
                                        "duplicate": 1, "bad_name": 0, "repetitive": 1}
    held = {r["path"] for r in rows if r["split"] == "heldout"}
    assert 0 < len(held) < len(rows) and meta["files"]["heldout"] == len(held)
    for r in rows:
        data = open(os.path.join(tree, r["path"]), "rb").read()
        assert int(r["bytes"]) == len(data)
    assert packed_corpus.file_sha256(os.path.join(out, "manifest.tsv")) == meta["manifest_sha256"]
    assert meta["tokens"]["train"] > 0 and meta["bytes_per_token"] > 1.2
    assert meta["artifact_bytes"] == sum(os.path.getsize(os.path.join(out, f)) for f in (
        "manifest.tsv", "tokenizer.json", "train.tokens.xz", "heldout.tokens.xz"))


def test_streams_read_back_as_documents_and_heldout_never_in_train(packed, tree):
    out, meta = packed
    m, tok_path, streams = packed_corpus.load(out)
    tok = ByteBPETokenizer.load(tok_path)
    bos, eos = tok.specials["<|bos|>"], tok.specials["<|eos|>"]
    rows = manifest_rows(os.path.join(out, "manifest.tsv"))
    for split, ids in streams.items():
        assert ids.dtype == np.uint16 and len(ids) == meta["tokens"][split]
        want = [r["path"] for r in rows if r["split"] == split]  # manifest order
        assert ids[0] == bos and ids[-1] == eos and int((ids == bos).sum()) == len(want)
        docs = np.split(ids, np.nonzero(ids == bos)[0][1:])
        for path, doc in zip(want, docs):
            assert doc[-1] == eos
            assert tok.decode(doc[1:-1].tolist()) == open(os.path.join(tree, path)).read()
    # no held-out document's token sequence occurs in the train stream
    train = streams["train"].tobytes()
    heldout_docs = np.split(streams["heldout"], np.nonzero(streams["heldout"] == bos)[0][1:])
    for doc in heldout_docs:
        assert doc[1:-1].tobytes() not in train


def test_corpus_build_is_deterministic(packed, tree, tmp_path):
    out, meta = packed
    again = build(tree, str(tmp_path / "again"), workers=1)  # other worker count, same bytes
    assert again["manifest_sha256"] == meta["manifest_sha256"]
    for f in ("manifest.tsv", "tokenizer.json", "train.tokens.xz", "heldout.tokens.xz"):
        assert open(os.path.join(out, f), "rb").read() == \
            open(os.path.join(str(tmp_path / "again"), f), "rb").read(), f


def test_a_given_tokenizer_is_used_not_trained(packed, tree, tmp_path):
    out, meta = packed
    again = corpus.build(corpus.build_parser().parse_args([
        "--out", str(tmp_path / "given"), "--stdlib", "none", "--packages", "none", "--root", tree,
        "--vocab-size", "999", "--holdout-pct", "20", "--max-file-bytes", "100000",
        "--tokenizer", os.path.join(out, "tokenizer.json")]))
    assert open(tmp_path / "given" / "tokenizer.json").read() == open(os.path.join(out, "tokenizer.json")).read()
    assert again["streams"]["train"]["sha256"] == meta["streams"]["train"]["sha256"]


def test_corpus_subset_keeps_tokenizer_and_heldout_and_cuts_train(packed, tmp_path):
    from training import corpus_subset
    out, meta = packed
    sub = str(tmp_path / "sub")
    assert corpus_subset.main(["--corpus", out, "--out", sub, "--train-tokens", "200",
                               "--pieces", "4"]) == 0
    m, _, streams = packed_corpus.load(sub)
    _, _, whole = packed_corpus.load(out)
    assert len(streams["train"]) == 200
    assert np.array_equal(streams["heldout"], whole["heldout"])
    assert np.array_equal(streams["train"][:50], whole["train"][:50])  # the first piece starts at 0
    assert m["manifest_sha256"] != meta["manifest_sha256"]
    assert m["subset_of"]["manifest_sha256"] == meta["manifest_sha256"]


def test_missing_corpus_names_the_path_and_the_builder(tmp_path):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(SystemExit) as e:
        pretrain.main(["--out", str(tmp_path / "pt"), "--corpus", missing] + MODEL)
    assert missing in str(e.value) and "scripts/build_corpus.sh" in str(e.value)


@pytest.fixture(scope="module")
def pretrained(packed, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("pt"))
    args = ["--out", out, "--corpus", packed[0], "--eval-every", "2", "--export-dtype", "bf16",
            "--max-shard-bytes", str(SHARD_LIMIT), "--compile", "--time-budget-s", "300"] + MODEL
    assert pretrain.main(args + ["--steps", "4"]) == 0
    return out, args


def test_pretrain_exports_bf16_shards_with_a_complete_index(pretrained):
    out, _ = pretrained
    mdir = os.path.join(out, "model")
    index = json.load(open(os.path.join(mdir, "model.safetensors.index.json")))
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 2 and not os.path.exists(os.path.join(mdir, "model.safetensors"))
    assert shards == [f"model-{i:05d}-of-{len(shards):05d}.safetensors"
                      for i in range(1, len(shards) + 1)]
    total = 0
    for s in shards:
        path = os.path.join(mdir, s)
        assert os.path.getsize(path) <= SHARD_LIMIT
        _, header = st.read_header(path)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            assert info["dtype"] == "BF16" and index["weight_map"][name] == s
            total += info["data_offsets"][1] - info["data_offsets"][0]
    assert index["metadata"]["total_size"] == total
    cfg = json.load(open(os.path.join(mdir, "config.json")))
    assert cfg["torch_dtype"] == "bfloat16" and cfg["tie_word_embeddings"] is True
    model = load_model_dir(mdir)
    assert set(index["weight_map"]) == set(hf_state_dict(model))  # no lm_head: tied
    ck = torch.load(os.path.join(out, "checkpoint.pt"))
    emb = ck["model"]["embed_tokens.weight"].to(torch.bfloat16).float()
    assert torch.equal(model.embed_tokens.weight, emb)
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["steps_done"] == 4 and run["final"]["heldout_loss"] > 0
    assert run["corpus"]["manifest_sha256"] and run["stopped_by_budget"] is False


def test_pretrain_resumes_on_the_packed_corpus(pretrained, capsys):
    out, args = pretrained
    capsys.readouterr()
    assert pretrain.main(args + ["--steps", "6", "--resume"]) == 0
    text = capsys.readouterr().out
    assert "at step 4" in text and "step 5/6" in text and "budget" in text


def test_time_budget_stops_early_and_still_exports(packed, tmp_path):
    out = str(tmp_path / "budget")
    assert pretrain.main(["--out", out, "--corpus", packed[0], "--steps", "100000",
                          "--eval-every", "100000", "--time-budget-s", "4", "--reserve-s", "1",
                          "--auto-steps", "--calibrate-steps", "3"] + MODEL) == 0
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["planned_steps"] < 100000 and run["steps_done"] <= run["planned_steps"]
    assert run["wall_s"] < 10 and os.path.exists(os.path.join(out, "model", "model.safetensors"))
    assert run["final"]["step"] == run["steps_done"]


def test_distill_reads_prefixes_from_the_packed_corpus(pretrained, packed, tmp_path):
    base = os.path.join(pretrained[0], "model")
    out = str(tmp_path / "distill")
    args = ["--base", base, "--out", out, "--corpus", packed[0], "--n-examples", "16",
            "--n-eval", "8", "--prefix-min", "4", "--prefix-max", "24", "--gen-batch", "8",
            "--rank", "4", "--alpha", "8", "--batch", "4", "--eval-every", "2", "--log-every",
            "1", "--device", "cpu", "--dtype", "auto", "--time-budget-s", "300", "--steps", "3"]
    assert distill.main(args) == 0
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["data"]["manifest_sha256"] == packed[1]["manifest_sha256"]
    assert run["args"]["dtype"] == "f32" and run["steps_done"] == 3
    m = load_model_dir(base)
    cfg = load_adapter(m, os.path.join(out, "adapter"))
    assert cfg["r"] == 4 and cfg["peft_type"] == "LORA"

    other = str(tmp_path / "other_base")  # a base with another tokenizer must be refused
    shutil.copytree(base, other)
    train_bpe(["def f(x):\n    return x\n" * 50], 320).save(os.path.join(other, "tokenizer.json"))
    with pytest.raises(SystemExit, match="differs from the corpus tokenizer"):
        distill.main(["--base", other, "--out", str(tmp_path / "d2")] + args[4:])


def test_a_failing_compile_falls_back_to_eager(packed, tmp_path, monkeypatch, capsys):
    def broken_compile(fn, enabled):
        def compiled(*args):
            raise RuntimeError("no C compiler found\nlong trace")
        return compiled, "on"
    monkeypatch.setattr(pretrain.accel, "maybe_compile", broken_compile)
    out = str(tmp_path / "eager")
    assert pretrain.main(["--out", out, "--corpus", packed[0], "--steps", "2", "--compile",
                          "--eval-every", "2"] + MODEL) == 0
    text = capsys.readouterr().out
    assert "torch.compile failed (RuntimeError: no C compiler found); continuing eager" in text
    assert json.load(open(os.path.join(out, "run.json")))["steps_done"] == 2
