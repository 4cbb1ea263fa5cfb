"""The fuzz tests' seed (tests/fuzzing.py): given, it replays a run's examples; not given, the run
draws one and prints it; a failing fuzz test names it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

#: A fuzz test that logs every example it draws and fails on one in seven.
PROBE = """
from hypothesis import given, strategies as st
from helpers import fuzz_settings

@fuzz_settings(30)
@given(st.integers(0, 10**12))
def test_probe(n):
    with open("drawn.log", "a") as log:
        log.write(f"{n}\\n")
    assert n % 7 != 3
"""


def _run(tmp_path: Path, name: str, seed: str | None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    work = tmp_path / name
    work.mkdir()
    (work / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "FUSECI_FUZZ_SEED"}
    env["PYTHONPATH"] = str(ROOT / "tests")
    if seed is not None:
        env["FUSECI_FUZZ_SEED"] = seed
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "fuzzing", "-p", "no:cacheprovider", "test_probe.py"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, (work / "drawn.log").read_text().splitlines()


def test_a_seed_replays_the_examples_and_a_failure_names_it(tmp_path: Path) -> None:
    # The fuzz tests drew from hypothesis' own random seed: a failure in CI could not be replayed.
    first, drawn = _run(tmp_path, "a", "1234")
    _, redrawn = _run(tmp_path, "b", "1234")
    _, elsewhere = _run(tmp_path, "c", "99")
    assert drawn == redrawn and drawn != elsewhere
    assert first.returncode == 1 and "fuzz seed: 1234 (replay with FUSECI_FUZZ_SEED=1234)" in first.stdout
    assert "this fuzz test failed with seed 1234; replay: FUSECI_FUZZ_SEED=1234 python -m pytest" in first.stdout


def test_without_a_seed_the_run_draws_one_and_prints_it(tmp_path: Path) -> None:
    drawn_run, drawn = _run(tmp_path, "a", None)
    (seed,) = re.findall(r"fuzz seed: (\d+) \(replay with FUSECI_FUZZ_SEED=\1\)", drawn_run.stdout)
    _, replayed = _run(tmp_path, "b", seed)
    assert replayed == drawn
