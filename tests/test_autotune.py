"""The autotuning choices kept beside a baseline (fuseci/measure/autotune.py) and put in the
compile cache by the harness (fuseci/harness/arrays/best_configs.py), without a GPU: the file read
as hostile input, the entries Inductor's autotuning caches used (a stand-in for PyTorch's
``AutotuneCache``), what is put in place and said, and update-baselines keeping a recorded
run's entries."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import invoke

from fuseci.errors import BaselineError
from fuseci.harness.arrays import best_configs as harness
from fuseci.measure import autotune as kept

KEY = f"ab/{'c' * 64}.best_config"
OTHER = f"cd/{'0' * 64}.best_config"
CHOICE = {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1, "configs_hash": "e" * 64, "found_by_coordesc": False}
TUNED = {**CHOICE, "XBLOCK": 256, "num_warps": 8}
DATA = Path(__file__).resolve().parent / "data"


def test_a_kept_record_round_trips_and_sits_beside_the_baseline(tmp_path: Path) -> None:
    path = kept.file_for(tmp_path, "NVIDIA H200", "models")
    assert path == tmp_path / "nvidia-h200" / "models.autotune.json"
    assert kept.load(path) is None
    kept.save({KEY: CHOICE, OTHER: TUNED}, path)
    assert kept.load(path) == {KEY: CHOICE, OTHER: TUNED}
    doc = json.loads(path.read_text())
    assert doc["format"] == "fuseci-autotune" and doc["format_version"] == 1


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        ([KEY], "entries: expected an object"),
        ({"../../etc/passwd.best_config": CHOICE}, "expected a path of Inductor's cache"),
        ({f"/tmp/{'c' * 64}.best_config": CHOICE}, "expected a path of Inductor's cache"),
        ({f"ab/../{'c' * 64}.best_config": CHOICE}, "expected a path of Inductor's cache"),
        ({f"ab/{'c' * 64}.py": CHOICE}, "expected a path of Inductor's cache"),
        ({f"ab/{'c' * 64}.best_config\n": CHOICE}, 'entries["ab/'),
        ({KEY: {}}, "fewer than the 1 required"),
        ({KEY: {"XBLOCK": [1024]}}, ".XBLOCK: expected a number, true/false, null or a short text, got a list of 1"),
        ({KEY: {"XBLOCK": {"a": 1}}}, ".XBLOCK: expected a number"),
        ({KEY: {"x-y": 1}}, "expected a configuration's field name"),
        ({KEY: {"XBLOCK\n": 1}}, "expected a configuration's field name"),
        ({KEY: {"configs_hash": "h" * 300}}, ".configs_hash: a string of 300 characters"),
        ({KEY: {f"f{i}": i for i in range(65)}}, "more than the 64 allowed"),
    ],
)
def test_a_kept_record_is_hostile_until_checked(tmp_path: Path, entries: Any, said: str) -> None:
    path = tmp_path / "h200" / "models.autotune.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"format": "fuseci-autotune", "format_version": 1, "entries": entries}))
    with pytest.raises(BaselineError) as err:
        kept.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: entries") and said in message and "\n" not in message
    assert "fuseci update-baselines" in message  # the fix
    if isinstance(entries, dict):  # nor is such a record ever written
        with pytest.raises(BaselineError):
            kept.save(entries, tmp_path / "out.autotune.json")
        assert not (tmp_path / "out.autotune.json").exists()


def test_another_file_or_a_newer_one_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "models.autotune.json"
    path.write_text(json.dumps({"format": "fuseci-baseline", "format_version": 1}))
    with pytest.raises(BaselineError, match="not a fuseci autotuning record"):
        kept.load(path)
    path.write_text(json.dumps({"format": "fuseci-autotune", "format_version": 9, "entries": {}}))
    with pytest.raises(BaselineError, match="newer fuseci"):
        kept.load(path)


#: A stand-in for Inductor's autotuning cache: ``create`` gives each kernel file a ``.best_config`` beside it.
AUTOTUNE_CACHE = f"""
from pathlib import Path


class AutotuneCache:
    def __init__(self, local):
        self.local_cache = (object(), local)

    @staticmethod
    def create(inductor_meta, filename, configs_hash):
        return AutotuneCache(str(Path(filename).parent / "{"c" * 64}.best_config"))
