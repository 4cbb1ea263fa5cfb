"""Rehearse docs/ADOPT.md on a GPU machine: the guide's project, its `fuseci init`, and the
workflow that init wrote, run for a push and for a pull request as GitHub would run them.

    python3 tools/rehearse_adopt.py --out DIR [--dry-run]

1. Builds the guide's project in a new git repository, DIR/repo: writes each file the guide
   shows and runs each of its `$` commands (`fuseci init`, `fuseci check`, the refused second
   `fuseci init`, git) with the `fuseci` on PATH, checking each exit status and output against
   the guide (tools/adopt_guide.py reads it, as tests/test_adopt.py does).
2. Rehearses the written workflow for a push (tools/rehearse_workflow.py), its Action
   (`uses: OWNER/fuseci@REF`) being this checkout's action.yml (`--local-action`) with its
   `Set up fuseci` step skipped: the fuseci on PATH, this checkout's, is what the Action runs.
   The push is judged against the stored baselines: none yet, so NEW, exit 0.
3. Commits an edit of the fused kernel (its block size) and rehearses the workflow for a pull
   request whose base is the guide's commit: `fuseci ab` measures both sides.

Prints a table (step, exit, seconds), also written to DIR/summary.md; each rehearsal's log and
artifacts are in DIR/push and DIR/pull_request. ``--dry-run`` does steps 1 and 3 (no GPU needed)
and lists the workflow steps it would run. Needs git, bash, and this checkout's fuseci on PATH
(``python3 -m pip install -e .``, or offline ``--no-index --no-build-isolation`` with local
wheels); without ``--dry-run``, also PyTorch and Triton with a CUDA GPU in fuseci's Python, and
ncu (the Action's Doctor step checks the machine). Exit status: 0 when every step passed, 1 when
one failed, 3 when something it needs is missing (one line saying what and how to fix it).
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
    """The ``fuseci`` executable to run, after checking what the rehearsal needs.

    Raises:
        Missing: git, bash or fuseci is not on PATH; the fuseci there is another version than
            this checkout's; the Action lacks its setup step; (not dry run) no torch, Triton or GPU.
    """
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
    """The guide's files and commands, in order, in a new repository.

    Raises:
        Missing: a command exits or prints other than the guide shows.
    """
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    rows: list[Row] = []
    for step in adopt_guide.steps(adopt_guide.GUIDE.read_text(encoding="utf-8")):
        if step.path:
            adopt_guide.write(repo, step)
            continue
        if step.command[:2] == ("fuseci", "init") and "--action" not in step.command:
            # This checkout's fuseci is an editable install, which names no Action: name one,
            # which the rehearsal then runs as this checkout's action.yml (--local-action).
            step = dataclasses.replace(step, command=(*step.command, "--action", REHEARSED_ACTION))
        done = adopt_guide.run(step, repo, fuseci)
        rows.append((f"guide: {step.label}", done.returncode, done.seconds, not done.problem()))
        if done.problem():
            raise Missing(f"docs/ADOPT.md, `{step.label}`: {done.problem()}")
    return rows


def written_action(repo: Path) -> tuple[Path, str]:
    """The workflow ``fuseci init`` wrote (relative to ``repo``) and its Action's OWNER/NAME.

    Raises:
        Missing: not one workflow, or not one Action step in it.
    """
    flows = sorted((repo / ".github" / "workflows").glob("*.yml"))
    if len(flows) != 1:
        raise Missing(f"{repo}: {len(flows)} workflows in .github/workflows, where fuseci init writes one")
    steps = [s for job in yaml.safe_load(flows[0].read_text())["jobs"].values() for s in job["steps"]]
    used = [str(s["uses"]) for s in steps if "uses" in s and not str(s["uses"]).startswith(("actions/", "./"))]
    if len(used) != 1 or "@" not in used[0]:
        raise Missing(f"{flows[0]}: uses {used}, where fuseci init writes one OWNER/fuseci@REF")
    return flows[0].relative_to(repo), used[0].partition("@")[0]


def edit_kernel(repo: Path) -> Row:
    """Commit the pull request's change to the fused kernel.

    Raises:
        Missing: the guide's kernel no longer holds what the edit replaces.
    """
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
    """tools/rehearse_workflow.py on the written workflow for ``event``; a row per step that ran
    (would run, with ``dry_run``), skipped by request, or failed."""
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
