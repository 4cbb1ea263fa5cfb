"""Rehearse the GPU workflow on any GPU machine: run its steps, in order, as GitHub would.

    python tools/rehearse_workflow.py [--workflow .github/workflows/gpu.yml] [--gpu h200]
                                      [--event push|pull_request] [--base REF]
                                      [--skip STEP]... [--local-action OWNER/NAME=PATH]...
                                      [--dry-run] [--out DIR]

Reads the workflow file itself, so the commands rehearsed are the ones CI runs: for every matrix
combination whose ``gpu`` is this machine's, each step's ``run:`` script runs with bash in the
repository root, with the job's env and local stand-ins for GitHub's files; ``if:`` conditions
of ``matrix.KEY == VALUE`` and ``github.event_name`` terms are evaluated. Checkout, the artifact
actions and local composite actions (``uses: ./``, or ``--local-action OWNER/NAME=PATH``) are
rehearsed; the others are listed as not rehearsed. Each step's outcome is also written to
DIR/steps.json. Exit status: 0 when every job rehearsed as it would pass on GitHub.
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


class Context:
    def __init__(
        self, root: Path, out: Path, matrix: dict[str, Any], env: dict[str, str], event: str = "push", base: str = ""
    ) -> None:
        self.root, self.out, self.matrix, self.env = root, out, matrix, env
        self.event, self.base = event, base
        self.inputs: dict[str, str] = {}  # a local action's inputs, while its steps run
        self.action_path = ""  # a local action's directory, while its steps run
        self.local_actions: dict[str, Path] = {}  # OWNER/NAME -> the directory of its action.yml
        self.dry_run = False
        self.records: list[dict[str, Any]] = []  # each step's outcome, for steps.json
        self.path_file = out / "github_path"
        self.summary = out / "step_summary.md"
        self.output = out / "github_output"
        for f in (self.path_file, self.output):
            f.write_text("")
        self.summary.touch()

    def expand(self, text: str) -> str:
        def value(m: re.Match[str]) -> str:
            expr = m.group(1)
            if "||" in expr:  # `a || 'default'`: the first that is set
                first, default = (part.strip() for part in expr.split("||", 1))
                return value(re.match(r"(.*)", first)) or default.strip("'")  # type: ignore[arg-type]
            if expr.startswith("vars."):
                return os.environ.get(expr.removeprefix("vars."), "")
            if expr.startswith("matrix."):
                return str(self.matrix[expr.removeprefix("matrix.")])
            if expr.startswith("env."):
                return self.env.get(expr.removeprefix("env."), "")
            if expr.startswith("inputs."):
                return self.inputs[expr.removeprefix("inputs.")]
            if expr in ("github.run_id", "github.run_attempt", "github.sha"):
                return {"github.run_id": "rehearsal", "github.run_attempt": "1"}.get(expr) or _git("HEAD", self.root)
            if expr == "github.ref_name":
                return _git("--abbrev-ref HEAD", self.root)
            if expr == "github.base_ref":
                return "main" if self.event == "pull_request" else ""
            if expr == "runner.os":
                return "Linux"
            if expr.startswith(("steps.", "needs.")):  # outputs of actions that are not rehearsed
                return ""
            if expr == "github.event_name":
                return self.event
            if expr == "github.event.pull_request.base.sha":
                return self.base if self.event == "pull_request" else ""
            if expr == "github.workspace":
                return str(self.root)
            raise SystemExit(f"rehearsal: cannot evaluate ${{{{ {expr} }}}}; extend tools/rehearse_workflow.py")

        return EXPR.sub(value, text)

    def process_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        extra = [line.strip() for line in self.path_file.read_text().splitlines() if line.strip()]
        env["PATH"] = os.pathsep.join([*reversed(extra), env["PATH"]])
        env.update(
            {
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "GITHUB_WORKSPACE": str(self.root),
                "GITHUB_PATH": str(self.path_file),
                "GITHUB_STEP_SUMMARY": str(self.summary),
                "GITHUB_OUTPUT": str(self.output),
                **({"GITHUB_ACTION_PATH": self.action_path} if self.action_path else {}),
            }
        )
        return env

    def record(self, job: str, step: str, outcome: str, rc: int | None = None, seconds: float | None = None) -> None:
        self.records.append({"job": job, "step": step, "outcome": outcome, "rc": rc, "seconds": seconds})

    def local_action(self, uses: str) -> Path | None:
        """The directory of the composite action a ``uses:`` names, when it is rehearsed."""
        if uses.startswith("./"):
            return self.root / uses
        name, at, _ = uses.partition("@")
        return self.local_actions.get(name) if at else None


def _git(args: str, root: Path) -> str:
    done = subprocess.run(["git", "rev-parse", *args.split()], cwd=root, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _term(term: str, matrix: dict[str, Any], event: str, inputs: dict[str, str] | None = None) -> bool | None:
    """One term of a condition; None when it is not one this rehearsal evaluates."""
    m = re.fullmatch(r"\s*matrix\.(\w+)\s*==\s*'?([\w.-]+)'?\s*", term)
    if m is not None:
        return str(matrix.get(m.group(1))) == m.group(2)
    m = re.fullmatch(r"\s*inputs\.([\w-]+)\s*(==|!=)\s*'([^']*)'\s*", term)
    if m is not None and inputs is not None and m.group(1) in inputs:
        return (inputs[m.group(1)] == m.group(3)) == (m.group(2) == "==")
    m = re.fullmatch(r"\s*github\.event_name\s*(==|!=)\s*'([\w-]+)'\s*", term)
    if m is not None:
        return (event == m.group(2)) == (m.group(1) == "==")
    if term.strip() in ("always()", "success()"):
        return True
    return None


def condition_holds(
    condition: str, matrix: dict[str, Any], event: str = "push", inputs: dict[str, str] | None = None
) -> bool | None:
    """A step's ``if:`` of terms joined by ``&&``; None when a term is one not evaluated here."""
    if "||" in condition:
        return None
    values = [_term(t, matrix, event, inputs) for t in condition.split("&&")]
    if any(v is None for v in values):
        return None
    return all(values)


