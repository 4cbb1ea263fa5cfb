import json
from pathlib import Path

import pytest
from helpers import H200_BASELINES

from fuseci.config import names
from fuseci.errors import BaselineError
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge.baseline import FORMAT, Baseline, VariantBaseline, normalized
from fuseci.store import baselines as bl

COMMITTED = H200_BASELINES / "nvidia-h200" / "elementwise.json"


@pytest.mark.parametrize(
    ("name", "slug"),
    [("NVIDIA H200", "nvidia-h200"), ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"), ("  ", "unknown-gpu")],
)
def test_gpu_slug(name: str, slug: str) -> None:
    assert names.gpu_slug(name) == slug


def test_committed_baseline_loads_and_is_written_deterministically() -> None:
    b = bl.load_baseline(COMMITTED)
    assert b is not None
    assert b.suite == "elementwise"
    assert b.env["gpu_name"] == "NVIDIA H200"
    assert b.cases["scale_relu_add"]["fused"].kernels[0].name == "fuseci_scale_relu_add"
    assert bl.dumps(b) == COMMITTED.read_text()


def _sample() -> Baseline:
    vb = VariantBaseline(
        values={"launches": 3.0, "dram__bytes.sum": 1234567.891}, kernels=(KernelLaunch("k", 1, 2, 3),)
    )
    return Baseline(suite="s", env={"gpu_name": "G"}, cases={"c": {"unfused": vb}})


def test_round_trip_and_rounding(tmp_path: Path) -> None:
    path = tmp_path / "g" / "s.json"
    bl.save_baseline(_sample(), path)
    text = path.read_text()
    assert text.endswith("}\n")
    data = json.loads(text)
    assert data["format_version"] == FORMAT.version
    assert data["cases"]["c"]["unfused"]["values"] == {"dram__bytes.sum": 1234570.0, "launches": 3}
    assert bl.load_baseline(path) == normalized(_sample())
    assert list(tmp_path.glob("g/.*")) == []  # no temporary file left behind


def test_missing_is_none(tmp_path: Path) -> None:
    assert bl.load_baseline(tmp_path / "none.json") is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"format_version": 1, "cases": ', "not JSON"),
        ("[]", "not a fuseci baseline"),
        ('{"format_version": 1}', "missing required key 'suite'"),
        ('{"format_version": "one"}', "invalid baseline format_version"),
    ],
)
def test_corrupt_baseline_is_an_error_with_a_fix(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        bl.load_baseline(path)
    assert fragment in str(info.value) and str(path) in str(info.value)
    assert "update-baselines" in str(info.value) or "git checkout" in str(info.value)


def test_newer_format_asks_for_an_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format_version": FORMAT.version + 1, "fuseci_version": "9.0"}))
    with pytest.raises(BaselineError, match="newer fuseci .*upgrade fuseci"):
        bl.load_baseline(path)


def test_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.json"
    path.write_text("old\n")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(BaselineError, match="No space left"):
        bl.save_baseline(_sample(), path)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
