import json

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training.tokenizer import ByteBPETokenizer, pretokenize, train_bpe, BYTE_ENC  # noqa: E402

TEXT = ("import os\n\ndef main(argv):\n    for name in os.listdir('.'):\n        print(name)\n"
        "    return 0  # it's done, we'll see\n") * 20


def test_pretokenizer_matches_gpt2_on_ascii():
    assert pretokenize("Hello world's  123!!") == ["Hello", " world", "'s", " ", " 123", "!!"]
    assert pretokenize("a_b\tc\n\n  x") == ["a", "_", "b", "\t", "c", "\n\n ", " x"]
    assert pretokenize("x\x1c y") == ["x", "\x1c", " y"]


def test_byte_map_is_gpt2():
    assert BYTE_ENC[ord("A")] == "A" and BYTE_ENC[ord(" ")] == "Ġ" and BYTE_ENC[ord("\n")] == "Ċ"
    assert len(set(BYTE_ENC.values())) == 256


def test_train_encode_decode_roundtrip_and_json(tmp_path):
    tok = train_bpe([TEXT], 300)
    assert tok.vocab_size == 300
    assert [tok.token_id(s) for s in ("<|bos|>", "<|eos|>", "<|draft|>")] == [297, 298, 299]
    samples = [TEXT, "naïve café ² — 日本語 🙂", "<|bos|>x = 1<|eos|>", "  \t\n"]
    for s in samples:
        ids = tok.encode(s)
        assert tok.decode(ids) == s
    assert tok.encode("<|bos|>a")[0] == 297
    assert len(tok.encode(TEXT)) < len(TEXT.encode()) / 1.5  # merges were learned
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    d = json.load(open(path))
    assert d["model"]["type"] == "BPE" and d["pre_tokenizer"]["type"] == "ByteLevel"
    assert d["decoder"]["type"] == "ByteLevel"
    assert all(isinstance(m, str) and m.count(" ") == 1 for m in d["model"]["merges"])
    assert {t["content"] for t in d["added_tokens"]} == {"<|bos|>", "<|eos|>", "<|draft|>"}
    back = ByteBPETokenizer.load(str(path))
    for s in samples:
        assert back.encode(s) == tok.encode(s)
        assert back.decode(back.encode(s)) == s