def _skipped(name: str, label: str, why: str, ctx: Context, log: list[str]) -> None:
    log.append(f"  {why}: {label}")
    ctx.record(name, label, why)


def run_job(name: str, job: dict[str, Any], ctx: Context, skip: set[str], log: list[str]) -> bool:
    ok = True
    for i, step in enumerate(job["steps"]):
        label = step.get("name") or step.get("uses") or f"step {i + 1}"
        condition = str(step.get("if", "success()"))
        always = "always()" in condition
        if not ok and not always:
            _skipped(name, label, "skipped (an earlier step failed)", ctx, log)
            continue
        if condition_holds(condition, ctx.matrix, ctx.event, ctx.inputs) is False:
            _skipped(name, label, f"skipped (if: {condition})", ctx, log)
            continue
        if label in skip:
            _skipped(name, label, "SKIPPED BY REQUEST", ctx, log)
            continue
        if "uses" in step:
            ok = _uses(name, label, step, job, ctx, skip, log) and ok
            continue
        script = ctx.expand(step["run"])
        if ctx.dry_run:
            log.append(f"  would run: {label}")
            ctx.record(name, label, "would run")
            continue
        start = time.monotonic()
        print(f"== {name} / {label}", flush=True)
        env = ctx.process_env()
        env.update({k: ctx.expand(str(v)) for k, v in step.get("env", {}).items()})  # the step's own
        rc = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=ctx.root, env=env, check=False).returncode
        seconds = time.monotonic() - start
        log.append(f"  {'ok  ' if rc == 0 else 'FAIL'} rc={rc} {seconds:6.1f}s  {label}")
        ctx.record(name, label, "ok" if rc == 0 else "FAIL", rc, round(seconds, 1))
        ok = ok and rc == 0
    return ok