"""


@pytest.fixture
def inductor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Packages ``torch._inductor.runtime`` whose ``autotune_cache`` module is the stand-in above,
    not imported yet; ``TORCHINDUCTOR_CACHE_DIR`` as fuseci sets it for a harness process."""
    root = tmp_path / "inductor"
    root.mkdir()
    packages = tmp_path / "packages"
    (packages / "torch" / "_inductor" / "runtime").mkdir(parents=True)
    (packages / "torch" / "_inductor" / "runtime" / "autotune_cache.py").write_text(AUTOTUNE_CACHE)
    for name in ("torch", "torch._inductor", "torch._inductor.runtime"):
        package = types.ModuleType(name)
        package.__path__ = [str(packages.joinpath(*name.split(".")))]
        monkeypatch.setitem(sys.modules, name, package)
    before = sys.modules.pop(harness.MODULE, None)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root))
    monkeypatch.setattr(harness, "_SEEN", {})
    monkeypatch.setattr(harness, "_LISTENING", [])
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    yield root
    sys.modules.pop(harness.MODULE, None)  # the stand-in never outlives the test
    if before is not None:
        sys.modules[harness.MODULE] = before


def test_the_entries_the_process_s_kernels_were_given_are_noted(inductor: Path, tmp_path: Path) -> None:
    harness.listen()
    harness.listen()  # once per process
    assert harness.MODULE not in sys.modules  # nothing imported until Inductor imports it
    cache = importlib.import_module(harness.MODULE)
    (inductor / "ab").mkdir()
    cache.AutotuneCache.create({}, str(inductor / "ab" / "kernel.py"), "h")  # benchmarked: the winner written
    (inductor / "ab" / f"{'c' * 64}.best_config").write_text(json.dumps(CHOICE))
    cache.AutotuneCache.create({}, str(inductor / "cd" / "kernel.py"), "h")  # never written: nothing to keep
    cache.AutotuneCache.create({}, str(tmp_path / "elsewhere" / "kernel.py"), "h")  # not fuseci's cache
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / f"{'c' * 64}.best_config").write_text(json.dumps(CHOICE))
    assert harness.cache_dir() == inductor.resolve()
    assert harness.used() == {KEY: CHOICE}
    (inductor / "ab" / f"{'c' * 64}.best_config").write_text("{not json")
    assert harness.used() == {}  # a file Inductor did not write whole is no choice


def test_a_cache_imported_before_listening_is_listened_to_at_once(inductor: Path) -> None:
    cache = importlib.import_module(harness.MODULE)
    harness.listen()
    (inductor / "ab").mkdir()
    (inductor / KEY).write_text(json.dumps(CHOICE))
    cache.AutotuneCache.create({}, str(inductor / "ab" / "kernel.py"), "h")
    assert harness.used() == {KEY: CHOICE}


