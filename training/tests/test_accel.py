"""GPU-path plumbing that CPU torch 1.13 can still check: the SDPA call (through a stand-in with
torch 2.x semantics), feature detection, the time budget and the shard planner."""
import json
import math
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import accel, model as model_mod, safetensors_shards  # noqa: E402
from training import safetensors_io as st  # noqa: E402
from training.budget import TimeBudget, fit_steps  # noqa: E402
from training.layout import predictive_logits  # noqa: E402
from training.tests.test_model import tiny  # noqa: E402


def reference_sdpa(calls):
    """torch.nn.functional.scaled_dot_product_attention's contract: a boolean attn_mask marks
    the keys a query may attend; is_causal masks keys after the query (top-left aligned)."""
    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        calls.append("causal" if is_causal else "mask")
        scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
        if is_causal:
            assert attn_mask is None
            keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
            scores = scores.masked_fill(~keep, float("-inf"))
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        return (torch.softmax(scores, -1) @ v.double()).to(q.dtype)
    return sdpa


def test_sdpa_path_matches_the_math_path(monkeypatch):
    m = tiny(seed=3)
    m.add_lora(4, 8, seed=1)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.2)
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(0))
    xs, rows = [[3, 14, 15, 9], [2, 7]], [[9, 26, 5], [7, 1, 49]]
    with torch.no_grad():
        plain = m(ids)[0]
        ctl, prd = predictive_logits(m, xs, rows)
    calls = []
    monkeypatch.setattr(model_mod.F, "scaled_dot_product_attention", reference_sdpa(calls),
                        raising=False)
    monkeypatch.setattr(model_mod, "_HAS_SDPA", True)
    with torch.no_grad():
        assert torch.allclose(m(ids)[0], plain, atol=1e-5)
        ctl2, prd2 = predictive_logits(m, xs, rows)
    assert torch.allclose(ctl2, ctl, atol=1e-5) and torch.allclose(prd2, prd, atol=1e-5)
    assert "causal" in calls and "mask" in calls


def test_feature_detection_keeps_the_cpu_path():
    cpu = torch.device("cpu")
    opt, kind = accel.adamw([torch.nn.Parameter(torch.zeros(2))], cpu, lr=1e-3)
    assert kind == "default" and isinstance(opt, torch.optim.AdamW)
    fn = lambda x: x + 1  # noqa: E731
    assert accel.maybe_compile(fn, False) == (fn, "off")
    compiled, what = accel.maybe_compile(fn, True)
    assert (what == "on") == accel.has_compile()
    assert compiled(torch.ones(1)).item() == 2.0
    with accel.autocast(cpu):
        assert torch.ones(2, 2).matmul(torch.ones(2, 2)).dtype == torch.float32
    d = accel.describe(cpu)
    assert d["autocast_bf16"] is False and d["sdpa"] == accel.has_sdpa()


def test_budget_arithmetic():
    b = TimeBudget(100, 10)
    assert b.enabled and b.allows(80) and not b.allows(95)
    b.set_need(30)
    assert not b.allows(80) and b.reserve == 30
    b.set_need(5)
    assert b.reserve == 10 and b.allows(80)
    assert not TimeBudget(0, 10).enabled and TimeBudget(0, 10).allows(1e9)
    # 100 s at 0.1 s/step with an eval (costing 5 steps) every 50 steps: 100 / 0.11 * 0.97
    assert fit_steps(10, 100.0, 0.1, 50, 5.0) == 10 + int(100 * 0.97 / 0.11)


def test_shards_respect_the_limit_and_refuse_oversized_tensors(tmp_path):
    ts = {f"w{i}": torch.full((100,), float(i), dtype=torch.bfloat16) for i in range(10)}
    limit = st.file_size({"w0": ts["w0"], "w1": ts["w1"], "w2": ts["w2"]})
    (tmp_path / "model.safetensors").write_bytes(b"stale")
    files = safetensors_shards.save_weights(ts, str(tmp_path), limit)
    assert not (tmp_path / "model.safetensors").exists()
    index = json.load(open(tmp_path / safetensors_shards.INDEX))
    assert set(index["weight_map"]) == set(ts) and index["metadata"]["total_size"] == 10 * 200
    shards = [f for f in files if f != safetensors_shards.INDEX]
    assert len(shards) == 4 and all(os.path.getsize(tmp_path / f) <= limit for f in shards)
    loaded = {}
    for f in shards:
        loaded.update(st.load_file(str(tmp_path / f)))
    assert all(torch.equal(loaded[k], v) for k, v in ts.items())
    assert safetensors_shards.save_weights(ts, str(tmp_path), 1 << 20) == ["model.safetensors"]
    assert not (tmp_path / safetensors_shards.INDEX).exists() and not any(
        (tmp_path / f).exists() for f in shards)
    with pytest.raises(ValueError, match="over the shard limit"):
        safetensors_shards.plan_shards(ts, 100)
