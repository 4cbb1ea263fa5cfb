"""tools/rehearse_adopt.py without a GPU: with --dry-run it follows docs/ADOPT.md in a new
repository, commits the pull request's edit and lists the workflow steps it would rehearse; what
it needs and lacks is one line and exit 3."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers import ROOT, git

import fuseci

TOOL = ROOT / "tools" / "rehearse_adopt.py"


@pytest.fixture
def tool(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    return importlib.import_module("rehearse_adopt")


def _fuseci_here(bin_dir: Path, python: str = sys.executable) -> Path:
    """A ``fuseci`` on PATH that runs this checkout's fuseci with ``python``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "fuseci"
    script.write_text(
        f"#!{python}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom fuseci.cli import main\nmain()\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def _rehearse(out: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PATH": path}
    return subprocess.run(
        [sys.executable, str(TOOL), "--out", str(out), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_dry_run_follows_the_guide_commits_the_edit_and_lists_the_workflows_steps(tmp_path: Path) -> None:
    bin_dir = _fuseci_here(tmp_path / "bin").parent
    out = tmp_path / "out"
    done = _rehearse(out, f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    repo = out / "repo"
    assert git(repo, "log", "--format=%s").splitlines() == [
        "mykernels: a larger block",
        "fuseci: gate the scale_relu_add fusion",
    ]
    assert git(repo, "diff", "--name-only", "HEAD~1") == "mykernels/ops.py"
    assert "BLOCK=2048" in (repo / "mykernels" / "ops.py").read_text()
    assert not (repo / "fuseci-out").exists()  # nothing of the workflow ran
    ran = {
        event: [(r["step"], r["outcome"]) for r in json.loads((out / event / "steps.json").read_text())]
        for event in ("push", "pull_request")
    }
    assert ("Set up fuseci", "SKIPPED BY REQUEST") in ran["push"] and ("Doctor", "would run") in ran["push"]
    assert ("Profile and compare", "would run") in ran["push"]
    assert not any(step == "Judge the pull request against its base" and o == "would run" for step, o in ran["push"])
    assert ("Judge the pull request against its base", "would run") in ran["pull_request"]
    summary = (out / "summary.md").read_text().splitlines()
    assert summary[:2] == ["| step | exit | seconds |", "|---|---|---|"]
    guide = [row.split(" | ")[:2] for row in summary if row.startswith("| guide: ")]
    assert [(step.split()[2:4], rc) for step, rc in guide] == [
        (["fuseci", "init"], "0"),
        (["fuseci", "check"], "0"),
        (["fuseci", "init"], "3"),
        (["git", "add"], "0"),
        (["git", "commit"], "0"),
    ]
    assert any(row.startswith("| push: fuseci / rehearsal/fuseci@") and "Doctor (would run)" in row for row in summary)
    assert summary[-1].endswith("(would run) |  |  |")  # the pull request's History step, listed last
    assert "\n".join(summary) in done.stdout


def test_no_fuseci_on_path_is_one_line_and_exit_3(tmp_path: Path) -> None:
    git_dir = Path(subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()).parent
    bash_dir = Path(subprocess.run(["which", "bash"], capture_output=True, text=True).stdout.strip()).parent
    done = _rehearse(tmp_path / "out", f"{git_dir}{os.pathsep}{bash_dir}", "--dry-run")
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"rehearse_adopt: error: no fuseci on PATH; install this checkout: python3 -m pip install -e {ROOT}"
    ]
    assert not (tmp_path / "out").exists()


def test_a_fuseci_of_another_version_is_refused(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fuseci").write_text("#!/bin/sh\necho 'fuseci 0.0.1'\n")
    (bin_dir / "fuseci").chmod(0o755)
    done = _rehearse(tmp_path / "out", f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "--dry-run")
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"says 'fuseci 0.0.1', this checkout is fuseci {fuseci.__version__}" in done.stderr


def test_without_dry_run_a_python_without_torch_is_refused_before_anything(tmp_path: Path) -> None:
    """The GPU rehearsal needs PyTorch and Triton with a GPU in fuseci's Python (its `#!`)."""
    python = tmp_path / "bin" / "no-torch-python"
    python.parent.mkdir()
    python.write_text(
        '#!/bin/bash\nif [ "$1" = -c ]; then echo "ModuleNotFoundError: No module named \'torch\'" >&2; exit 1; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    _fuseci_here(tmp_path / "bin", str(python))
    done = _rehearse(tmp_path / "out", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"rehearse_adopt: error: {python}: the guide's kernels need PyTorch and Triton with a CUDA GPU "
        "(ModuleNotFoundError: No module named 'torch')"
    ]
    assert not (tmp_path / "out").exists()


def test_a_kernel_without_what_the_edit_replaces_says_so(tool: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "mykernels").mkdir()
    (tmp_path / "mykernels" / "ops.py").write_text("BLOCK=512\n")
    with pytest.raises(tool.Missing, match=r"holds 'BLOCK=1024' 0 times; update EDIT here"):
        tool.edit_kernel(tmp_path)


def test_the_written_action_is_read_from_the_one_workflow(tool: ModuleType, tmp_path: Path) -> None:
    flows = tmp_path / ".github" / "workflows"
    flows.mkdir(parents=True)
    (flows / "fuseci.yml").write_text(
        "jobs:\n  j:\n    steps:\n      - uses: actions/checkout@v4\n      - uses: acme/fuseci@v1.2.3\n"
    )
    assert tool.written_action(tmp_path) == (Path(".github/workflows/fuseci.yml"), "acme/fuseci")
    (flows / "other.yml").write_text("jobs: {}\n")
    with pytest.raises(tool.Missing, match="2 workflows"):
        tool.written_action(tmp_path)


def test_the_table_has_a_row_per_step(tool: ModuleType) -> None:
    assert tool.table([("a | b", 0, 1.25, True), ("c", None, None, True)]).splitlines() == [
        "| step | exit | seconds |",
        "|---|---|---|",
        "| a \\| b | 0 | 1.2 |",  # a pipe in a step stays in its cell
        "| c |  |  |",
    ]
