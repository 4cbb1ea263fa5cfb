"""``update-baselines`` loses nothing a user had: failed writes, links, read-only directories."""

import errno
import io
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, H200_BASELINES, REGRESSED_REPORT
from helpers import snapshot as _snapshot

from fuseci import api
from fuseci.api import running
from fuseci.errors import BaselineError
from fuseci.judge.baseline import FORMAT
from fuseci.judge.verdict import Verdict
from fuseci.store import baselines as bl


def _opts(path: Path, report: Path = REGRESSED_REPORT) -> api.RunOptions:
    return api.RunOptions(baselines=path.parent.parent, from_report=report)


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FillsTheDisk(io.FileIO):
    """A temporary file on a disk that fills up half-way through the write."""

    def write(self, data) -> int:
        super().write(bytes(data[: len(data) // 2]))
        _no_space()
        return 0


def _full_disk_at(step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if step == "write":
        real_fdopen = os.fdopen

        def fdopen(fd: int, mode: str = "r", *args, **kwargs):
            return _FillsTheDisk(fd, "wb") if mode == "wb" else real_fdopen(fd, mode, *args, **kwargs)

        monkeypatch.setattr(os, "fdopen", fdopen)
    else:
        monkeypatch.setattr(os, step, _no_space)


@pytest.mark.parametrize("step", ["write", "fsync", "replace"])
def test_full_disk_keeps_the_old_file_and_leaves_no_temporary(
    committed_copy: Path, elementwise, relaxed, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    root = committed_copy.parent.parent
    before = _snapshot(root)
    with monkeypatch.context() as m:
        _full_disk_at(step, m)
        with pytest.raises(BaselineError) as info:
            api.update_baselines(relaxed, _opts(committed_copy))
    assert str(info.value).startswith(f"{committed_copy}: cannot write baseline: [Errno 28] No space left on device")
    assert "free some space" in str(info.value) and "the old file is unchanged" in str(info.value)
    assert _snapshot(root) == before  # byte for byte, no temporary and no lock file
    assert api.update_baselines(relaxed, _opts(committed_copy)).written  # once there is space again


def test_a_baseline_too_big_to_read_back_is_not_written(
    committed_copy: Path, relaxed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One more byte than fuseci reads: the next run and update would refuse the file."""
    root = committed_copy.parent.parent
    # the clean report's baseline (one pass, no spreads): the split adds a kernel, so the update is larger
    assert api.update_baselines(relaxed, _opts(committed_copy, CLEAN_REPORT), force=True).written
    before = _snapshot(root)
    limit = committed_copy.stat().st_size + 10  # the old one is read; the update is larger
    monkeypatch.setattr(bl, "FORMAT", replace(FORMAT, max_bytes=limit))
    with pytest.raises(BaselineError) as info:
        api.update_baselines(relaxed, _opts(committed_copy))
    assert str(info.value).startswith(f"{committed_copy}: cannot write baseline: a baseline of ")
    assert f"more than the {limit:,} bytes fuseci reads back" in str(info.value)
    assert _snapshot(root) == before


def test_failure_before_the_write_keeps_the_old_file(committed_copy: Path, elementwise, relaxed) -> None:
    committed_copy.write_text(committed_copy.read_text().replace('"format_version": 2', '"format_version": 2,,'))
    before = committed_copy.read_bytes()
    with pytest.raises(BaselineError, match="not JSON"):
        api.update_baselines(relaxed, _opts(committed_copy))
    assert committed_copy.read_bytes() == before
    assert [p.name for p in committed_copy.parent.glob(".*")] == []


def test_run_takes_no_lock(committed_copy: Path, elementwise, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bl, "exclusive_lock", _denied)
    assert api.check(elementwise, _opts(committed_copy, CLEAN_REPORT)).verdict is Verdict.PASS
    assert not list(committed_copy.parent.glob(".*"))


def test_the_lock_is_the_cards_directory(tmp_path: Path) -> None:
    assert bl.lock_path(tmp_path / "nvidia-h200" / "elementwise.json") == tmp_path / "nvidia-h200"


# --- symbolic links: read through, never written through ---------------------------------


@pytest.fixture
def linked(committed_copy: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The baseline file as a link to a file elsewhere (a shared store, another card's file)."""
    target = tmp_path / "elsewhere" / "elementwise.json"
    target.parent.mkdir()
    committed_copy.rename(target)
    committed_copy.symlink_to(target)
    return committed_copy, target


def test_linked_baseline_is_read_through_the_link(linked: tuple[Path, Path], elementwise) -> None:
    link, target = linked
    sources = running.case_sources(elementwise)  # as recorded now: nothing for the update to add
    assert sources is not None
    bl.save_baseline(replace(bl.load_baseline(target), sources=sources), target)
    before = target.read_bytes()
    assert api.check(elementwise, _opts(link, CLEAN_REPORT)).verdict is Verdict.PASS
    update = api.update_baselines(elementwise, _opts(link, CLEAN_REPORT))
    assert not update.written  # nothing to change: nothing refused either
    assert link.is_symlink() and target.read_bytes() == before


def test_linked_baseline_is_not_written_through(linked: tuple[Path, Path], elementwise, relaxed) -> None:
    link, target = linked
    before = target.read_bytes()
    with pytest.raises(BaselineError) as info:
        api.update_baselines(relaxed, _opts(link))
    message = str(info.value)
    assert message.startswith(f"{link}: is a symbolic link (to {target}); update-baselines replaces baseline files")
    assert f'with GNU cp: cp --remove-destination "$(readlink -f {link})" {link}) and run again' in message
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["elementwise.json"]
    assert sorted(p.name for p in link.parent.glob(".*")) == []


def test_dangling_link_is_not_replaced(committed_copy: Path, tmp_path: Path, elementwise, relaxed) -> None:
    committed_copy.unlink()
    committed_copy.symlink_to(tmp_path / "gone.json")
    with pytest.raises(BaselineError, match="is a symbolic link"):
        api.update_baselines(relaxed, _opts(committed_copy))
    assert committed_copy.is_symlink() and not (tmp_path / "gone.json").exists()


def test_a_linked_card_directory_is_read_through_but_never_written_through(
    committed_copy: Path, tmp_path: Path, elementwise, relaxed
) -> None:
    """``nvidia-h200 -> nvidia-h100-80gb-hbm3``: an H200 update would replace the H100's
    baseline. It is refused, in one line, exit 3, before anything is read or written."""
    root = committed_copy.parent.parent
    h200 = committed_copy.parent
    shutil.rmtree(h200)
    h200.symlink_to("nvidia-h100-80gb-hbm3", target_is_directory=True)
    before = _snapshot(root)
    assert api.check(elementwise, _opts(committed_copy, CLEAN_REPORT)).baseline_path == str(committed_copy)  # read
    with pytest.raises(BaselineError) as info:
        api.update_baselines(relaxed, _opts(committed_copy), force=True)
    assert info.value.exit_code == 3
    assert str(info.value) == (
        f"{h200}: is a symbolic link (to nvidia-h100-80gb-hbm3); update-baselines writes a card's baselines only "
        "into its own directory, never through a link, which could replace another card's baseline: replace the "
        f"link with a copy of its target (rm {h200} && cp -r {root / 'nvidia-h100-80gb-hbm3'} {h200}) and run again"
    )
    assert _snapshot(root) == before and h200.is_symlink()
    assert sorted(p.name for p in root.rglob(".*")) == []


def test_update_baselines_refuses_a_linked_card_directory_in_one_line(tmp_path: Path, monkeypatch) -> None:
    from helpers import ROOT
    from typer.testing import CliRunner

    from fuseci.cli import app

    shutil.copytree(ROOT / "suites", tmp_path / "suites")
    shutil.copytree(H200_BASELINES, tmp_path / "baselines")
    shutil.rmtree(tmp_path / "baselines" / "nvidia-h200")
    (tmp_path / "baselines" / "nvidia-h200").symlink_to("nvidia-h100-80gb-hbm3", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    before = _snapshot(tmp_path / "baselines")
    args = ["update-baselines", "suites/elementwise.yaml", "--from-report", str(REGRESSED_REPORT), "--force"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("fuseci: error: baselines/nvidia-h200: is a symbolic link (to nvidia-h100-80gb-hbm3);")
    assert _snapshot(tmp_path / "baselines") == before


def test_a_card_directory_swapped_for_a_link_while_writing_is_not_written_through(
    committed_copy: Path, tmp_path: Path, elementwise, relaxed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write goes through the directory it opened (without following a link), not through
    the path again: a link put in the directory's place half-way through the write changes
    nothing of the card it points to."""
    root = committed_copy.parent.parent
    other = root / "nvidia-h100-80gb-hbm3" / "elementwise.json"
    before = other.read_bytes()
    moved = tmp_path / "moved"
    real_fsync = os.fsync

    def swap_then_fsync(fd: int) -> None:
        if not moved.exists():
            committed_copy.parent.rename(moved)
            committed_copy.parent.symlink_to("nvidia-h100-80gb-hbm3", target_is_directory=True)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", swap_then_fsync)
    api.update_baselines(relaxed, _opts(committed_copy), force=True)
    assert other.read_bytes() == before  # the H100's baseline is untouched
    assert bl.load_baseline(moved / "elementwise.json").cases["scale_relu_add"]["fused"].values["launches"] == 2
    assert not [p.name for p in moved.iterdir() if p.name.startswith(".")]  # no temporary file left


# --- read-only baseline directory ---------------------------------------------------------


def _denied(*args, **kwargs):
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


def test_unwritable_directory_for_the_temporary_file(
    committed_copy: Path, elementwise, relaxed, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = committed_copy.read_bytes()
    monkeypatch.setattr("fuseci.files.atomic._temporary", _denied)
    with pytest.raises(BaselineError) as info:
        api.update_baselines(relaxed, _opts(committed_copy))
    assert str(info.value) == (
        f"{committed_copy}: cannot write baseline: the directory {committed_copy.parent} is not writable "
        "([Errno 13] Permission denied); update-baselines writes a temporary file there: "
        "make it writable, or pass --baselines with a writable copy of the tree; the old file is unchanged"
    )
    assert committed_copy.read_bytes() == before


def _no_directory_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """flock as NFS has it: a directory cannot be locked (EBADF), a file can."""
    import fcntl
    import stat

    real_flock = fcntl.flock

    def flock(fd: int, op: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)


def test_where_a_directory_cannot_be_locked_a_lock_file_stands_in_and_goes(
    committed_copy: Path, elementwise, relaxed, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_directory_locks(monkeypatch)
    root = committed_copy.parent.parent
    seen: list[bool] = []
    real_save = bl.save_baseline

    def save(baseline, path):  # the lock file is there while the update holds it
        seen.append((committed_copy.parent / ".fuseci.lock").read_text().startswith(f"pid {os.getpid()} on "))
        real_save(baseline, path)

    monkeypatch.setattr(bl, "save_baseline", save)
    assert api.update_baselines(relaxed, _opts(committed_copy)).written and seen == [True]
    assert not (committed_copy.parent / ".fuseci.lock").exists()
    assert not [p for p in root.rglob(".*")]


def test_read_only_file_system_for_the_fallback_lock(
    committed_copy: Path, elementwise, relaxed, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_directory_locks(monkeypatch)
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(BaselineError) as info:
        api.update_baselines(relaxed, _opts(committed_copy))
    message = str(info.value)
    assert message.startswith(f"{committed_copy}: cannot lock {committed_copy.parent} for update: the directory")
    assert "Read-only file system" in message and "pass --baselines with a writable copy" in message


def _permissions_bind(tmp_path: Path) -> bool:
    """False where a read-only directory can be written anyway (root, or no POSIX permissions)."""
    probe = tmp_path / "probe"
    probe.mkdir()
    probe.chmod(0o555)
    try:
        (probe / "f").touch()
    except PermissionError:
        return True
    finally:
        probe.chmod(0o755)
    return False


@pytest.mark.parametrize("lock_exists", [False, True])
def test_read_only_directory(committed_copy: Path, tmp_path: Path, elementwise, relaxed, lock_exists: bool) -> None:
    if not _permissions_bind(tmp_path):
        pytest.skip("a read-only directory is writable here (running as root?)")
    if lock_exists:  # an earlier update left its lock file; only the temporary file fails then
        bl.lock_path(committed_copy).touch()
    root = committed_copy.parent.parent
    before = _snapshot(root)
    committed_copy.parent.chmod(0o555)
    try:
        with pytest.raises(BaselineError, match=f"the directory {committed_copy.parent} is not writable"):
            api.update_baselines(relaxed, _opts(committed_copy))
        assert api.check(elementwise, _opts(committed_copy, CLEAN_REPORT)).verdict is Verdict.PASS
    finally:
        committed_copy.parent.chmod(0o755)
    assert _snapshot(root) == before
