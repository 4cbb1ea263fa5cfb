"""tools/gpu_timeline.py: the turns on the GPU, lined up from the harness logs' clocks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from helpers import ROOT

spec = importlib.util.spec_from_file_location("gpu_timeline", ROOT / "tools" / "gpu_timeline.py")
assert spec is not None and spec.loader is not None
timeline = importlib.util.module_from_spec(spec)
sys.modules["gpu_timeline"] = timeline  # its dataclass looks itself up there
spec.loader.exec_module(timeline)


def _log(path: Path, clock: float, lines: list[tuple[int, str]]) -> None:
    rows = [(5, f"clock: {clock:.3f} s since the epoch"), *lines]
    path.write_text("".join(f"fuseci-harness: {ms:7d} ms {msg}\n" for ms, msg in rows) + "a line of another kind\n")


def test_turns_of_two_processes_started_at_different_times(tmp_path: Path, capsys) -> None:
    # a.harness starts at 100.0 and holds the GPU from 101.0 to 103.0; a.timing starts at 100.5
    # and holds it from 103.5 to 104.0 (its own ms count from its own start)
    _log(tmp_path / "a.harness.log", 100.005, [(1000, "GPU taken"), (3000, "GPU given back")])
    _log(tmp_path / "a.timing.log", 100.505, [(3000, "GPU taken"), (3500, "GPU given back")])
    (tmp_path / "a.ncu.log").write_text("fuseci-harness:       1 ms GPU taken\n")  # not a harness log
    found = timeline.events(tmp_path)
    assert [round(e.at, 3) for e in found][:2] == [100.005, 100.505]
    held = timeline.turns(found)
    assert [(round(a, 3), round(b, 3), who) for a, b, who in held] == [
        (101.0, 103.0, "a.harness"),
        (103.5, 104.0, "a.timing"),
    ]
    assert timeline.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "GPU held 2.50 s in 2 turns, idle 0.50 s between them" in out


def test_logs_without_a_clock_say_how_to_get_one(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.harness.log").write_text("fuseci-harness:     10 ms GPU taken\n")
    assert timeline.main([str(tmp_path)]) == 1
    assert "FUSECI_LOG=DEBUG" in capsys.readouterr().err