def test_a_pytorch_without_the_autotuning_cache_is_measured_as_before(
    inductor: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (Path(sys.modules["torch._inductor.runtime"].__path__[0]) / "autotune_cache.py").write_text("OTHER = 1\n")
    harness.listen()
    assert importlib.import_module(harness.MODULE).OTHER == 1 and harness.used() == {}
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    assert harness.cache_dir() is None and harness.install({KEY: CHOICE}) == (0, 0)


def test_the_baseline_s_choices_are_put_in_place_and_what_they_replaced_is_counted(inductor: Path) -> None:
    assert harness.install({KEY: CHOICE, OTHER: TUNED}) == (2, 0)
    assert json.loads((inductor / KEY).read_text()) == CHOICE
    stamp = (inductor / KEY).stat().st_mtime_ns
    assert harness.install({KEY: CHOICE, OTHER: TUNED}) == (2, 0)  # already in place: counted, untouched
    assert (inductor / KEY).stat().st_mtime_ns == stamp
    (inductor / KEY).write_text(json.dumps(TUNED))  # this cache chose otherwise
    assert harness.install({KEY: CHOICE}) == (1, 1)
    assert json.loads((inductor / KEY).read_text()) == CHOICE
    assert harness.install({"../escape.best_config": CHOICE}) == (0, 0)  # never a path out of the cache
    assert not (inductor.parent / "escape.best_config").exists()


def test_the_harness_says_what_it_put_in_place_for_its_card(
    inductor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fuseci.harness.case_runner import _pinned
    from fuseci.records.harness import HarnessRecord

    record = HarnessRecord(suite="models", env={"gpu_name": "NVIDIA H200"}, cases={})
    suite = types.SimpleNamespace(name="models")
    monkeypatch.delenv(kept.ROOT_ENV, raising=False)
    assert _pinned(suite, record) == ""  # type: ignore[arg-type]
    root = tmp_path / "baselines"
    monkeypatch.setenv(kept.ROOT_ENV, str(root))
    assert _pinned(suite, record) == ""  # type: ignore[arg-type]  # no record kept for this card
    kept.save({KEY: CHOICE, OTHER: TUNED}, kept.file_for(root, "NVIDIA H200", "models"))
    (inductor / "ab").mkdir()
    (inductor / KEY).write_text(json.dumps(TUNED))
    said = _pinned(suite, record)  # type: ignore[arg-type]
    assert said.startswith("2 autotuning choice(s) kept with the baseline in place in the compile cache")
    assert "1 of them in place of another choice this compile cache held" in said
    # the run's other harness, sharing the cache, finds them in place: it says so, without the replacement
    again = _pinned(suite, record)  # type: ignore[arg-type]
    assert again.startswith("2 autotuning choice(s) kept with the baseline in place") and kept.REPLACED not in again
    assert kept.pinned_note(again, said) == said and kept.pinned_note(said, again) == said
    assert kept.pinned_note("", again) == again and kept.pinned_note(again, "") == again
    kept.file_for(root, "NVIDIA H200", "models").write_text('{"format": "fuseci-autotune", "format_version": 1}')
    with pytest.raises(BaselineError, match="models.autotune.json: missing required key 'entries'"):
        _pinned(suite, record)  # type: ignore[arg-type]


def _report_with_entries(tmp_path: Path, **extra: Any) -> Path:
    report = tmp_path / "pytorch.ncu-rep.xz"
    shutil.copy(DATA / "reports" / "pytorch.ncu-rep.xz", report)
    record = json.loads((DATA / "reports" / "pytorch.harness.json").read_text())
    record.update(extra)
    (tmp_path / "pytorch.harness.json").write_text(json.dumps(record))
    return report


def test_update_baselines_keeps_the_choices_beside_the_baseline_and_run_says_what_was_pinned(
    in_root: Path, tmp_path: Path
) -> None:
    report = _report_with_entries(tmp_path, autotune={KEY: CHOICE}, pinned="2 autotuning choice(s) kept ...")
    b = tmp_path / "b"
    first = invoke("update-baselines", "suites/pytorch.yaml", "--from-report", str(report), "--baselines", str(b))
    assert first.exit_code == 0, first.output
    (path,) = b.glob("*/pytorch.autotune.json")
    assert path.parent == next(b.glob("*/pytorch.json")).parent and kept.load(path) == {KEY: CHOICE}
    stamp = path.stat().st_mtime_ns
    assert (
        invoke("update-baselines", "suites/pytorch.yaml", "--from-report", str(report), "--baselines", str(b)).exit_code
        == 0
    )
    assert path.stat().st_mtime_ns == stamp  # the same choices: not written again
    run = invoke("run", "suites/pytorch.yaml", "--from-report", str(report), "--baselines", str(b))
    assert run.exit_code == 0, run.output
    assert "2 autotuning choice(s) kept ..." in run.stdout


def test_a_record_without_inductor_s_choices_writes_none(in_root: Path, tmp_path: Path) -> None:
    report = _report_with_entries(tmp_path)
    b = tmp_path / "b"
    assert (
        invoke("update-baselines", "suites/pytorch.yaml", "--from-report", str(report), "--baselines", str(b)).exit_code
        == 0
    )
    assert not list(b.glob("*/*.autotune.json"))


def test_a_bad_kept_record_is_one_line_before_anything_is_measured(tmp_path: Path) -> None:
    """``fuseci run`` and ``update-baselines`` read every card's record of the suite before they
    start the harness (which puts its own card's in place); a re-analysed report reads none."""
    from fuseci.api.running import RunOptions, check_autotune_records

    suite = types.SimpleNamespace(name="pytorch")
    b = tmp_path / "b"
    (b / "nvidia-h100-80gb-hbm3").mkdir(parents=True)
    kept.save({KEY: CHOICE}, b / "nvidia-h100-80gb-hbm3" / "pytorch.autotune.json")
    check_autotune_records(suite, RunOptions(baselines=b))  # type: ignore[arg-type]
    bad = b / "nvidia-h200" / "pytorch.autotune.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"format": "fuseci-autotune", "format_version": 1, "entries": {"x": CHOICE}}))
    with pytest.raises(BaselineError) as err:
        check_autotune_records(suite, RunOptions(baselines=b))  # type: ignore[arg-type]
    assert str(err.value).startswith(f"{bad}: entries.x: not a valid key: expected a path of Inductor's cache")
    check_autotune_records(suite, RunOptions(baselines=b, from_report=tmp_path / "r.ncu-rep"))  # type: ignore[arg-type]


def test_a_record_s_bad_entry_is_one_line_naming_the_record_and_nothing_is_written(
    in_root: Path, tmp_path: Path
) -> None:
    report = _report_with_entries(tmp_path, autotune={"ab/../../x.best_config": CHOICE})
    b = tmp_path / "b"
    result = invoke("update-baselines", "suites/pytorch.yaml", "--from-report", str(report), "--baselines", str(b))
    assert result.exit_code == 3, result.output
    said = result.stderr.strip().splitlines()
    assert (
        len(said) == 1
        and f'{tmp_path / "pytorch.harness.json"}: autotune["ab/../../x.best_config"]: not a valid key' in said[0]
    )
    assert not list(b.glob("*/*"))
    run = invoke("run", "suites/pytorch.yaml", "--from-report", str(report), "--baselines", str(b))
    assert (
        run.exit_code == 3 and 'autotune["ab/../../x.best_config"]: not a valid key' in run.stderr
    )  # read where the record is


@pytest.mark.parametrize("with_baseline", [False, True], ids=["first", "existing"])
def test_a_bad_kept_record_beside_a_re_analysed_report_writes_nothing(
    in_root: Path, tmp_path: Path, with_baseline: bool
) -> None:
    """Every file beside the baseline is read before anything is written: a bad
    ``<suite>.autotune.json`` is one line, exit 3, and the baseline and ledgers stay as they were."""
    report = _report_with_entries(tmp_path, autotune={KEY: CHOICE})
    b = tmp_path / "b"
    args = ("update-baselines", "suites/pytorch.yaml", "--from-report", str(report), "--baselines", str(b))
    if with_baseline:
        assert invoke(*args).exit_code == 0
        (bad,) = b.glob("*/pytorch.autotune.json")
    else:
        invoke(*args)
        (bad,) = b.glob("*/pytorch.autotune.json")
        for f in bad.parent.iterdir():
            if f != bad:
                f.unlink()
    bad.write_text(json.dumps({"format": "fuseci-autotune", "format_version": 1, "entries": {"x": CHOICE}}))
    before = {p: p.read_bytes() for p in b.rglob("*") if p.is_file()}
    result = invoke(*args, "--force")
    assert result.exit_code == 3, result.output
    assert str(bad) in result.output and "cannot write baseline" not in result.output, result.output
    assert {p: p.read_bytes() for p in b.rglob("*") if p.is_file()} == before


def test_a_linked_ledgers_or_autotuning_file_is_refused_as_a_baseline_is(tmp_path: Path) -> None:
    from fuseci.api.baseline_updates import _refuse_links
    from fuseci.ledger import store as ledger_store

    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    link = tmp_path / "models.ledgers.json"
    link.symlink_to(target)
    with pytest.raises(BaselineError, match="models.ledgers.json: is a symbolic link"):
        _refuse_links(tmp_path / "models.json", link)
    with pytest.raises(OSError):
        ledger_store.save_suite({}, link)  # a link made after the check: never written through
    assert link.is_symlink() and target.read_text() == "{}"