def _uses(
    name: str, label: str, step: dict[str, Any], job: dict[str, Any], ctx: Context, skip: set[str], log: list[str]
) -> bool:
    """A ``uses:`` step: checkout, the artifacts, a local composite action; whether it passed."""
    uses = str(step["uses"])
    action = ctx.local_action(uses)
    if action is not None:
        return run_action(f"{name} / {label}", step, ctx, skip, log, action)
    done, outcome = f"  not rehearsed: {label} ({uses})", "not rehearsed"
    if ctx.dry_run and uses.startswith(("actions/checkout@", "actions/upload-artifact@", "actions/download-artifact@")):
        done, outcome = f"  would do: {label} ({uses})", "would do"
    elif uses.startswith("actions/checkout@"):
        # A fresh checkout holds none of an earlier job's outputs: clear what this job uploads.
        for other in job["steps"]:
            if str(other.get("uses", "")).startswith("actions/upload-artifact@"):
                for hit in _included(ctx.root, ctx.expand(str(other["with"]["path"]))):
                    if hit.is_dir():
                        shutil.rmtree(hit, ignore_errors=True)
                    else:
                        hit.unlink()
        done = f"  {label}: the working tree is the checkout (outputs of earlier jobs cleared)"
    elif uses.startswith("actions/upload-artifact@"):
        w = step.get("with", {})
        dest = ctx.out / "artifacts" / ctx.expand(str(w["name"]))
        copied = upload(ctx.root, ctx.expand(str(w["path"])), dest)
        done = f"  {label}: copied {', '.join(copied)} to {dest}" if copied else f"  {label}: nothing to copy"
    elif uses.startswith("actions/download-artifact@"):
        w = {k: ctx.expand(str(v)) for k, v in (step.get("with") or {}).items()}
        dest = ctx.root / w.get("path", ".")
        got = download(ctx.out / "artifacts", dest, w)
        done = f"  {label}: copied the rehearsed artifacts {', '.join(got) or '(none)'} to {dest}"
    log.append(done)
    ctx.record(name, label, "done" if outcome == "not rehearsed" and not done.startswith("  not") else outcome)
    return True


