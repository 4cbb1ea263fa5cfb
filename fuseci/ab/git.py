"""The two trees of ``fuseci ab``: the repository's root, commits named by refs, and temporary
git worktrees that are always removed (:func:`worktree`), or, where a killed run left one, by
the next run in the repository (:func:`prune`)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from fuseci.errors import FuseciError
from fuseci.files.locks import file_lock, is_held
from fuseci.measure.process import cancel_on_signals

log = logging.getLogger(__name__)

#: How long one git command may take (seconds); a worktree of a large repository takes a few.
GIT_TIMEOUT_S = 600.0

#: What a temporary worktree's directory is called, under the temporary directory.
WORKTREE_PREFIX = "fuseci-ab-"
#: The lock file its holder keeps locked beside it while the worktree lives.
OWNER_LOCK = "owner.lock"
_HOLDER = re.compile(re.escape(WORKTREE_PREFIX) + r"[a-z0-9_]{8}")


class GitError(FuseciError):
    """git is missing, this is not a repository, a ref names no commit, or no worktree was made (exit 3)."""


def _git(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` in ``cwd``, status unchecked (GitError: no git, or over :data:`GIT_TIMEOUT_S`)."""
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
    return next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")


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


#: git's modes of a symbolic link and of a submodule (a gitlink).
LINK_MODE, SUBMODULE_MODE = "120000", "160000"


@dataclass(frozen=True, slots=True)
class PathChange:
    """One path two trees of the repository differ in."""

    path: str
    """Relative to the repository's root, ``/``-separated (an ignored directory git lists whole: no files)."""
    kind: str
    """``modified``, ``added``, ``deleted``; ``mode`` (the mode differs), ``link`` or ``submodule`` (one on
    either side); ``untracked`` and ``ignored`` (files of the working tree that no commit holds)."""

    @property
    def plain(self) -> bool:
        """Whether it is a regular file's content alone (what a fingerprint's hashes can see)."""
        return self.kind in ("modified", "added", "deleted", "untracked", "ignored")


_STATUS = {"A": "added", "D": "deleted"}


def _raw_changes(raw: str) -> list[PathChange]:
    """The changes of ``git diff --raw -z``: ``:old new sha sha S`` then the path, NUL-separated."""
    fields = raw.split("\0")
    out: list[PathChange] = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        old, new, _, _, status = meta.lstrip(":").split(" ")[:5]
        modes = {old, new}
        if SUBMODULE_MODE in modes:
            kind = "submodule"
        elif LINK_MODE in modes:
            kind = "link"
        elif "000000" not in modes and old != new:
            kind = "mode"
        else:
            kind = _STATUS.get(status[:1], "modified")
        out.append(PathChange(path, kind))
    return out


