"""The GPU's turn (fuseci.harness.gpu_turn): a lock file in the temporary directory that every
fuseci process on the machine takes before it measures, so measurements never overlap on a GPU.
CPU-only: the lock is the same whatever runs inside it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from fuseci.errors import HarnessError
from fuseci.harness.__main__ import gpu_turn
from fuseci.measure.devices import lock_path

HOLDER = r"""
import sys
from pathlib import Path
from fuseci.harness.__main__ import gpu_turn

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


def test_the_default_lock_is_in_the_temporary_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = lock_path("0")
    assert path == tmp_path / "fuseci-gpu-0.lock"
    with gpu_turn(path, 5):  # a file that does not exist yet: taken, not refused
        pass
