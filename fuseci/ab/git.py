"""The two trees of ``fuseci ab``: the repository's root, commits named by refs, and temporary
git worktrees that are always removed.

A worktree is made with ``git worktree add --detach`` in a directory of its own under the
system's temporary directory, and removed (``git worktree remove --force``, the directory
deleted, ``git worktree prune``) however the block ends: normally, on an error, on Ctrl-C, or on
the SIGTERM that a cancelled CI job sends (turned into :class:`Cancelled` while a worktree is
held, in the main thread). A run killed outright leaves a directory in the temporary directory;
its registration is pruned by the next ``fuseci ab`` (``git worktree prune`` runs first).
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from fuseci.errors import FuseciError

log = logging.getLogger(__name__)

#: How long one git command may take (seconds); a worktree of a large repository takes a few.
GIT_TIMEOUT_S = 600.0

#: What a temporary worktree's directory is called, under the temporary directory.
WORKTREE_PREFIX = "fuseci-ab-"


class GitError(FuseciError):
    """git is missing, this is not a repository, a ref names no commit, or a worktree could not
    be made (exit 3)."""


class Cancelled(BaseException):
    """SIGTERM arrived while a worktree was held: unwind, removing it (exit 143 as the signal's)."""


def _git(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` in ``cwd``; the finished process (its status unchecked).

    Raises:
        GitError: git is not installed, or did not finish within :data:`GIT_TIMEOUT_S`.
    """
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise GitError(
            f"git is not installed (or not on PATH), and fuseci ab needs it to {what}: install git and run again"
        ) from None
    except subprocess.TimeoutExpired:
        raise GitError(f"`git {' '.join(args)}` did not finish within {GIT_TIMEOUT_S:g} s (to {what})") from None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"


def repo_root(cwd: Path) -> Path:
    """The root of the git working tree ``cwd`` is in.

    Raises:
        GitError: git is missing, or ``cwd`` is not inside a git working tree.
    """
    done = _git(["rev-parse", "--show-toplevel"], cwd, "find the repository")
    if done.returncode != 0 or not done.stdout.strip():
        raise GitError(
            f"{cwd} is not inside a git working tree ({_first_line(done.stderr)}); fuseci ab compares two commits of "
            "one repository: run it in a clone (in CI: actions/checkout with fetch-depth: 0)"
        )
    return Path(done.stdout.strip())


def commit_of(root: Path, ref: str, role: str) -> str:
    """The full hash of the commit ``ref`` names in the repository at ``root``.

    Raises:
        GitError: ``ref`` names no commit there (not fetched, a typo, a tree or blob).
    """
    if not ref or ref.startswith("-") or not ref.isprintable():
        raise GitError(f"{role} {ref!r} is not a git ref: pass a branch, tag or commit hash")
    done = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], root, f"read {role}")
    sha = done.stdout.strip()
    if done.returncode != 0 or not sha:
        raise GitError(
            f"{role} {ref!r} is not a commit of the repository at {root}: pass a branch, tag or commit hash that "
            "`git rev-parse` knows there (a shallow clone may lack it: fetch it, or check out with fetch-depth: 0)"
        )
    return sha.lower()


def short(sha: str) -> str:
    """A commit hash as people read it (7 characters)."""
    return sha[:7]


def prune(root: Path) -> None:
    """Forget the worktrees whose directories are gone (a run that was killed); never raises."""
    try:
        _git(["worktree", "prune"], root, "prune worktrees")
    except GitError as exc:
        log.info("git worktree prune: %s", exc)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Cancelled(signum)


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """While held (in the main thread only), SIGTERM raises :class:`Cancelled`, so that the
    worktrees are removed on the way out; the old handler comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def worktree(root: Path, sha: str) -> Iterator[Path]:
    """A detached worktree of commit ``sha`` of the repository at ``root``, in a new temporary
    directory, for the block; removed afterwards however the block ends.

    Raises:
        GitError: the worktree could not be made (the message has git's reason).
    """
    holder = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX))
    path = holder / "tree"
    try:
        with _sigterm_unwinds():
            done = _git(["worktree", "add", "--detach", "--quiet", str(path), sha], root, f"check out {short(sha)}")
            if done.returncode != 0:
                raise GitError(
                    f"cannot check out {short(sha)} into a temporary worktree ({_first_line(done.stderr)}); "
                    f"run `git worktree prune` in {root} and check that {holder.parent} is writable"
                )
            log.info("worktree of %s at %s", short(sha), path)
            yield path
    finally:
        try:
            _git(["worktree", "remove", "--force", str(path)], root, "remove the temporary worktree")
        except GitError as exc:
            log.warning("%s", exc)
        shutil.rmtree(holder, ignore_errors=True)
        prune(root)
