import json
import struct

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: apt-get install python3-torch")

from training import safetensors_io as st  # noqa: E402


def test_roundtrip_all_dtypes(tmp_path):
    g = torch.Generator().manual_seed(0)
    t = {"a.f32": torch.randn(3, 5, generator=g),
         "b.bf16": torch.randn(4, 2, generator=g).to(torch.bfloat16),
         "c.f16": torch.randn(7, generator=g).to(torch.float16),
         "d.i64": torch.arange(6).view(2, 3),
         "e.scalar": torch.tensor(2.5)}
    p = tmp_path / "x.safetensors"
    st.save_file(t, str(p))
    back = st.load_file(str(p))
    assert set(back) == set(t)
    for k in t:
        assert back[k].dtype == t[k].dtype and back[k].shape == t[k].shape
        assert torch.equal(back[k], t[k])


def test_header_layout(tmp_path):
    p = tmp_path / "y.safetensors"
    st.save_file({"w": torch.tensor([1.0, -2.0], dtype=torch.float32)}, str(p))
    raw = p.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    assert (8 + n) % 8 == 0
    hdr = json.loads(raw[8:8 + n])
    assert hdr["w"] == {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    assert raw[8 + n:] == struct.pack("<ff", 1.0, -2.0)
