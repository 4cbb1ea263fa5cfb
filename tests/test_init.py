"""fuseci init: a starter suite read from source, the Action's workflow, .gitignore lines; never
a file replaced, and a suite that passes fuseci check."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fuseci import api
from fuseci.api.init import InitOptions, init, installed_action
from fuseci.cli import app
from fuseci.errors import SuiteError

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


@wrapped
def decorated(x, y):
    return x
'''

FUNCTIONS = ("mypkg.ops:add_unfused", "mypkg.ops:add_fused")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "ops.py").write_text(OPS)
    return tmp_path


ACTION = "me/fuseci@v0.1.0"


def invoke(repo: Path, *args: str):
    action = () if any(a.startswith("--action") for a in args) else ("--action", ACTION)
    return CliRunner().invoke(app, ["init", *args, *action, "--root", str(repo)])


def test_init_writes_the_suite_the_workflow_and_gitignore(repo: Path) -> None:
    result = invoke(
        repo, *FUNCTIONS, "--runner-label", "self-hosted", "--runner-label", "gpu", "--action", "me/fuseci@v0.1.0"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "written  suites/mypkg.yaml",
        "written  .github/workflows/fuseci.yml",
        "written  .github/actionlint.yaml",
        "written  .gitignore (fuseci-out/)",
        "fuseci init: edit the placeholder shapes of the suite, then `fuseci check`; commit the files",
        "fuseci init: with PyTorch installed (a CPU build will do), `fuseci check --execute` calls each function once",
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
    assert yaml.safe_load((repo / ".github" / "actionlint.yaml").read_text()) == {
        "self-hosted-runner": {"labels": ["gpu"]}
    }


def test_the_written_suite_passes_check(repo: Path) -> None:
    assert invoke(repo, *FUNCTIONS).exit_code == 0
    checked = api.check_suites([repo / "suites" / "mypkg.yaml"], root=repo)
    assert checked.ok, checked.problems
    (only,) = checked.files
    assert only.summary().endswith(": ok") and not only.warnings


def _files(repo: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}


def test_a_second_run_names_each_file_that_exists_exits_3_and_writes_nothing(repo: Path) -> None:
    assert invoke(repo, *FUNCTIONS).exit_code == 0
    (repo / ".gitignore").write_text("*.pyc\n")  # would gain its line: not in a refused run
    before = _files(repo)
    result = invoke(repo, *FUNCTIONS)
    assert result.exit_code == 3, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "fuseci: error: suites/mypkg.yaml: exists (fuseci init never replaces a file: nothing written); "
        "remove it, or pass --suite ID for another suite (suites/ID.yaml)",
        "fuseci: error: .github/workflows/fuseci.yml: exists (fuseci init never replaces a file: nothing written); "
        "remove it, pass --workflow FILE for another workflow in .github/workflows/, or --suite-only",
    ]
    assert _files(repo) == before


@pytest.mark.parametrize("there", ["suites/mypkg.yaml", ".github/workflows/fuseci.yml"])
def test_one_existing_target_is_one_line_and_nothing_else_is_written(repo: Path, there: str) -> None:
    (repo / there).parent.mkdir(parents=True)
    (repo / there).write_text("mine\n")
    before = _files(repo)
    with pytest.raises(SuiteError) as caught:
        init(InitOptions(functions=FUNCTIONS, root=repo, action=ACTION))
    assert str(caught.value).startswith(f"{there}: exists") and "\n" not in str(caught.value)
    assert _files(repo) == before and not (repo / ".gitignore").exists()


def test_another_suite_id_and_workflow_file_write_beside_existing_ones(repo: Path) -> None:
    assert invoke(repo, *FUNCTIONS).exit_code == 0
    result = invoke(repo, *FUNCTIONS, "--suite", "more", "--workflow", ".github/workflows/more.yaml")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:4] == [
        "written  suites/more.yaml",
        "written  .github/workflows/more.yaml",
        "exists   .github/actionlint.yaml (declares the runner labels)",
        "exists   .gitignore (already ignores fuseci-out/)",
    ]
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "more.yaml").read_text())
    assert workflow["jobs"]["fuseci"]["steps"][1]["with"]["suites"] == "suites/more.yaml"


def test_gitignore_only_gains_its_line(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.pyc")  # no newline at its end
    done = init(InitOptions(functions=FUNCTIONS, root=repo, action=ACTION))
    assert [(w.path.as_posix(), w.status) for w in done] == [
        ("suites/mypkg.yaml", "written"),
        (".github/workflows/fuseci.yml", "written"),
        (".github/actionlint.yaml", "written"),
        (".gitignore", "added"),
    ]
    assert (repo / ".gitignore").read_text() == "*.pyc\nfuseci-out/\n"


TORCH_OPS = """import torch
import triton


