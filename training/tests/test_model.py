import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training.model import LlamaConfig, LlamaForCausalLM, concat_kv  # noqa: E402
from training.hf_io import save_model_dir, load_model_dir, save_adapter, load_adapter  # noqa
from training.tests.reference import naive_forward  # noqa: E402


def tiny(tied=False, seed=0, **kw):
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=tied, **kw)
    m = LlamaForCausalLM(cfg)
    m.init_weights(seed, std=0.1)
    return m.eval()


@pytest.mark.parametrize("tied", [False, True])
def test_forward_matches_step_by_step_kv_decoding(tied):
    m = tiny(tied)
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full, _ = m(ids)
        logits, kv = m(ids[:, :3], return_kv=True)
        steps = [logits]
        for t in range(3, 9):
            lg, new = m(ids[:, t:t + 1], past_kv=kv, return_kv=True)
            kv = concat_kv(kv, new)
            steps.append(lg)
    assert torch.allclose(full, torch.cat(steps, 1), atol=1e-5)


def test_forward_matches_naive_reference():
    m = tiny()
    toks = [3, 17, 42, 5, 9]
    with torch.no_grad():
        got, _ = m(torch.tensor([toks]))
    ref = naive_forward(m, toks, list(range(5)), [False] * 5, [list(range(i + 1)) for i in range(5)])
    assert torch.allclose(got[0].double(), ref, atol=1e-5)


def test_hf_export_import_roundtrip(tmp_path):
    m = tiny(bos_token_id=1, eos_token_id=2)
    save_model_dir(m, str(tmp_path))
    m2 = load_model_dir(str(tmp_path))
    ids = torch.tensor([[1, 4, 8, 15, 16, 23]])
    with torch.no_grad():
        assert torch.equal(m(ids)[0], m2(ids)[0])
    import json
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["model_type"] == "llama" and cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["num_key_value_heads"] == 2 and cfg["tie_word_embeddings"] is False


def test_lora_with_zero_B_equals_base():
    m = tiny()
    m.add_lora(8, 16)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        assert torch.equal(m(ids, use_lora=False)[0], m(ids, use_lora=True)[0])


def test_merged_weights_equal_lora_forward(tmp_path):
    m = tiny()
    m.add_lora(4, 8)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    merged = tiny()
    with torch.no_grad():
        for (_, _, _, src), (_, _, _, dst) in zip(m.lora_modules(), merged.lora_modules()):
            dst.weight.copy_(src.merged_weight())
    ids = torch.tensor([[7, 1, 33, 2, 49, 0]])
    with torch.no_grad():
        a = m(ids, use_lora=True)[0]
        b = merged(ids)[0]
    assert (a - b).abs().max().item() < 1e-5
    assert (a - m(ids)[0]).abs().max().item() > 1e-3  # the adapter does something
    # PEFT export/import keeps the same function
    save_adapter(m, str(tmp_path), 4, 8, "base", placeholder_token_id=49, window=16)
    m2 = tiny()
    cfg = load_adapter(m2, str(tmp_path))
    assert cfg["r"] == 4 and cfg["lora_alpha"] == 8 and cfg["peft_type"] == "LORA"
    with torch.no_grad():
        assert torch.equal(m2(ids, use_lora=True)[0], a)


def test_save_adapter_refuses_metadata_the_engine_refuses(tmp_path):
    """save_adapter applies the engine loader's rules (engine/model/lora_adapter.cc)."""
    m = tiny(bos_token_id=1, eos_token_id=2)
    m.add_lora(4, 8.0, seed=1)
    ok = dict(r=4, alpha=8, base_model_name_or_path="base", placeholder_token_id=49, window=16)
    save_adapter(m, str(tmp_path / "ok"), **ok)
    bad = [
        (dict(placeholder_token_id=1), "BOS"),
        (dict(placeholder_token_id=2), "end-of-sequence"),
        (dict(placeholder_token_id=50), "placeholder_token_id"),
        (dict(window=0), "window"),
        (dict(window=65), "window"),
        (dict(alpha=0), "lora_alpha"),
        (dict(alpha=-8.0), "lora_alpha"),
        (dict(r=0), "r must be"),
    ]
    for change, message in bad:
        with pytest.raises(ValueError, match=message):
            save_adapter(m, str(tmp_path / "bad"), **{**ok, **change})
    with pytest.raises(ValueError, match="layout"):
        save_adapter(m, str(tmp_path / "bad"), **ok, extra_crossreg={"layout": "v0"})
    assert not (tmp_path / "bad").exists()