def changes(root: Path, base: str, head: str | None) -> list[PathChange]:
    """Every path the commit ``base`` and ``head`` (None: the working tree at ``root``, untracked and ignored
    files included) differ in; renames as a deletion and an addition.

    Raises:
        GitError: git could not list them.
    """
    diff = ["diff", "--raw", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none", base]
    listings: list[tuple[list[str], str | None]] = [(diff + ([head] if head else []), None)]
    if head is None:
        others = ["ls-files", "-z", "--others", "--exclude-standard"]
        listings += [(others, "untracked"), ([*others, "--ignored", "--directory"], "ignored")]
    out: list[PathChange] = []
    for args, kind in listings:
        done = _git(args, root, "list what changed between the sides")
        if done.returncode != 0:
            raise GitError(f"`git {' '.join(args)}` failed: {_first_line(done.stderr)}")
        if kind is None:
            out += _raw_changes(done.stdout)
        else:
            out += [PathChange(p.rstrip("/"), kind) for p in done.stdout.split("\0") if p]
    return out


def short(sha: str) -> str:
    """A commit hash as people read it (7 characters)."""
    return sha[:7]


def prune(root: Path) -> list[Path]:
    """Remove (with a warning each) and return the temporary worktrees of killed ``fuseci ab`` runs (their
    lock files unlocked), and forget registrations whose directories are gone. Never raises."""
    removed: list[Path] = []
    try:
        listed = _git(["worktree", "list", "--porcelain"], root, "list the worktrees")
        for tree in _stale(listed.stdout if listed.returncode == 0 else ""):
            done = _git(["worktree", "remove", "--force", "--force", str(tree)], root, "remove a stale worktree")
            if done.returncode != 0:  # a git that cannot remove a locked one: unlock it, prune below
                _git(["worktree", "unlock", str(tree)], root, "unlock a stale worktree")
            shutil.rmtree(tree.parent, ignore_errors=True)
            removed.append(tree)
            log.warning("removed the temporary worktree %s that a stopped fuseci ab left", tree)
        _git(["worktree", "prune"], root, "prune worktrees")
    except GitError as exc:
        log.info("git worktree prune: %s", exc)
    return removed


def _stale(porcelain: str) -> list[Path]:
    """The worktrees ``git worktree list --porcelain`` names that a killed ``fuseci ab`` left: in a holder
    directory of its making in the temporary directory, owned by this user, its lock file not held."""
    temporary = Path(os.path.realpath(tempfile.gettempdir()))
    found = []
    for line in porcelain.splitlines():
        if not line.startswith("worktree "):
            continue
        tree = Path(line[len("worktree ") :])
        holder = tree.parent
        if tree.name != "tree" or not _HOLDER.fullmatch(holder.name):
            continue
        if Path(os.path.realpath(holder.parent)) != temporary or not _ours(holder):
            continue
        if not is_held(holder / OWNER_LOCK):
            found.append(tree)
    return found


def _ours(holder: Path) -> bool:
    """Whether ``holder`` is missing (removed from under git) or this user's directory."""
    try:
        st = os.lstat(holder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


@contextmanager
def worktree(root: Path, sha: str) -> Iterator[Path]:
    """A detached worktree of commit ``sha`` in a new temporary directory for the block, removed however it
    ends (SIGTERM, SIGHUP too); :data:`OWNER_LOCK` is locked meanwhile, so another run's :func:`prune` spares it.

    Raises:
        GitError: the worktree could not be made (the message has git's reason).
    """
    holder = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX))
    path = holder / "tree"
    try:
        with _owned(holder):
            try:
                with cancel_on_signals():
                    done = _git(
                        ["worktree", "add", "--detach", "--quiet", str(path), sha], root, f"check out {short(sha)}"
                    )
                    if done.returncode != 0:
                        raise GitError(
                            f"cannot check out {short(sha)} into a temporary worktree ({_first_line(done.stderr)}); "
                            f"run `git worktree prune` in {root} and check that {holder.parent} is writable"
                        )
                    log.info("worktree of %s at %s", short(sha), path)
                    yield path
            finally:
                _remove(root, path)
    finally:
        shutil.rmtree(holder, ignore_errors=True)
        try:
            _git(["worktree", "prune"], root, "prune worktrees")  # its registration, should removing it have failed
        except GitError as exc:
            log.info("git worktree prune: %s", exc)


@contextmanager
def _owned(holder: Path) -> Iterator[None]:
    """Hold ``holder``'s lock file (:data:`OWNER_LOCK`) for the block (GitError where it cannot)."""
    with ExitStack() as held:
        try:
            held.enter_context(file_lock(holder / OWNER_LOCK, timeout_s=0))
        except OSError as exc:
            raise GitError(
                f"{holder / OWNER_LOCK}: cannot lock it ({exc.strerror or exc}); fuseci ab locks a file beside each "
                "temporary worktree while it lives: set TMPDIR to a local directory that can lock files"
            ) from None
        yield


def _remove(root: Path, path: Path) -> None:
    """Remove the worktree at ``path`` (locked too: ``git worktree add`` stopped) and its directory; never raises."""
    try:
        _git(["worktree", "remove", "--force", "--force", str(path)], root, "remove the temporary worktree")
    except GitError as exc:
        log.warning("%s", exc)
    shutil.rmtree(path, ignore_errors=True)
