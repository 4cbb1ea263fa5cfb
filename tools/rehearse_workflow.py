"""Rehearse the GPU workflow on any GPU machine: run its steps, in order, as GitHub would.

    python tools/rehearse_workflow.py [--workflow .github/workflows/gpu.yml] [--gpu h200]
                                      [--event push|pull_request] [--base REF]
                                      [--skip STEP]... [--out DIR]

Reads the workflow file itself, so the commands rehearsed are the ones CI runs. For every
matrix combination of the profiling job whose ``gpu`` is this machine's (``--gpu``, default
all), it runs each step's ``run:`` script with bash in the repository root, with the job's env,
the matrix values substituted for ``${{ matrix.X }}``, and GitHub's files (``GITHUB_PATH``,
``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``) stood in by local ones. Steps run while the job
succeeds; ``if: always()`` steps run regardless; ``if:`` conditions made of ``matrix.KEY == VALUE``,
``github.event_name == 'EVENT'`` (or ``!=``) joined by ``&&`` are evaluated, the event being
``--event`` (default ``push``). ``--event pull_request`` rehearses a pull request whose base
commit (``github.event.pull_request.base.sha``) is ``--base`` (default ``HEAD~1``, resolved with
git). Of the ``uses:`` steps, checkout is the
working tree itself, upload-artifact copies its path to DIR/artifacts/NAME, and a local action
(``uses: ./``, fuseci's own ``action.yml``) runs its steps the same way, with its inputs (the
step's ``with:`` over the action's defaults) for ``${{ inputs.X }}``; the others (the caches)
are listed as not rehearsed. Then the other jobs run, download-artifact copying those artifacts
where the workflow puts them.
``--skip`` leaves out a step by name (say, an install step on a machine without network),
which the summary lists. Exit status: 0 when every job rehearsed as it would pass on GitHub.
"""

from __future__ import annotations

import argparse
import itertools
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
        self,
        root: Path,
        out: Path,
        matrix: dict[str, Any],
        env: dict[str, str],
        event: str = "push",
        base: str = "",
    ) -> None:
        self.root, self.out, self.matrix, self.env = root, out, matrix, env
        self.event, self.base = event, base
        self.inputs: dict[str, str] = {}  # a local action's inputs, while its steps run
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
                if self.event != "pull_request":
                    return ""
                return self.base
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
            }
        )
        return env


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
    """A step's ``if:`` made of terms joined by ``&&`` (``matrix.KEY == VALUE``,
    ``github.event_name == 'EVENT'`` or ``!=``, ``always()``), evaluated against this
    combination and event; None when any term is another kind (the step then runs)."""
    if "||" in condition:
        return None
    values = [_term(t, matrix, event, inputs) for t in condition.split("&&")]
    if any(v is None for v in values):
        return None
    return all(values)


def run_job(name: str, job: dict[str, Any], ctx: Context, skip: set[str], log: list[str]) -> bool:
    ok = True
    for i, step in enumerate(job["steps"]):
        label = step.get("name") or step.get("uses") or f"step {i + 1}"
        condition = str(step.get("if", "success()"))
        always = "always()" in condition
        if not ok and not always:
            log.append(f"  skipped (an earlier step failed): {label}")
            continue
        if condition_holds(condition, ctx.matrix, ctx.event, ctx.inputs) is False:
            log.append(f"  skipped (if: {condition}): {label}")
            continue
        if label in skip:
            log.append(f"  SKIPPED BY REQUEST: {label}")
            continue
        if "uses" in step:
            uses = step["uses"]
            if uses.startswith("actions/checkout@"):
                # A fresh checkout holds none of an earlier job's outputs: clear what this job uploads.
                for other in job["steps"]:
                    if str(other.get("uses", "")).startswith("actions/upload-artifact@"):
                        shutil.rmtree(ctx.root / ctx.expand(str(other["with"]["path"])), ignore_errors=True)
                log.append(f"  {label}: the working tree is the checkout (outputs of earlier jobs cleared)")
            elif uses.startswith("actions/upload-artifact@"):
                w = step.get("with", {})
                dest = ctx.out / "artifacts" / ctx.expand(str(w["name"]))
                src = ctx.root / ctx.expand(str(w["path"]))
                if src.exists():
                    shutil.copytree(src, dest, dirs_exist_ok=True)
                log.append(f"  {label}: copied {src} to {dest}" if src.exists() else f"  {label}: nothing at {src}")
            elif uses.startswith("./"):
                ok = run_action(f"{name} / {label}", step, ctx, skip, log) and ok
                continue
            elif uses.startswith("actions/download-artifact@"):
                dest = ctx.root / ctx.expand(str(step.get("with", {}).get("path", ".")))
                shutil.copytree(ctx.out / "artifacts", dest, dirs_exist_ok=True)
                log.append(f"  {label}: copied the rehearsed artifacts to {dest}")
            else:
                log.append(f"  not rehearsed: {label} ({uses})")
            continue
        script = ctx.expand(step["run"])
        start = time.monotonic()
        print(f"== {name} / {label}", flush=True)
        env = ctx.process_env()
        env.update({k: ctx.expand(str(v)) for k, v in step.get("env", {}).items()})  # the step's own
        rc = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=ctx.root, env=env, check=False).returncode
        log.append(f"  {'ok  ' if rc == 0 else 'FAIL'} rc={rc} {time.monotonic() - start:6.1f}s  {label}")
        ok = ok and rc == 0
    return ok


def run_action(name: str, step: dict[str, Any], ctx: Context, skip: set[str], log: list[str]) -> bool:
    """A local composite action's steps, with its inputs: the step's ``with:`` over the
    action's defaults, each expanded where the step stands."""
    action = yaml.safe_load((ctx.root / step["uses"] / "action.yml").read_text(encoding="utf-8"))
    given = {k: ctx.expand(str(v)) for k, v in (step.get("with") or {}).items()}
    inputs = {
        k: given[k] if k in given else ctx.expand(str((spec or {}).get("default", "")))
        for k, spec in action["inputs"].items()
    }
    outer = ctx.inputs
    ctx.inputs = inputs
    log.append(f"  {name}: the steps of {step['uses']}action.yml")
    try:
        return run_job(name, {"steps": action["runs"]["steps"]}, ctx, skip, log)
    finally:
        ctx.inputs = outer


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
    args = parser.parse_args()
    root = Path.cwd()
    base = ""
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
            ctx = Context(root, out, combo, {}, args.event, base)
            ctx.env = {k: ctx.expand(str(v)) for k, v in job.get("env", {}).items()}
            ctx.out = args.out  # artifacts of every combination land in one place, as on GitHub
            entries: list[str] = []
            ok = run_job(name, job, ctx, set(args.skip), entries)
            log += [f"{name} {combo}: {'passed' if ok else 'FAILED'}", *entries]
            all_ok = all_ok and ok
    for name in other_jobs:
        ctx = Context(root, args.out, {}, {}, args.event, base)
        ctx.env = {k: ctx.expand(str(v)) for k, v in jobs[name].get("env", {}).items()}
        entries = []
        ok = run_job(name, jobs[name], ctx, set(args.skip), entries)
        log += [f"{name}: {'passed' if ok else 'FAILED'}", *entries]
        all_ok = all_ok and ok
    print("\nrehearsal of", args.workflow, "for a", args.event, f"(base {base[:7]})" if base else "")
    print("\n".join(log))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
