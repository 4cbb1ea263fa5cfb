"""Rehearse docs/ADOPT.md on a GPU machine: the guide's project, its `fuseci init`, and the
workflow that init wrote, run for a push and for a pull request as GitHub would run them.

    python3 tools/rehearse_adopt.py --out DIR [--dry-run]

Follows the guide in a new git repository, DIR/repo (tools/adopt_guide.py reads it, as
tests/test_adopt.py does), rehearses the workflow it wrote for a push (tools/rehearse_workflow.py,
this checkout's action.yml standing for its Action), then commits an edit of the fused kernel
and rehearses a pull request. Prints a table (step, exit, seconds), also written to
DIR/summary.md. ``--dry-run`` needs no GPU: it lists the workflow steps it would run. Exit
status: 0 when every step passed, 1 when one failed, 3 when something it needs is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import adopt_guide
import yaml

CHECKOUT = Path(__file__).resolve().parent.parent
#: The Action ``fuseci init`` names in the rehearsal: this checkout's action.yml stands for it.
REHEARSED_ACTION = "rehearsal/fuseci@local"
#: The Action's step that installs fuseci from its tag (network): skipped, the fuseci on PATH runs.
SETUP_STEP = "Set up fuseci"
#: The pull request's change: the fused kernel's block size, in the guide's mykernels/ops.py.
KERNEL = "mykernels/ops.py"
EDIT = (("BLOCK=1024", "BLOCK=2048"), ("triton.cdiv(n, 1024)", "triton.cdiv(n, 2048)"))
#: A row of the table: the step, its exit status, its seconds, and whether it went as it should.
Row = tuple[str, int | None, float | None, bool]


class Missing(Exception):
    """Something the rehearsal needs is not there; the message says what and how to fix it."""


def _version(checkout: Path) -> str:
    m = re.search(r'^__version__ = "([^"]+)"', (checkout / "fuseci" / "__init__.py").read_text(), re.M)
    if m is None:
        raise Missing(f"{checkout / 'fuseci' / '__init__.py'}: no __version__; run this from a fuseci checkout")
    return m.group(1)


def preflight(checkout: Path, dry_run: bool) -> str:
    """The ``fuseci`` executable to run, after checking what the rehearsal needs (else Missing)."""
    for tool in ("git", "bash"):
        if shutil.which(tool) is None:
            raise Missing(f"no {tool} on PATH; install it")
    fuseci = shutil.which("fuseci")
    install = f"install this checkout: python3 -m pip install -e {checkout}"
    if fuseci is None:
        raise Missing(f"no fuseci on PATH; {install}")
    said = subprocess.run([fuseci, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if said != f"fuseci {_version(checkout)}":
        raise Missing(f"{fuseci} says {said!r}, this checkout is fuseci {_version(checkout)}; {install}")
    action = yaml.safe_load((checkout / "action.yml").read_text(encoding="utf-8"))
    if SETUP_STEP not in [s.get("name") for s in action["runs"]["steps"]]:
        raise Missing(f"{checkout / 'action.yml'} has no step {SETUP_STEP!r}; update SETUP_STEP here")
    if not dry_run:
        python = _script_python(fuseci)
        probe = "import torch, triton; assert torch.cuda.is_available(), 'no CUDA device'"
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            raise Missing(f"{python}: the guide's kernels need PyTorch and Triton with a CUDA GPU ({last})")
    return fuseci


def _script_python(script: str) -> str:
    """The Python a console script runs with (its ``#!`` line), else this one."""
    first = Path(script).read_bytes()[:256].split(b"\n")[0].decode(errors="replace")
    return first[2:].strip() if first.startswith("#!") and "python" in first else sys.executable


def follow_guide(repo: Path, fuseci: str) -> list[Row]:
    """The guide's files and commands, in order, in a new repository (Missing where one differs)."""
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    rows: list[Row] = []
    for step in adopt_guide.steps(adopt_guide.GUIDE.read_text(encoding="utf-8")):
        if step.path:
            adopt_guide.write(repo, step)
            continue
        if step.command[:2] == ("fuseci", "init") and "--action" not in step.command:
            # An editable install names no Action: name one, rehearsed as this checkout's action.yml.
            step = dataclasses.replace(step, command=(*step.command, "--action", REHEARSED_ACTION))
        done = adopt_guide.run(step, repo, fuseci)
        rows.append((f"guide: {step.label}", done.returncode, done.seconds, not done.problem()))
        if done.problem():
            raise Missing(f"docs/ADOPT.md, `{step.label}`: {done.problem()}")
    return rows


def written_action(repo: Path) -> tuple[Path, str]:
    """The workflow ``fuseci init`` wrote (relative to ``repo``) and its Action's OWNER/NAME."""
    flows = sorted((repo / ".github" / "workflows").glob("*.yml"))
    if len(flows) != 1:
        raise Missing(f"{repo}: {len(flows)} workflows in .github/workflows, where fuseci init writes one")
    steps = [s for job in yaml.safe_load(flows[0].read_text())["jobs"].values() for s in job["steps"]]
    used = [str(s["uses"]) for s in steps if "uses" in s and not str(s["uses"]).startswith(("actions/", "./"))]
    if len(used) != 1 or "@" not in used[0]:
        raise Missing(f"{flows[0]}: uses {used}, where fuseci init writes one OWNER/fuseci@REF")
    return flows[0].relative_to(repo), used[0].partition("@")[0]


def edit_kernel(repo: Path) -> Row:
    """Commit the pull request's change to the fused kernel."""
    path = repo / KERNEL
    text = path.read_text(encoding="utf-8")
    for old, new in EDIT:
        if text.count(old) != 1:
            raise Missing(f"docs/ADOPT.md's {KERNEL} holds {old!r} {text.count(old)} times; update EDIT here")
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    start = time.monotonic()
    for command in (("git", "add", KERNEL), ("git", "commit", "--quiet", "-m", "mykernels: a larger block")):
        done = adopt_guide.run(adopt_guide.Step(command=command), repo, "")
        if done.returncode != 0:
            raise Missing(f"`{done.step.label}` in {repo} exit {done.returncode}: {done.stderr.strip()}")
    return ("pull request: edit and commit the fused kernel", 0, time.monotonic() - start, True)


def rehearse(repo: Path, workflow: Path, action: str, event: str, out: Path, dry_run: bool) -> list[Row]:
    """tools/rehearse_workflow.py on the written workflow for ``event``; a row per step shown."""
    argv = [sys.executable, str(CHECKOUT / "tools" / "rehearse_workflow.py"), "--workflow", str(workflow)]
    argv += ["--local-action", f"{action}={CHECKOUT}", "--skip", SETUP_STEP, "--event", event, "--out", str(out)]
    argv += (["--base", "HEAD~1"] if event == "pull_request" else []) + (["--dry-run"] if dry_run else [])
    print(f"== {event}: {' '.join(argv[1:])}", flush=True)
    done = subprocess.run(argv, cwd=repo, env=adopt_guide.environment(os.environ), check=False)
    steps = out / "steps.json"
    if not steps.is_file():
        return [
            (f"{event}: tools/rehearse_workflow.py (no steps.json: see its output above)", done.returncode, None, False)
        ]
    shown = ("ok", "FAIL", "would run", "SKIPPED BY REQUEST")
    rows: list[Row] = [
        (f"{event}: {r['job']} / {r['step']} ({r['outcome']})", r["rc"], r["seconds"], r["outcome"] != "FAIL")
        for r in json.loads(steps.read_text(encoding="utf-8"))
        if r["outcome"] in shown
    ]
    if done.returncode != 0:
        rows.append((f"{event}: the rehearsal", done.returncode, None, False))
    return rows


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table: step, exit, seconds."""
    lines = ["| step | exit | seconds |", "|---|---|---|"]
    for step, rc, seconds, _ in rows:
        cell = step.replace("|", "\\|")
        lines.append(f"| {cell} | {'' if rc is None else rc} | {'' if seconds is None else f'{seconds:.1f}'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where the repository, logs and table go")
    parser.add_argument("--dry-run", action="store_true", help="follow the guide; list the workflow's steps")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    try:
        fuseci = preflight(CHECKOUT, args.dry_run)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        repo = out / "repo"
        rows = follow_guide(repo, fuseci)
        workflow, action = written_action(repo)
        rows += rehearse(repo, workflow, action, "push", out / "push", args.dry_run)
        rows.append(edit_kernel(repo))
        rows += rehearse(repo, workflow, action, "pull_request", out / "pull_request", args.dry_run)
    except Missing as exc:
        print(f"rehearse_adopt: error: {exc}", file=sys.stderr)
        return 3
    summary = table(rows)
    (out / "summary.md").write_text(summary, encoding="utf-8")
    print(("\ndry run: the workflow's steps were listed, not run\n" if args.dry_run else "\n") + summary)
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