def upload(root: Path, text: str, dest: Path) -> list[str]:
    """upload-artifact's layout (relative to what matched has in common); the paths matched."""
    found = _included(root, text)
    if not found:
        return []
    base = Path(os.path.commonpath([str(hit if hit.is_dir() else hit.parent) for hit in found]))
    lines = [line.strip() for line in text.splitlines()]
    excluded = {hit for line in lines if line.startswith("!") for hit in _matches(root, line[1:].strip())}
    for hit in found:
        for one in sorted(hit.rglob("*")) if hit.is_dir() else [hit]:
            if one.is_file() and not any(one == x or x in one.parents for x in excluded):
                (dest / one.relative_to(base)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(one, dest / one.relative_to(base))
    return [str(hit.relative_to(root)) for hit in found]


def _included(root: Path, text: str) -> list[Path]:
    """What an upload's ``path:`` lines name, its ``!`` exclusions aside."""
    lines = [line.strip() for line in text.splitlines()]
    return [hit for line in lines if not line.startswith("!") for hit in _matches(root, line)]


def _matches(root: Path, pattern: str) -> list[Path]:
    """What one ``path:`` line names in the working tree (a glob where it has one)."""
    if not pattern.strip(". /"):
        return []  # never the working tree itself
    if any(c in pattern for c in "*?["):
        return sorted(root.glob(pattern))
    return [root / pattern] if (root / pattern).exists() else []


def download(store: Path, dest: Path, given: dict[str, str]) -> list[str]:
    """download-artifact's layout; the artifacts copied."""
    names = sorted(p.name for p in store.iterdir() if p.is_dir()) if store.is_dir() else []
    if "name" in given:
        names = [n for n in names if n == given["name"]]
        flat = True
    else:
        pattern = given.get("pattern", "*")
        names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        flat = given.get("merge-multiple", "false").lower() == "true"
    for n in names:
        shutil.copytree(store / n, dest if flat else dest / n, dirs_exist_ok=True)
    return names


def run_action(
    name: str, step: dict[str, Any], ctx: Context, skip: set[str], log: list[str], where: Path | None = None
) -> bool:
    """A local composite action's steps, its inputs the step's ``with:`` over the action's defaults."""
    where = where or ctx.root / step["uses"]
    path = where / "action.yml"
    if not path.is_file():
        raise SystemExit(f"rehearsal: {step['uses']}: no action.yml at {path}; check --local-action")
    action = yaml.safe_load(path.read_text(encoding="utf-8"))
    given = {k: ctx.expand(str(v)) for k, v in (step.get("with") or {}).items()}
    unknown = sorted(set(given) - set(action["inputs"]))
    if unknown:
        raise SystemExit(f"rehearsal: {step['uses']}: {path} has no input {', '.join(unknown)}")
    inputs = {
        k: given[k] if k in given else ctx.expand(str((spec or {}).get("default", "")))
        for k, spec in action["inputs"].items()
    }
    outer = ctx.inputs, ctx.action_path
    ctx.inputs, ctx.action_path = inputs, str(where.resolve())
    log.append(f"  {name}: the steps of {path}")
    try:
        return run_job(name, {"steps": action["runs"]["steps"]}, ctx, skip, log)
    finally:
        ctx.inputs, ctx.action_path = outer


def _local_actions(given: list[str]) -> dict[str, Path]:
    """``--local-action OWNER/NAME=PATH`` values as OWNER/NAME -> PATH, each checked."""
    found: dict[str, Path] = {}
    for value in given:
        name, eq, path = value.partition("=")
        if not eq or not re.fullmatch(r"[\w.-]+/[\w.-]+", name) or not path:
            raise SystemExit(f"rehearsal: --local-action {value!r}: write it OWNER/NAME=PATH")
        if not (Path(path) / "action.yml").is_file():
            raise SystemExit(f"rehearsal: --local-action {value!r}: no action.yml in {path}")
        found[name] = Path(path).resolve()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", type=Path, default=Path(".github/workflows/gpu.yml"))
    parser.add_argument("--gpu", help="rehearse only matrix entries whose gpu is this")
    parser.add_argument("--skip", action="append", default=[], help="leave out the step with this name")
    parser.add_argument("--out", type=Path, default=Path("rehearsal"))
    parser.add_argument(
        "--event", default="push", choices=["push", "pull_request", "workflow_dispatch"], help="the event to rehearse"
    )
    parser.add_argument("--base", default="HEAD~1", help="with --event pull_request: the base commit (a git ref)")
    parser.add_argument(
        "--local-action",
        action="append",
        default=[],
        metavar="OWNER/NAME=PATH",
        help="run `uses: OWNER/NAME@REF` (any ref) as the composite action.yml at PATH (repeatable)",
    )
    parser.add_argument("--dry-run", action="store_true", help="run nothing; list the steps a rehearsal would run")
    args = parser.parse_args()
    root = Path.cwd()
    local_actions = _local_actions(args.local_action)
    if not args.workflow.is_file():
        raise SystemExit(f"rehearsal: no workflow file {args.workflow} in {root}; pass --workflow FILE")
    records: list[dict[str, Any]] = []
    base = ""

    def context(out: Path, matrix: dict[str, Any], env: dict[str, Any]) -> Context:
        ctx = Context(root, out, matrix, {}, args.event, base)
        ctx.env = {k: ctx.expand(str(v)) for k, v in env.items()}
        ctx.local_actions, ctx.dry_run, ctx.records = local_actions, args.dry_run, records
        return ctx

    if args.event == "pull_request":
        done = subprocess.run(
            ["git", "rev-parse", "--verify", f"{args.base}^{{commit}}"], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"rehearsal: --base {args.base!r} is not a commit here: {done.stderr.strip()}")
        base = done.stdout.strip()
    wf = yaml.safe_load(args.workflow.read_text())
    jobs: dict[str, Any] = wf["jobs"]
    matrix_jobs = [n for n, j in jobs.items() if "matrix" in j.get("strategy", {})]
    other_jobs = [n for n in jobs if n not in matrix_jobs]
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    log: list[str] = []
    all_ok = True
    for name in matrix_jobs:
        job = jobs[name]
        matrix = job["strategy"]["matrix"]
        keys = [k for k in matrix if k not in ("include", "exclude")]
        for values in itertools.product(*(matrix[k] for k in keys)):
            combo = dict(zip(keys, values, strict=True))
            if args.gpu and combo.get("gpu") not in (None, args.gpu):
                continue
            out = args.out / "-".join(str(v) for v in values)
            out.mkdir(parents=True)
            ctx = context(out, combo, job.get("env", {}))
            ctx.out = args.out  # artifacts of every combination land in one place, as on GitHub
            entries: list[str] = []
            ok = run_job(name, job, ctx, set(args.skip), entries)
            log += [f"{name} {combo}: {'passed' if ok else 'FAILED'}", *entries]
            all_ok = all_ok and ok
    for name in other_jobs:
        ctx = context(args.out, {}, jobs[name].get("env", {}))
        entries = []
        ok = run_job(name, jobs[name], ctx, set(args.skip), entries)
        log += [f"{name}: {'passed' if ok else 'FAILED'}", *entries]
        all_ok = all_ok and ok
    (args.out / "steps.json").write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    print("\ndry run (nothing ran)" if args.dry_run else "")
    print("rehearsal of", args.workflow, "for a", args.event, f"(base {base[:7]})" if base else "")
    print("\n".join(log))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