def mul_unfused(x: torch.Tensor, y):
    return x * y


def mul_fused(x, y):
    return x * y
"""


def _extras(repo: Path) -> str:
    text = (repo / ".github" / "workflows" / "fuseci.yml").read_text()
    (line,) = [line.strip() for line in text.splitlines() if line.strip().startswith("extras:")]
    return line


def test_the_actions_extras_follow_the_functions_framework(repo: Path) -> None:
    (repo / "mypkg" / "tops.py").write_text(TORCH_OPS)
    assert invoke(repo, "mypkg.tops:mul_unfused", "mypkg.tops:mul_fused").exit_code == 0
    assert _extras(repo) == "extras: torch"
    assert yaml.safe_load((repo / "suites" / "mypkg.yaml").read_text())["defaults"]["framework"] == "torch"
    other = repo / "other"
    shutil.copytree(repo / "mypkg", other / "mypkg")
    mixed = ("mypkg.tops:mul_unfused", "mypkg.ops:add_fused")  # one CuPy module: CuPy's extras
    assert invoke(other, *mixed).exit_code == 0
    assert _extras(other) == "extras: cuda12  # CuPy for CUDA 12; cuda13 on a CUDA 13 driver stack"


def test_a_cupy_suite_gets_cupys_extras(repo: Path) -> None:
    assert invoke(repo, *FUNCTIONS).exit_code == 0
    assert _extras(repo).startswith("extras: cuda12  #") and "cuda13" in _extras(repo)
    assert "framework" not in yaml.safe_load((repo / "suites" / "mypkg.yaml").read_text())["defaults"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--runner-label", "gpu,h100"),
            "--runner-label: runner label 'gpu,h100' holds a comma, which separates labels",
        ),
        (("--runner-label", "gpu\nh100"), "--runner-label: runner label 'gpu\\nh100' holds a control character"),
        (("--runner-label", "${{ vars.X }}"), "--runner-label: runner label '${{ vars.X }}' holds ${{, which"),
        (("--runner-label", " "), "--runner-label: an empty runner label; name the label the runner was registered"),
        (("--workflow", "ci/fuseci.yml"), "--workflow ci/fuseci.yml: GitHub runs only the .yml and .yaml files of"),
        (("--workflow", ".github/workflows/fuseci.txt"), "--workflow .github/workflows/fuseci.txt: GitHub runs only"),
    ],
)
def test_a_label_or_workflow_a_workflow_cannot_hold_exits_2_and_writes_nothing(repo: Path, args, message) -> None:
    result = invoke(repo, *FUNCTIONS, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fuseci: error: " + message) and len(result.stderr.splitlines()) == 1
    assert sorted(p.name for p in repo.iterdir()) == ["mypkg"]


def test_each_bad_label_is_a_line_of_its_own(repo: Path) -> None:
    result = invoke(repo, *FUNCTIONS, "--runner-label", "a,b", "--runner-label", "gpu", "--runner-label", "c,d")
    assert result.exit_code == 2, result.output
    assert [line.split("'")[1] for line in result.stderr.splitlines()] == ["a,b", "c,d"]


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
        (("mypkg.ops:add_unfused", "mypkg.ops:scale_fused"), "mypkg.ops:add_unfused: takes no parameter 'beta'"),
        (("mypkg.ops:only_scalars", "mypkg.ops:only_scalars"), "mypkg.ops:only_scalars: takes no array parameter"),
        (("mypkg.ops:by_position", "mypkg.ops:add_fused"), "mypkg.ops:by_position: takes positional-only"),
        (
            ("mypkg.ops:add_unfused", "mypkg.ops:decorated"),
            "mypkg.ops:decorated: mypkg.ops ({ops}) names 'decorated' but not as a def whose parameters its source "
            "shows; name the function it is",
        ),
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
    assert job["steps"][1]["with"]["extras"] == "torch"  # --framework torch over the module's CuPy
    assert (repo / ".gitignore").read_text() == "out/fuseci/\n"


def test_the_action_comes_from_where_fuseci_was_installed(monkeypatch, tmp_path: Path) -> None:
    class Dist:
        def __init__(self, text: str | None) -> None:
            self.text = text

        def read_text(self, name: str) -> str | None:
            return self.text

    import fuseci.api.init as module

    clone = tmp_path / "fuseci"
    (clone / ".git").mkdir(parents=True)
    (clone / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/fuseci.git\n'
    )
    sha = "0123456789abcdef0123456789abcdef01234567"
    vcs = f'"vcs_info": {{"vcs": "git", "requested_revision": "v1.2.3", "commit_id": "{sha}"}}'
    for text, expected in [
        (f'{{"url": "https://github.com/acme/fuseci.git", {vcs}}}', f"acme/fuseci@{sha}"),
        (f'{{"url": "file://localhost{clone}", {vcs}}}', f"acme/fuseci@{sha}"),  # a clone of GitHub's
        (f'{{"url": "file://{tmp_path}", {vcs}}}', None),  # a clone of nothing on GitHub
        ('{"url": "file:///src/fuseci", "dir_info": {"editable": true}}', None),
        ('{"url": "file:///d/fuseci-0.1.0-py3-none-any.whl", "archive_info": {}}', None),
        ("[1]", None),
        (None, None),
    ]:  # fmt: skip
        monkeypatch.setattr(module.metadata, "distribution", lambda name, text=text: Dist(text))
        assert installed_action() == expected, text


def test_without_a_known_action_init_asks_for_one_and_writes_nothing(repo: Path, monkeypatch) -> None:
    import fuseci.api.init as module

    monkeypatch.setattr(module, "installed_action", lambda: None)
    result = CliRunner().invoke(app, ["init", *FUNCTIONS, "--root", str(repo)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fuseci: error: --action: not given, and the installed fuseci does not say")
    assert sorted(p.name for p in repo.iterdir()) == ["mypkg"]


def test_help_has_examples_and_exit_codes() -> None:
    result = CliRunner().invoke(app, ["init", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    examples = result.output.split("Examples:", 1)[1].split("\n\n", 1)[0].splitlines()
    assert examples and all(line.strip().startswith("fuseci init ") for line in examples if line.strip())
    assert "Exit codes: 0 written; 2 an option a suite, a workflow or a path cannot hold" in result.output
    assert not re.search(r"<(list\[|int|float|str|bool|path|Path)[^>]*>", result.output), result.output
    assert "FUNCTION" in next(line for line in result.output.splitlines() if "Usage:" in line)


def test_a_file_that_cannot_be_written_is_one_line_and_exit_3(repo: Path) -> None:
    (repo / ".github").write_text("a file where a directory goes")
    result = invoke(repo, *FUNCTIONS)
    assert result.exit_code == 3, result.output
    assert result.stderr == "fuseci: error: .github: a file where a directory goes; move it away\n"
    assert not (repo / "suites" / "mypkg.yaml").exists() and not (repo / ".gitignore").exists()


# --- hostile input: every option checked, every value quoted, every target checked first -------

INJECTED = "me/fuseci@v1\n      - run: echo ${{ github.event.pull_request.title }}"


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("--suite", "../../x"), "--suite '../../x': not an id"),
        (("--suite", "a b"), "--suite 'a b': not an id"),
        (("--case", "c\nid: other"), "--case 'c\\nid: other': not an id"),
        (("--report-dir", "out\n  run: evil"), "--report-dir 'out\\n  run: evil': not a plain path"),
        (("--report-dir", "../out"), "--report-dir '../out': not a plain path"),
        (("--report-dir", "/tmp/out"), "--report-dir '/tmp/out': not a plain path"),
        (("--report-dir", "!keep*"), "--report-dir '!keep*': not a plain path"),
        (("--action", INJECTED), "--action 'me/fuseci@v1\\n"),
        (("--action", "me/fuseci"), "--action 'me/fuseci': not an Action reference"),
        (("--action", "me/fuseci@v1 # x"), "--action 'me/fuseci@v1 # x': not an Action reference"),
        (("--workflow", ".github/workflows/a b.yml"), "--workflow '.github/workflows/a b.yml': use letters"),
        (("--runner-label", "gpu\u2028x"), "--runner-label: runner label 'gpu\\u2028x' holds a control character"),
    ],
)
def test_an_option_a_document_cannot_hold_is_a_usage_error_and_writes_nothing(repo: Path, args, start) -> None:
    result = invoke(repo, *FUNCTIONS, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fuseci: error: " + start) and len(result.stderr.splitlines()) == 1
    assert sorted(p.name for p in repo.iterdir()) == ["mypkg"]


@pytest.mark.parametrize(
    ("functions", "start"),
    [
        (("mypkg.ops:add_unfused", "add_fused"), "'add_fused': not a module:function reference"),
        (("mypkg.ops:add_unfused", "my pkg:add_fused"), "'my pkg:add_fused': not a module:function"),
        (("mypkg.ops:add_unfused",), "fuseci init: 1 function(s) named; name the unfused function, then"),
    ],
)
def test_functions_that_are_no_references_are_a_usage_error(repo: Path, functions, start) -> None:
    result = invoke(repo, *functions)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fuseci: error: " + start)
    assert sorted(p.name for p in repo.iterdir()) == ["mypkg"]


KEYWORDS = """def f_unfused(x, on: float = 1e-6, null: int = 2, yes=True, eps: float = 1e-06, big=1e300, nan=float("nan")):
    return x


