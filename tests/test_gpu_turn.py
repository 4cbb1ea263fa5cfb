"""The GPU's turn (fuseci.measure.turn.gpu_turn): a lock file in the temporary directory that every
fuseci process on the machine takes before it measures, so measurements never overlap on a GPU.
CPU-only: the lock is the same whatever runs inside it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT

from fuseci.errors import HarnessError
from fuseci.measure.turn import gpu_turn, lock_path

HOLDER = r"""
import sys
from pathlib import Path
from fuseci.measure.turn import gpu_turn

with gpu_turn(Path(sys.argv[1]), 30):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _holder(lock: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_the_lock_file_need_not_exist_and_is_gone_after(tmp_path: Path) -> None:
    lock = tmp_path / "fuseci-gpu-0.lock"
    with gpu_turn(lock, 5):
        assert lock.exists()
    assert not lock.exists()


def test_a_second_process_waits_for_its_turn(tmp_path: Path) -> None:
    lock = tmp_path / "fuseci-gpu-0.lock"
    holder = _holder(lock)
    try:
        started = time.monotonic()
        with pytest.raises(HarnessError, match=r"the GPU stayed busy for 0\.3 s \(held by pid "), gpu_turn(lock, 0.3):
            pass
        assert time.monotonic() - started >= 0.3
    finally:
        holder.communicate("\n", timeout=30)
    with gpu_turn(lock, 5):  # free once the holder is done
        pass


def test_an_unusable_lock_is_a_harness_error(tmp_path: Path) -> None:
    with (
        pytest.raises(HarnessError, match="cannot take the GPU's lock .*: set TMPDIR"),
        gpu_turn(tmp_path / "no-such-dir" / "fuseci-gpu-0.lock", 1),
    ):
        pass
    assert not (tmp_path / "no-such-dir").exists()  # refused, not created


def test_a_lock_file_is_never_taken_through_a_link(tmp_path: Path) -> None:
    """Another user's link in the shared temporary directory must not make fuseci create or lock
    the file it points to."""
    from fuseci.files.locks import is_held

    lock, target = tmp_path / "fuseci-gpu-0.lock", tmp_path / "elsewhere"
    lock.symlink_to(target)
    with pytest.raises(HarnessError, match="cannot take the GPU's lock .*: set TMPDIR"), gpu_turn(lock, 1):
        pass
    assert not target.exists() and lock.is_symlink()
    assert not is_held(lock)


def test_a_file_system_without_flock_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No marker file stands in for a lock the kernel cannot hold: a killed holder's marker would
    block every later run."""
    import errno
    import fcntl
    import warnings

    def flock(fd: int, op: int) -> None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(fcntl, "flock", flock)
    lock = tmp_path / "fuseci-gpu-0.lock"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no falling back with a warning either
        with (
            pytest.raises(HarnessError, match="cannot take the GPU's lock .*Function not implemented"),
            gpu_turn(lock, 1),
        ):
            pass
    assert not [p for p in tmp_path.iterdir() if p.name != lock.name]  # no marker or probe file beside it


def test_the_default_lock_is_in_the_temporary_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = lock_path("0")
    assert path == tmp_path / "fuseci-gpu-0.lock"
    with gpu_turn(path, 5):  # a file that does not exist yet: taken, not refused
        pass


def test_preload_imports_lazy_modules_before_the_turn_and_skips_missing_ones(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from fuseci.config.parse import load_suite
    from fuseci.harness import case_runner as harness_run

    for name in ("json.tool", "no_such_module_anywhere"):
        sys.modules.pop(name, None)
    monkeypatch.setattr(harness_run, "LAZY_IMPORTS", ("json.tool", "no_such_module_anywhere"))
    with caplog.at_level(logging.DEBUG, logger="fuseci.harness"):
        harness_run.preload(load_suite(ROOT / "suites" / "elementwise.yaml"))
    assert "json.tool" in sys.modules
    assert "no_such_module_anywhere is not installed" in caplog.text
    # the suite's own module too: imported, or (without CuPy) tried and left for its cases
    assert "kernels.elementwise" in sys.modules or "preloading kernels.elementwise failed" in caplog.text


def test_a_waiter_for_the_gpu_tries_often_however_long_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU is handed on within GPU_POLL_S: the wait does not back off as a baseline lock's does."""
    from fuseci.files import locks as atomic
    from fuseci.measure.turn import GPU_POLL_S

    naps: list[float] = []
    clock = [0.0]

    def sleep(s: float) -> None:  # a fake clock: the wait "lasts" 5 s without taking them
        naps.append(s)
        clock[0] += s

    monkeypatch.setattr(atomic.time, "sleep", sleep)
    monkeypatch.setattr(atomic.time, "monotonic", lambda: clock[0])
    lock = tmp_path / "fuseci-gpu-0.lock"
    with atomic.file_lock(lock, 5), pytest.raises(HarnessError, match="stayed busy"), gpu_turn(lock, 5):
        pass
    assert len(naps) > 100 and max(naps) <= GPU_POLL_S
    naps.clear()
    clock[0] = 0.0
    # the default backs off to one try a second
    with atomic.file_lock(lock, 5), pytest.raises(atomic.LockTimeout), atomic.file_lock(lock, 5):
        pass
    assert max(naps) == 1.0


WAITER = r"""
import sys, time
from contextlib import ExitStack
from pathlib import Path
from fuseci.measure.turn import claim_next_turn, gpu_turn

lock, log, who, record = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
with ExitStack() as claim:
    if record != "-":  # a timed pass: claims the turn after the profiled run that wrote record
        claim.enter_context(claim_next_turn(lock, Path(record), 30))
        print("claimed", flush=True)
    else:
        print("waiting", flush=True)
    with gpu_turn(lock, 30, claimed=record != "-"):
        claim.close()
        with log.open("a") as fh:
            fh.write(who + "\n")
        time.sleep(0.2)
"""


def _waiter(lock: Path, log: Path, who: str, record: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(lock), str(log), who, record], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() in ("claimed\n", "waiting\n")
    return proc


def test_the_timed_pass_takes_the_gpu_right_after_its_profiled_run(tmp_path: Path) -> None:
    """Another suite's process that waited longer still comes after the claimed turn."""
    from fuseci.files.locks import is_held
    from fuseci.measure.turn import next_turn_file

    lock, log, record = tmp_path / "fuseci-gpu-0.lock", tmp_path / "order.txt", tmp_path / "a.harness.json"
    profiled = _holder(lock)  # suite a's profiled run holds the GPU...
    other = _waiter(lock, log, "b-profiled", "-")  # ...suite b's profiled run waits for it first...
    time.sleep(0.1)
    record.write_text("{}")  # (the profiled run's record appears once it holds the GPU)
    timed = _waiter(lock, log, "a-timed", str(record))  # ...then suite a's timed pass claims the next turn
    assert is_held(next_turn_file(lock))
    profiled.communicate("\n", timeout=30)
    assert timed.wait(timeout=30) == 0 and other.wait(timeout=30) == 0
    assert log.read_text().split() == ["a-timed", "b-profiled"]
    assert not next_turn_file(lock).exists() and not is_held(next_turn_file(lock))


def test_an_unclaimed_next_turn_holds_nobody_up(tmp_path: Path) -> None:
    from fuseci.files.locks import is_held
    from fuseci.measure.turn import next_turn_file

    lock = tmp_path / "fuseci-gpu-0.lock"
    assert not is_held(next_turn_file(lock)) and not next_turn_file(lock).exists()  # asking creates nothing
    next_turn_file(lock).write_text("left by a killed process\n")  # no flock on it: nobody's claim
    assert not is_held(next_turn_file(lock))
    with gpu_turn(lock, 1):
        pass


def test_a_claim_waits_for_the_profiled_record(tmp_path: Path) -> None:
    from fuseci.measure.turn import claim_next_turn

    lock = tmp_path / "fuseci-gpu-0.lock"
    with pytest.raises(HarnessError, match="wrote no record within 0.2 s"), claim_next_turn(lock, tmp_path / "r", 0.2):
        pass


def test_while_the_next_turn_is_claimed_only_the_claimant_takes_a_free_gpu(tmp_path: Path) -> None:
    from fuseci.files.locks import file_lock
    from fuseci.measure.turn import next_turn_file

    lock = tmp_path / "fuseci-gpu-0.lock"  # free: nobody holds the GPU
    with file_lock(next_turn_file(lock), 5):  # but a timed pass holds the next turn
        with pytest.raises(HarnessError, match="stayed busy .* claimed the next turn"), gpu_turn(lock, 0.3):
            pass
        with gpu_turn(lock, 0.3, claimed=True):  # the claimant itself takes it
            pass
    with gpu_turn(lock, 0.3):  # claim released: anyone
        pass
