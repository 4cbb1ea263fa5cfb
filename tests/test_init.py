"""fuseci init: a starter suite read from source, the Action's workflow, .gitignore lines; never
a file replaced, and a suite that passes fuseci check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fuseci import api
from fuseci.api.init import InitOptions, init, installed_action
from fuseci.cli import app

OPS = '''"""Kernels of a package of the user's: never imported by fuseci init."""
import cupy as cp

raise RuntimeError("imported")


def add_unfused(x: cp.ndarray, y: cp.ndarray, alpha: float = 0.5) -> cp.ndarray:
    return x * alpha + y


def add_fused(x, y, alpha: float = 0.5, *, inplace: bool = False):
    return x


def scale_fused(x, y, alpha, beta: int):
    return x


def only_scalars(alpha: float, beta: int = 2):
    return alpha


def by_position(x, y, /, alpha=1.0):
    return x
'''

FUNCTIONS = ("mypkg.ops:add_unfused", "mypkg.ops:add_fused")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "ops.py").write_text(OPS)
    return tmp_path


def invoke(repo: Path, *args: str):
    return CliRunner().invoke(app, ["init", *args, "--root", str(repo)])


def test_init_writes_the_suite_the_workflow_and_gitignore(repo: Path) -> None:
    result = invoke(
        repo, *FUNCTIONS, "--runner-label", "self-hosted", "--runner-label", "gpu", "--action", "me/fuseci@v0.1.0"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "written  suites/mypkg.yaml",
        "written  .github/workflows/fuseci.yml",
        "written  .gitignore (fuseci-out/)",
        "fuseci init: edit the placeholder shapes of the suite, then `fuseci check`; commit the files",
    ]
    suite = yaml.safe_load((repo / "suites" / "mypkg.yaml").read_text())
    (case,) = suite["cases"]
    assert suite["suite"] == "mypkg" and case["id"] == "add"
    assert case["inputs"] == {"x": {"shape": [67108864]}, "y": {"shape": [67108864]}}
    assert case["params"] == {"alpha": 0.5}  # inplace: one variant's only, left to its default
    assert case["variants"] == {"unfused": "mypkg.ops:add_unfused", "fused": "mypkg.ops:add_fused"}
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "fuseci.yml").read_text())
    job = workflow["jobs"]["fuseci"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in job["if"]
    action = job["steps"][1]
    assert action["uses"] == "me/fuseci@v0.1.0"
    assert action["with"]["suites"] == "suites/mypkg.yaml" and action["with"]["report-dir"] == "fuseci-out"
    assert (repo / ".gitignore").read_text() == "fuseci-out/\n"


def test_the_written_suite_passes_check(repo: Path) -> None:
    assert invoke(repo, *FUNCTIONS).exit_code == 0
    checked = api.check_suites([repo / "suites" / "mypkg.yaml"], root=repo)
    assert checked.ok, checked.problems
    (only,) = checked.files
    assert only.summary().endswith(": ok") and not only.warnings


def test_a_second_run_writes_nothing_and_says_what_exists(repo: Path) -> None:
    assert invoke(repo, *FUNCTIONS).exit_code == 0
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    result = invoke(repo, *FUNCTIONS)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "exists   suites/mypkg.yaml (left alone)",
        "exists   .github/workflows/fuseci.yml (left alone)",
        "exists   .gitignore (already ignores fuseci-out/)",
        "fuseci init: everything was already there; nothing written",
    ]
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before


def test_existing_files_are_left_alone_and_gitignore_only_gains_its_line(repo: Path) -> None:
    (repo / "suites").mkdir()
    (repo / "suites" / "mypkg.yaml").write_text("mine\n")
    (repo / ".gitignore").write_text("*.pyc")  # no newline at its end
    done = init(InitOptions(functions=FUNCTIONS, root=repo))
    assert [(w.path.as_posix(), w.status) for w in done] == [
        ("suites/mypkg.yaml", "exists"),
        (".github/workflows/fuseci.yml", "written"),
        (".gitignore", "added"),
    ]
    assert (repo / "suites" / "mypkg.yaml").read_text() == "mine\n"
    assert (repo / ".gitignore").read_text() == "*.pyc\nfuseci-out/\n"


@pytest.mark.parametrize(
    ("functions", "message"),
    [
        (
            ("mypkg.ops:add_unfused", "mypkg.ops:add_fsed"),
            "mypkg.ops:add_fsed: module 'mypkg.ops' ({ops}) defines no 'add_fsed'; did you mean 'add_fused'?; "
            "name a function its module defines",
        ),
        (
            ("mypkg.ops:add_unfused", "nopkg.ops:add"),
            "nopkg.ops:add: no module 'nopkg' in {root}",
        ),
        (("mypkg.ops:add_unfused", "add_fused"), "add_fused: not a module:function reference"),
        (("mypkg.ops:add_unfused",), "fuseci init: 1 function(s) named; name the unfused function, then"),
        (("mypkg.ops:add_unfused", "mypkg.ops:scale_fused"), "mypkg.ops:add_unfused: takes no parameter 'beta'"),
        (("mypkg.ops:only_scalars", "mypkg.ops:only_scalars"), "mypkg.ops:only_scalars: takes no array parameter"),
        (("mypkg.ops:by_position", "mypkg.ops:add_fused"), "mypkg.ops:by_position: takes positional-only"),
    ],
)
def test_a_bad_function_exits_3_with_one_line_and_writes_nothing(repo: Path, functions, message: str) -> None:
    result = invoke(repo, *functions)
    assert result.exit_code == 3, result.output
    expected = "fuseci: error: " + message.format(ops=repo / "mypkg" / "ops.py", root=repo.resolve())
    assert result.stderr.startswith(expected) and len(result.stderr.splitlines()) == 1
    assert sorted(p.name for p in repo.iterdir()) == ["mypkg"]


def test_ids_runner_labels_report_dir_and_framework_are_taken_from_the_command_line(repo: Path) -> None:
    result = invoke(
        repo,
        *FUNCTIONS,
        "mypkg.ops:add_fused",
        "--suite", "adds",
        "--case", "add2",
        "--runner-label", "self-hosted",
        "--runner-label", "linux-gpu.h100",
        "--runner-label", "my gpu",
        "--report-dir", "out/fuseci",
        "--framework", "torch",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    suite = yaml.safe_load((repo / "suites" / "adds.yaml").read_text())
    assert suite["defaults"]["framework"] == "torch" and suite["cases"][0]["id"] == "add2"
    assert list(suite["cases"][0]["variants"]) == ["unfused", "fused", "add_fused"]
    job = yaml.safe_load((repo / ".github" / "workflows" / "fuseci.yml").read_text())["jobs"]["fuseci"]
    assert job["runs-on"] == ["self-hosted", "linux-gpu.h100", "my gpu"]
    assert job["steps"][1]["with"]["report-dir"] == "out/fuseci"
    assert (repo / ".gitignore").read_text() == "out/fuseci/\n"


def test_the_action_comes_from_where_fuseci_was_installed(monkeypatch) -> None:
    class Dist:
        def __init__(self, text: str | None) -> None:
            self.text = text

        def read_text(self, name: str) -> str | None:
            return self.text

    import fuseci.api.init as module

    for text, expected in [
        ('{"url": "https://github.com/acme/fuseci.git", "vcs_info": {"vcs": "git", "requested_revision": "v1.2.3"}}', "acme/fuseci@v1.2.3"),
        ('{"url": "file:///src/fuseci", "dir_info": {"editable": true}}', module.ACTION_FALLBACK),
        (None, module.ACTION_FALLBACK),
    ]:  # fmt: skip
        monkeypatch.setattr(module.metadata, "distribution", lambda name, text=text: Dist(text))
        assert installed_action() == expected


def test_help_has_examples_and_exit_codes() -> None:
    result = CliRunner().invoke(app, ["init", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    examples = result.output.split("Examples:", 1)[1].split("\n\n", 1)[0].splitlines()
    assert examples and all(line.strip().startswith("fuseci init ") for line in examples if line.strip())
    assert "Exit codes: 0 written, or already there" in result.output
    assert not re.search(r"<(list\[|int|float|str|bool|path|Path)[^>]*>", result.output), result.output
    assert "FUNCTION" in next(line for line in result.output.splitlines() if "Usage:" in line)


def test_a_file_that_cannot_be_written_is_one_line_and_exit_3(repo: Path) -> None:
    (repo / ".github").write_text("a file where a directory goes")
    result = invoke(repo, *FUNCTIONS)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"fuseci: error: {repo / '.github'}") and len(result.stderr.splitlines()) == 1
    assert "cannot write" in result.stderr