def f_fused(x, on: float = 1e-6, null: int = 2, yes=True, eps: float = 1e-06, big=1e300, nan=float("nan")):
    return x
"""


def test_params_read_back_as_the_functions_defaults_whatever_their_names(repo: Path) -> None:
    (repo / "mypkg" / "kw.py").write_text(KEYWORDS)
    result = invoke(repo, "mypkg.kw:f_unfused", "mypkg.kw:f_fused", "--case", "on")
    assert result.exit_code == 0, result.output
    from fuseci.config.parse import load_suite

    (case,) = load_suite(repo / "suites" / "mypkg.yaml").cases
    assert case.id == "on"
    assert case.params == {"on": 1e-6, "null": 2, "yes": True, "eps": 1e-6, "big": 1e300}
    assert [type(v) for v in case.params.values()] == [float, int, bool, float, float]
    checked = api.check_suites([repo / "suites" / "mypkg.yaml"], root=repo)
    assert checked.ok, checked.problems


def _fifo(path: Path) -> None:
    import os

    os.mkfifo(path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_fifo, ".gitignore: a FIFO, not a regular file; make it one, or remove it"),
        (lambda p: p.mkdir(), ".gitignore: a directory, not a regular file; make it one, or remove it"),
        (lambda p: p.symlink_to(p.parent.parent / "outside"), ".gitignore: a link out of the repository"),
        (lambda p: p.symlink_to(p.parent / "nowhere"), ".gitignore: a link to nothing; remove it"),
    ],
)
def test_a_gitignore_that_is_no_file_of_the_repository_is_refused_before_anything_is_written(
    tmp_path: Path, make, message: str
) -> None:
    repo = tmp_path / "repo"
    _package(repo)
    (tmp_path / "outside").write_text("theirs\n")
    make(repo / ".gitignore")
    result = invoke(repo, *FUNCTIONS)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("fuseci: error: " + message) and len(result.stderr.splitlines()) == 1
    assert not (repo / "suites").exists() and not (repo / ".github").exists()
    assert (tmp_path / "outside").read_text() == "theirs\n"


def _package(repo: Path) -> None:
    (repo / "mypkg").mkdir(parents=True)
    (repo / "mypkg" / "__init__.py").write_text("")
    (repo / "mypkg" / "ops.py").write_text(OPS)


@pytest.mark.parametrize("linked", ["suites", ".github", ".github/workflows"])
def test_a_directory_linked_out_of_the_repository_is_never_written_through(tmp_path: Path, linked: str) -> None:
    repo = tmp_path / "repo"
    _package(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / linked).parent.mkdir(parents=True, exist_ok=True)
    (repo / linked).symlink_to(outside)
    result = invoke(repo, *FUNCTIONS)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"fuseci: error: {linked}: a link out of the repository")
    assert list(outside.iterdir()) == [] and not (repo / ".gitignore").exists()


def test_a_write_that_fails_midway_removes_what_it_wrote(repo: Path, monkeypatch) -> None:
    import fuseci.api.init as module

    real = module._write

    def failing(root, p, held, made):
        if p.path == module.GITIGNORE:
            raise OSError(28, "No space left on device", str(root / p.path))
        return real(root, p, held, made)

    monkeypatch.setattr(module, "_write", failing)
    result = invoke(repo, *FUNCTIONS)
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.stderr
    assert sorted(p.name for p in repo.iterdir()) == ["mypkg"]


def test_suite_only_adds_a_suite_beside_the_workflow(repo: Path) -> None:
    assert invoke(repo, *FUNCTIONS).exit_code == 0
    before = _files(repo)
    result = CliRunner().invoke(app, ["init", *FUNCTIONS, "--suite", "more", "--suite-only", "--root", str(repo)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "written  suites/more.yaml (add it to the suites: input of .github/workflows/fuseci.yml, which names others)"
    )
    assert set(_files(repo)) - set(before) == {repo / "suites" / "more.yaml"}
    assert all(_files(repo)[p] == b for p, b in before.items())


def test_an_actionlint_config_of_the_repository_is_kept_and_what_it_lacks_said(repo: Path) -> None:
    (repo / ".github").mkdir()
    (repo / ".github" / "actionlint.yaml").write_text("self-hosted-runner:\n  labels: [h100]\n")
    result = invoke(repo, *FUNCTIONS, "--runner-label", "self-hosted", "--runner-label", "gpu")
    assert result.exit_code == 0, result.output
    assert (
        "exists   .github/actionlint.yaml (lacks runner labels 'gpu': add them to self-hosted-runner.labels)"
        in result.stdout.splitlines()
    )
    assert (repo / ".github" / "actionlint.yaml").read_text() == "self-hosted-runner:\n  labels: [h100]\n"
