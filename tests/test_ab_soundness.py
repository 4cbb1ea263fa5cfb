"""``fuseci ab`` never skips a case it cannot prove unchanged: each test is an attack, a change
to what a case runs that static reading of the tree could miss, made in a small git repository's
working tree and judged against its last commit as ``fuseci ab HEAD`` judges it (the state line
it says before measuring)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, write
from helpers import git as _git

from fuseci.api import ab
from fuseci.config import resolve

#: Two cases, each naming its own function of one module.
_SUITE = """suite: s
cases:
  - id: a
    inputs:
      x: {shape: [4]}
    variants:
      unfused: MODULE:a
      fused: MODULE:a
  - id: b
    inputs:
      x: {shape: [4]}
    variants:
      unfused: MODULE:b
      fused: MODULE:b
"""


def _repo(root: Path, files: dict[str, str], module: str = "kernels.mod") -> Path:
    """A committed repository of ``files`` and the suite ``suites/s.yaml`` over ``module``."""
    for rel, text in files.items():
        write(root / rel, text)
    write(root / "suites" / "s.yaml", _SUITE.replace("MODULE", module))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    return root


def _state(repo: Path, edits: dict[str, str], ignore: tuple[str, ...] = ()) -> str:
    """What ``fuseci ab HEAD --suite suites/s.yaml`` (``--ignore`` each of ``ignore``) says of the
    suite after ``edits`` (path → new text) to the working tree."""
    for rel, text in edits.items():
        write(repo / rel, text)
    with ab.trees("HEAD", None, repo) as (root, base, head):
        pairs, problems = ab.pair_suites([Path("suites/s.yaml")], base, head, cwd=root, repo=root, ignore=ignore)
        assert not problems
        (pair,) = pairs
        return ab.pair_state(pair, base, every=False)


def _measured(state: str, cases: tuple[str, ...] = ("a", "b")) -> set[str]:
    """The cases a state line says are measured (of the suite's ``cases``)."""
    if state.endswith("unchanged, not measured") and "measuring" not in state:
        return set()
    found = re.search(r"measuring \d+ of \d+ cases? \(([^)]*)\)", state)
    return set(found.group(1).split(", ")) if found else set(cases)


def _edit(repo: Path, rel: str, old: str, new: str) -> dict[str, str]:
    text = (repo / rel).read_text()
    assert old in text
    return {rel: text.replace(old, new)}


# --- code a case reaches without naming it ------------------------------------------------------

_REGISTRY = """
_KERNELS = {}


def register(fn):
    _KERNELS[fn.__name__] = fn
    return fn


@register
def helper(x):
    return x + 1


def a(x):
    return _KERNELS["helper"](x)


def b(x):
    return x
"""

_HOOKS = """
HOOKS = []


def hook(fn):
    HOOKS.append(fn)
    return fn


@hook
def helper(x):
    return x + 1


def a(x):
    for h in HOOKS:
        x = h(x)
    return x


def b(x):
    return x
"""

_CUSTOM_OP = """
import torch


@torch.library.custom_op("fuseci_test::helper", mutates_args=())
def helper(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def a(x):
    return torch.ops.fuseci_test.helper(x)


def b(x):
    return x
"""

_SUBCLASSES = """
class Base:
    registry = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Base.registry[cls.__name__] = cls


class Impl(Base):
    def helper(self, x):
        return x + 1


def a(x):
    return Base.registry["Impl"]().helper(x)


def b(x):
    return x
"""

_THROUGH_ITSELF = {
    "from-package-as": "from kernels import mod as _self\n",
    "import-as": "import kernels.mod as _self\n",
    "relative": "from . import mod as _self\n",
    "sys-modules-alias": "import sys as _s\n\n_self = _s.modules[__name__]\n",
    "sys-modules-from": "from sys import modules as _m\n\n_self = _m[__name__]\n",
}

_CALLS_SELF = """

def helper(x):
    return x + 1


def a(x):
    return _self.helper(x)


def b(x):
    return x
"""


@pytest.mark.parametrize(
    "module", [_REGISTRY, _HOOKS, _CUSTOM_OP, _SUBCLASSES], ids=["registry", "hooks", "custom-op", "init-subclass"]
)
def test_a_function_reached_through_what_a_decorator_or_class_stored_is_seen(tmp_path: Path, module: str) -> None:
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module})
    state = _state(repo, _edit(repo, "kernels/mod.py", "return x + 1", "return x + 2"))
    assert "a" in _measured(state), state


@pytest.mark.parametrize("how", sorted(_THROUGH_ITSELF))
def test_a_module_reached_through_itself_is_seen(tmp_path: Path, how: str) -> None:
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": _THROUGH_ITSELF[how] + _CALLS_SELF})
    state = _state(repo, _edit(repo, "kernels/mod.py", "return x + 1", "return x + 2"))
    assert "a" in _measured(state), state


def test_a_module_reached_through_its_package_is_seen(tmp_path: Path) -> None:
    module = "import kernels\n" + _CALLS_SELF.replace("_self.helper", "kernels.mod.helper")
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module})
    state = _state(repo, _edit(repo, "kernels/mod.py", "return x + 1", "return x + 2"))
    assert "a" in _measured(state), state


def test_a_custom_op_another_module_of_the_suite_registers_is_seen(tmp_path: Path) -> None:
    """Case a calls an op that the module of case b registers: the harness imports both modules
    before any case runs, so a's result depends on b's file."""
    uses = "import torch\n\n\ndef a(x):\n    return torch.ops.fuseci_test.helper(x)\n"
    defines = _CUSTOM_OP.replace("\n\ndef a(x):\n    return torch.ops.fuseci_test.helper(x)\n", "")
    repo = _repo(
        tmp_path / "repo",
        {"kernels/__init__.py": "", "kernels/uses.py": uses, "kernels/defines.py": defines},
    )
    suite = (repo / "suites" / "s.yaml").read_text()
    write(
        repo / "suites" / "s.yaml",
        suite.replace("kernels.mod:a", "kernels.uses:a").replace("kernels.mod:b", "kernels.defines:b"),
    )
    _git(repo, "commit", "-q", "-am", "two modules")
    state = _state(repo, _edit(repo, "kernels/defines.py", "return x + 1", "return x + 2"))
    assert "a" in _measured(state), state


# --- vendored code and files a kernel reads ------------------------------------------------------

_VENDORED = """
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "vendor"))

import vx  # noqa: E402


def a(x):
    return vx.helper(x)


def b(x):
    return x
"""


def test_vendored_code_imported_through_a_sys_path_entry_the_module_adds_is_seen(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path / "repo",
        {
            "kernels/__init__.py": "",
            "kernels/mod.py": _VENDORED,
            "kernels/vendor/vx.py": "def helper(x):\n    return x + 1\n",
        },
    )
    state = _state(repo, _edit(repo, "kernels/vendor/vx.py", "return x + 1", "return x + 2"))
    assert "a" in _measured(state), state


@pytest.mark.parametrize(
    ("reads", "file"),
    [
        ("_SOURCE = (Path(__file__).parent / 'k.cu').read_text()\n", "kernels/k.cu"),
        ("_SOURCE = open(os.path.join(os.path.dirname(__file__), 'k.cu')).read()\n", "kernels/k.cu"),
        ("_SOURCE = Path(__file__).with_name('k.cu').read_bytes()\n", "kernels/k.cu"),
        (
            "_HERE = Path(__file__).resolve().parent\n_SOURCE = open(_HERE / 'data' / 'k.cu').read()\n",
            "kernels/data/k.cu",
        ),
        ("_SOURCE = open('kernels/k.cu').read()\n", "kernels/k.cu"),
    ],
    ids=["read_text", "open-join", "with_name", "named-dir", "cwd-relative"],
)
def test_a_file_read_at_import_is_seen(tmp_path: Path, reads: str, file: str) -> None:
    module = f"import os\nfrom pathlib import Path\n\n{reads}\n\ndef a(x):\n    return _SOURCE\n\n\ndef b(x):\n    return x\n"
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, file: "// v1\n"})
    state = _state(repo, {file: "// v2\n"})
    assert _measured(state) == {"a", "b"}, state
    assert file in state


@pytest.mark.parametrize(
    "loads",
    [
        "import cupy as cp\n\n\ndef _load():\n    return cp.RawModule(path=str(Path(__file__).with_name('k.cubin')))\n",
        "from torch.utils import cpp_extension\n\n\ndef _load():\n"
        "    return cpp_extension.load(name='k', sources=[os.path.join(os.path.dirname(__file__), 'k.cubin')])\n",
    ],
    ids=["RawModule", "cpp_extension"],
)
def test_a_file_a_kernel_loads_is_seen(tmp_path: Path, loads: str) -> None:
    module = (
        f"import os\nfrom pathlib import Path\n{loads}\n\ndef a(x):\n    return _load()\n\n\ndef b(x):\n    return x\n"
    )
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, "kernels/k.cubin": "v1\n"})
    state = _state(repo, {"kernels/k.cubin": "v2\n"})
    assert "a" in _measured(state), state


@pytest.mark.parametrize(
    "unknown",
    [
        "open(os.environ['KERNEL_SOURCE']).read()",
        "Path(os.environ['KERNEL_SOURCE']).read_text()",
        "sys.path.append(os.environ['VENDOR'])",
    ],
    ids=["open", "read_text", "sys-path"],
)
def test_a_file_or_path_named_at_run_time_is_never_proven_unchanged(tmp_path: Path, unknown: str) -> None:
    """Whatever the reader cannot name, it cannot compare: the case is measured, and said why."""
    module = f"import os\nimport sys\nfrom pathlib import Path\n\n\ndef a(x):\n    return {unknown}\n\n\ndef b(x):\n    return x\n"
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module})
    state = _state(repo, {})
    assert _measured(state) == {"a", "b"}, state
    assert "kernels/mod.py" in state and "fuseci ab cannot" in state


# --- a package of the tree, however it is found ---------------------------------------------------

_SRC_FILES = {
    "src/mypkg/__init__.py": "",
    "src/mypkg/ops.py": "def a(x):\n    return x + 1\n\n\ndef b(x):\n    return x\n",
}


def _src_repo(tmp_path: Path) -> Path:
    return _repo(tmp_path / "repo", _SRC_FILES, module="mypkg.ops")


def _src_edit(repo: Path) -> dict[str, str]:
    return _edit(repo, "src/mypkg/ops.py", "return x + 1", "return x + 2")


def test_a_src_layout_on_pythonpath_is_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _src_repo(tmp_path)
    monkeypatch.setattr(sys, "path", [str(repo / "src"), *sys.path])
    state = _state(repo, _src_edit(repo))
    assert _measured(state) == {"a"}, state
    assert "src/mypkg/ops.py" in state


def _site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty site directory standing in for the environment's (its editable finders read from it)."""
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    monkeypatch.setattr("site.getsitepackages", lambda: [str(site_dir)])
    monkeypatch.setattr("site.getusersitepackages", lambda: str(tmp_path / "no-user-site"))
    resolve._editable_map.cache_clear()
    return site_dir


def test_an_editable_install_of_the_tree_is_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """setuptools' editable finder maps the package to the working tree; each side is read from
    its own tree."""
    repo = _src_repo(tmp_path)
    site_dir = _site(tmp_path, monkeypatch)
    write(
        site_dir / "__editable___mypkg_0_1_finder.py",
        f"MAPPING = {{'mypkg': {str(repo / 'src' / 'mypkg')!r}}}\nNAMESPACES = {{}}\n",
    )
    try:
        state = _state(repo, _src_edit(repo))
    finally:
        resolve._editable_map.cache_clear()
    assert _measured(state) == {"a"}, state


def test_a_pth_file_into_the_tree_is_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import site

    repo = _src_repo(tmp_path)
    site_dir = _site(tmp_path, monkeypatch)
    write(site_dir / "mypkg.pth", f"{repo / 'src'}\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    site.addsitedir(str(site_dir))
    try:
        state = _state(repo, _src_edit(repo))
    finally:
        resolve._editable_map.cache_clear()
    assert _measured(state) == {"a"}, state


def test_the_base_sides_processes_import_its_own_src_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the tree's src/ found through PYTHONPATH, each side's harness imports the package from
    its own tree, not from the working tree."""
    repo = _src_repo(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(repo / "src"), str(ROOT)]))
    monkeypatch.setattr(sys, "path", [str(repo / "src"), *sys.path])
    write(repo / "src" / "mypkg" / "ops.py", "WHO = 'head'\n")
    script = "import mypkg.ops, sys; print(mypkg.ops.__file__)"
    with ab.trees("HEAD", None, repo) as (_, base, head):
        for side, other in ((base, head), (head, base)):
            options = ab.side_options(side, other, ab.AbOptions(report_dir=tmp_path / "out"))
            done = subprocess.run(
                [sys.executable, "-c", script], cwd=options.cwd, env=options.env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stderr
            assert Path(done.stdout.strip()).resolve() == (side.root / "src" / "mypkg" / "ops.py").resolve()


# --- simple edits stay precise -------------------------------------------------------------------


def test_one_function_body_nothing_dynamic_reaches_still_measures_only_its_case(tmp_path: Path) -> None:
    module = (
        "from functools import cache\n\n\n@cache\ndef helper(x):\n    return x + 1\n\n\n"
        "def a(x):\n    return helper(x)\n\n\ndef b(x):\n    return x\n"
    )
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module})
    state = _state(repo, _edit(repo, "kernels/mod.py", "return x + 1", "return x + 2"))
    assert _measured(state) == {"a"}, state


def test_src_layout_edits_on_the_shipped_kernels_stay_precise(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "kernels", repo / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    _repo(repo, {}, module="kernels.elementwise")
    suite = (ROOT / "suites" / "elementwise.yaml").read_text()
    write(repo / "suites" / "s.yaml", suite)
    _git(repo, "commit", "-q", "-am", "elementwise")
    text = (repo / "kernels" / "elementwise.py").read_text()
    edited = text.replace("(out,) = _SCALE_RELU_ADD(", "(result,) = _SCALE_RELU_ADD(").replace(
        "return out.reshape(x.shape)\n\n\ndef scale_relu_add_reference",
        "return result.reshape(x.shape)\n\n\ndef scale_relu_add_reference",
    )
    assert edited != text
    assert _measured(_state(repo, {"kernels/elementwise.py": edited})) == {"scale_relu_add"}


# --- planted suites ------------------------------------------------------------------------------

_PLANTED_CASE = """  - id: p
    inputs:
      x: {shape: [4]}
    variants:
      unfused: kernels.mod:a
      fused: kernels.mod:a
      broken: {fn: 'kernels.mod:b', baseline: fused, caught_by: [launches]}
"""


def test_a_suite_that_gains_planted_is_measured_and_said(tmp_path: Path) -> None:
    """By default planted suites are left out unless named; one whose flag changed between the
    sides is not: it is measured, and the state line says the flag changed."""
    module = "def a(x):\n    return x\n\n\ndef b(x):\n    return x\n"
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module})
    write(repo / "suites" / "s.yaml", _SUITE.replace("MODULE", "kernels.mod") + _PLANTED_CASE)
    _git(repo, "commit", "-q", "-am", "a planted case")
    write(repo / "suites" / "s.yaml", "planted: true\n" + (repo / "suites" / "s.yaml").read_text())
    write(repo / "kernels" / "mod.py", module.replace("return x\n\n\ndef b", "return x + 1\n\n\ndef b"))
    with ab.trees("HEAD", None, repo) as (root, base, head):
        pairs, problems = ab.pair_suites(None, base, head, cwd=root, repo=root)
        assert not problems
        (pair,) = pairs
        state = ab.pair_state(pair, base, every=False)
    assert pair.head is not None and pair.head.planted
    assert "planted: false -> true" in state and _measured(state, ("a", "b", "p")) == {"a", "b", "p"}


# --- more of each class --------------------------------------------------------------------------

_TAIL = "\n\ndef b(x):\n    return x\n"

_MORE: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    # a decorator that keeps the class it decorates, and a metaclass that registers it
    "class-decorator": (
        {
            "kernels/mod.py": "KINDS = []\n\n\ndef kind(cls):\n    KINDS.append(cls)\n    return cls\n\n\n@kind\n"
            "class Impl:\n    def run(self, x):\n        return x + 1\n\n\ndef a(x):\n    return KINDS[0]().run(x)\n"
            + _TAIL
        },
        {"kernels/mod.py": ("return x + 1", "return x + 2")},
    ),
    "metaclass": (
        {
            "kernels/mod.py": "REG = {}\n\n\nclass Meta(type):\n    def __init__(cls, *a):\n        REG[cls.__name__] = cls\n\n\n"
            "class Impl(metaclass=Meta):\n    def run(self, x):\n        return x + 1\n\n\n"
            "def a(x):\n    return REG['Impl']().run(x)\n" + _TAIL
        },
        {"kernels/mod.py": ("return x + 1", "return x + 2")},
    ),
    # getattr under another name
    "builtins-alias": (
        {
            "kernels/mod.py": "import builtins as _b\n\n\ndef helper(x):\n    return x + 1\n\n\n"
            "def a(x):\n    return _b.globals()['helper'](x)\n" + _TAIL
        },
        {"kernels/mod.py": ("return x + 1", "return x + 2")},
    ),
    # a module imported under a computed name
    "computed-import": (
        {
            "kernels/mod.py": "import importlib\n\nNAME = 'impl'\n\n\ndef a(x):\n"
            "    return importlib.import_module('kernels.' + NAME).f(x)\n" + _TAIL,
            "kernels/impl.py": "def f(x):\n    return x + 1\n",
        },
        {"kernels/impl.py": ("return x + 1", "return x + 2")},
    ),
    # code loaded by path
    "spec-from-file": (
        {
            "kernels/mod.py": "import importlib.util as u\nfrom pathlib import Path\n\n\ndef a(x):\n"
            "    spec = u.spec_from_file_location('impl', Path(__file__).with_name('impl_src.py'))\n"
            "    return spec\n" + _TAIL,
            "kernels/impl_src.py": "def f(x):\n    return x + 1\n",
        },
        {"kernels/impl_src.py": ("return x + 1", "return x + 2")},
    ),
    # a compiler run as a process on a file of the tree
    "process": (
        {
            "kernels/mod.py": "import subprocess\n\n\ndef a(x):\n    return subprocess.run(['nvcc', 'kernels/k.cu'])\n"
            + _TAIL,
            "kernels/k.cu": "// v1\n",
        },
        {"kernels/k.cu": ("v1", "v2")},
    ),
    # a package that extends its own __path__ to vendored code
    "package-path": (
        {
            "kernels/__init__.py": "import os\n\n__path__.append(os.path.join(os.path.dirname(__file__), '..', 'vendor'))\n",
            "kernels/mod.py": "from kernels import vx\n\n\ndef a(x):\n    return vx.f(x)\n" + _TAIL,
            "vendor/vx.py": "def f(x):\n    return x + 1\n",
        },
        {"vendor/vx.py": ("return x + 1", "return x + 2")},
    ),
    # a directory listed, a file added to it; a file that did not exist, created
    "listed-directory": (
        {
            "kernels/mod.py": "import os\n\n_HERE = os.path.dirname(__file__)\n\n\ndef a(x):\n"
            "    return sorted(os.listdir(os.path.join(_HERE, 'configs')))\n" + _TAIL,
            "kernels/configs/one.json": "{}\n",
        },
        {"kernels/configs/two.json": ("", "{}\n")},
    ),
    "file-created": (
        {
            "kernels/mod.py": "from pathlib import Path\n\n_TUNED = Path(__file__).with_name('tuned.json')\n\n\n"
            "def a(x):\n    return _TUNED.read_text() if _TUNED.exists() else x\n" + _TAIL,
        },
        {"kernels/tuned.json": ("", "{}\n")},
    ),
    "numpy-load": (
        {
            "kernels/mod.py": "from pathlib import Path\n\nimport numpy as np\n\n\ndef a(x):\n"
            "    return np.load(Path(__file__).with_name('w.npy'))\n" + _TAIL,
            "kernels/w.npy": "v1\n",
        },
        {"kernels/w.npy": ("v1", "v2")},
    ),
    "include-directory": (
        {
            "kernels/mod.py": "from pathlib import Path\n\nimport cupy as cp\n\n_INC = Path(__file__).parent / 'include'\n\n\n"
            "def a(x):\n    return cp.RawKernel('#include <k.cuh>', 'k', options=('-std=c++17', f'-I{_INC}'))\n"
            + _TAIL,
            "kernels/include/k.cuh": "// v1\n",
        },
        {"kernels/include/k.cuh": ("v1", "v2")},
    ),
}


@pytest.mark.parametrize("attack", sorted(_MORE))
def test_more_of_each_class_is_seen(tmp_path: Path, attack: str) -> None:
    files, edits = _MORE[attack]
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", **files})
    changed = {}
    for rel, (old, new) in edits.items():
        changed.update(_edit(repo, rel, old, new) if old else {rel: new})
    state = _state(repo, changed)
    assert "a" in _measured(state), state


def test_a_named_module_found_nowhere_is_measured(tmp_path: Path) -> None:
    """Both sides lack it: measuring says why the case cannot run, where skipping said it passed."""
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": ""})
    state = _state(repo, {})
    assert _measured(state) == {"a", "b"} and "kernels.mod" in state


def test_a_src_layout_between_two_commits_reads_each_commits_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fuseci ab BASE HEAD``: neither side is the working tree that PYTHONPATH points into."""
    repo = _src_repo(tmp_path)
    monkeypatch.setattr(sys, "path", [str(repo / "src"), *sys.path])
    base = _git(repo, "rev-parse", "HEAD")
    write(repo / "src" / "mypkg" / "ops.py", _SRC_FILES["src/mypkg/ops.py"].replace("x + 1", "x + 2"))
    _git(repo, "commit", "-q", "-am", "second")
    write(repo / "src" / "mypkg" / "ops.py", "uncommitted: neither side's\n")
    with ab.trees(base, "HEAD", repo) as (root, b, h):
        (pair,), _ = ab.pair_suites([Path("suites/s.yaml")], b, h, cwd=root, repo=root)
        state = ab.pair_state(pair, b, every=False)
    assert _measured(state) == {"a"}, state


def test_an_editable_install_whose_directory_cannot_be_mapped_is_never_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setuptools' ``package_dir`` may map ``mypkg`` to a directory of another name: the base's
    copy of it cannot be told, so the suite is measured (and the base's harness refuses to
    import the working tree's)."""
    repo = _repo(
        tmp_path / "repo",
        {"lib/impl/__init__.py": "", "lib/impl/ops.py": _SRC_FILES["src/mypkg/ops.py"]},
        module="mypkg.ops",
    )
    site_dir = _site(tmp_path, monkeypatch)
    write(site_dir / "__editable___mypkg_finder.py", f"MAPPING = {{'mypkg': {str(repo / 'lib' / 'impl')!r}}}\n")
    try:
        state = _state(repo, {})
    finally:
        resolve._editable_map.cache_clear()
    assert _measured(state) == {"a", "b"} and "outside this tree" in state, state


# --- skipping decided from the diff: what git says changed, not only what the reader follows -----

#: A module whose case ``a`` reads ``FILE`` through ``HOW`` (an API the reader has no rule for).
_UNKNOWN_READ = (
    "import os\nfrom pathlib import Path\n{imports}\n\ndef a(x):\n    return {how}\n\n\ndef b(x):\n    return x\n"
)


@pytest.mark.parametrize(
    ("imports", "how", "file"),
    [
        ("import importlib.resources", "importlib.resources.read_text('kernels', 'table.txt')", "kernels/table.txt"),
        ("import importlib.resources", "importlib.resources.read_binary('kernels', 'table.bin')", "kernels/table.bin"),
        ("import pkg_resources", "pkg_resources.resource_string(__name__, 'data/w.bin')", "kernels/data/w.bin"),
        ("", "Path.read_text(Path('kernels') / 'k.cu')", "kernels/k.cu"),
        ("reader = open", "reader('kernels/k.cu').read()", "kernels/k.cu"),
        ("import io", "io.FileIO('kernels/k.cu').read()", "kernels/k.cu"),
        ("import cupy", "cupy.cuda.function.Module().load_file('kernels/k.cubin')", "kernels/k.cubin"),
        ("from numba import cuda", "cuda.jit(link=['kernels/k.ptx'])(x)", "kernels/k.ptx"),
        ("import torch", "torch.jit.load('kernels/model.pt')", "kernels/model.pt"),
        ("import numpy", "numpy.ctypeslib.load_library('libk', os.path.dirname(__file__))", "kernels/libk.so"),
        ("import pandas", "pandas.read_csv('kernels/shapes.csv')", "kernels/shapes.csv"),
        ("import configparser", "configparser.ConfigParser().read('kernels/tune.ini')", "kernels/tune.ini"),
        ("import triton", "triton.compile('kernels/k.ttir')", "kernels/k.ttir"),
    ],
)
def test_a_file_read_through_an_api_the_reader_has_no_rule_for_measures_every_case(
    tmp_path: Path, imports: str, how: str, file: str
) -> None:
    """The module file is unchanged; the file it reads is not: the change is named by the code,
    held by no fingerprint, so every case is measured and the state says which change forced it."""
    module = _UNKNOWN_READ.format(imports=imports, how=how)
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, file: "v1\n"})
    state = _state(repo, {file: "v2\n"})
    assert _measured(state) == {"a", "b"}, state
    assert file in state and "no case's proven dependencies explain" in state, state


def test_a_data_file_one_case_reads_and_another_names_measures_both(tmp_path: Path) -> None:
    module = _UNKNOWN_READ.format(imports="import pandas", how="pandas.read_csv('kernels/k.csv')").replace(
        "def b(x):\n    return x", "def b(x):\n    return open('kernels/k.csv').read()"
    )
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, "kernels/k.csv": "1\n"})
    assert _measured(_state(repo, {"kernels/k.csv": "2\n"})) == {"a", "b"}


def test_a_data_file_only_its_reader_names_still_measures_only_that_case(tmp_path: Path) -> None:
    """A file the reader follows, named by no other case's code: the case fingerprints decide."""
    reads = "from pathlib import Path\n\n\ndef a(x):\n    return (Path(__file__).parent / 'k.cu').read_text()\n"
    files = {"kernels/__init__.py": "", "kernels/a.py": reads, "kernels/k.cu": "// 1\n"}
    repo = _repo(tmp_path / "repo", {**files, "kernels/b.py": "def b(x):\n    return x\n"}, module="kernels.a")
    write(repo / "suites" / "s.yaml", (repo / "suites" / "s.yaml").read_text().replace("kernels.a:b", "kernels.b:b"))
    _git(repo, "commit", "-q", "-am", "b in its own module")
    assert _measured(_state(repo, {"kernels/k.cu": "// 2\n"})) == {"a"}


@pytest.mark.parametrize(
    "edits",
    [
        {"README.md": "# changed\n"},
        {"docs/guide.md": "more words\n"},
        {"tests/test_mod.py": "def test_it():\n    assert True\n"},
        {"tests/data/fixture.json": "{}\n"},
        {"tools/plot.py": "import matplotlib\n"},
        {"kernels/notes.txt": "unnamed, in a directory no module reads without naming\n"},
    ],
    ids=["readme", "docs", "tests", "test-data", "tools", "unnamed-beside-kernels"],
)
def test_files_no_case_can_reach_skip_everything_once_declared(tmp_path: Path, edits: dict[str, str]) -> None:
    """Documentation, tests and files no case names, outside every search path's module names,
    declared with ``--ignore``: neither imported (the reader follows every import) nor named,
    so nothing is measured. Undeclared, a change of the commits (a tracked file) has every case
    measured, since a case may read it under a name built at run time; a file of the working
    tree alone (untracked: the job's own) that no case names does not."""
    module = "def a(x):\n    return x + 1\n\n\ndef b(x):\n    return x\n"
    files = {
        "kernels/__init__.py": "",
        "kernels/mod.py": module,
        "README.md": "# r\n",
        "docs/guide.md": "words\n",
        "tests/test_mod.py": "",
    }
    repo = _repo(tmp_path / "repo", files)
    undeclared = _state(repo, edits)
    (rel,) = edits
    if rel in files:  # tracked: a change of the commits
        assert _measured(undeclared) == {"a", "b"} and rel in undeclared and "--ignore" in undeclared, undeclared
    else:
        assert undeclared == "unchanged, not measured", undeclared
    state = _state(repo, {}, ignore=("README.md", "docs/*", "tests/*", "tools/*", "kernels/notes.txt"))
    assert state == "unchanged, not measured", state


def test_an_ignore_pattern_never_hides_a_file_a_case_names(tmp_path: Path) -> None:
    module = _UNKNOWN_READ.format(imports="import pandas", how="pandas.read_csv('kernels/k.csv')")
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, "kernels/k.csv": "1\n"})
    assert _measured(_state(repo, {"kernels/k.csv": "2\n"}, ignore=("*.csv", "kernels/*"))) == {"a", "b"}


def test_an_edit_to_one_cases_kernel_beside_docs_still_measures_only_it(tmp_path: Path) -> None:
    module = "def a(x):\n    return x + 1\n\n\ndef b(x):\n    return x\n"
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, "README.md": "# r\n"})
    edits = {**_edit(repo, "kernels/mod.py", "x + 1", "x + 2"), "README.md": "# new\n", "docs/x.md": "x\n"}
    assert _measured(_state(repo, edits, ignore=("README.md", "docs/*"))) == {"a"}


@pytest.mark.parametrize("rel", ["sitecustomize.py", "site/sitecustomize.py", "lib/usercustomize.py", "lib/x.pth"])
def test_a_start_up_file_measures_every_case(tmp_path: Path, rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python runs sitecustomize, usercustomize and .pth files before anything in every harness
    process (it runs without -S or -I): whatever directory they are in, every case is measured."""
    module = "def a(x):\n    return x + 1\n\n\ndef b(x):\n    return x\n"
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, rel: "# 1\n"})
    monkeypatch.setenv("PYTHONPATH", str(repo / rel.rpartition("/")[0]))
    state = _state(repo, {rel: "import builtins\nbuiltins.x = 2\n"})
    assert _measured(state) == {"a", "b"} and rel in state, state


def test_a_module_that_may_take_an_installed_modules_place_measures_every_case(tmp_path: Path) -> None:
    module = "import json\n\n\ndef a(x):\n    return x + 1\n\n\ndef b(x):\n    return x\n"
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module})
    state = _state(repo, {"numpy.py": "raise SystemExit\n"})
    assert _measured(state) == {"a", "b"} and "numpy.py" in state, state


def _committed_state(repo: Path, base: str) -> str:
    with ab.trees(base, "HEAD", repo) as (root, b, h):
        (pair,), _ = ab.pair_suites([Path("suites/s.yaml")], b, h, cwd=root, repo=root)
        return ab.pair_state(pair, b, every=False)


def test_a_submodule_bumped_between_two_commits_measures_every_case(tmp_path: Path) -> None:
    """Neither worktree checks the submodule out, so both sides hash nothing under it: the bump
    itself is the change, and the code that names its directory may read it."""
    module = "OPTIONS = ('-Ivendor/cutlass/include',)\n\n\ndef a(x):\n    return OPTIONS\n\n\ndef b(x):\n    return x\n"
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module})
    _git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},vendor/cutlass")
    _git(repo, "commit", "-q", "-m", "vendor")
    base = _git(repo, "rev-parse", "HEAD").strip()
    _git(repo, "update-index", "--cacheinfo", f"160000,{'2' * 40},vendor/cutlass")
    _git(repo, "commit", "-q", "-m", "bump")
    state = _committed_state(repo, base)
    assert _measured(state) == {"a", "b"} and "vendor/cutlass" in state, state


def test_a_link_repointed_outside_the_repository_measures_every_case(tmp_path: Path) -> None:
    for v in ("1", "2"):
        write(tmp_path / f"outside{v}" / "w.bin", v)
    module = (
        "import numpy\n\n\ndef a(x):\n    return numpy.load('kernels/weights/w.bin')\n\n\ndef b(x):\n    return x\n"
    )
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "kernels").mkdir()
    (repo / "kernels" / "weights").symlink_to(tmp_path / "outside1")
    repo = _repo(repo, {"kernels/__init__.py": "", "kernels/mod.py": module})
    (repo / "kernels" / "weights").unlink()
    (repo / "kernels" / "weights").symlink_to(tmp_path / "outside2")
    state = _state(repo, {})
    assert _measured(state) == {"a", "b"} and "kernels/weights" in state, state


def test_an_include_directory_read_past_the_files_limit_is_not_proven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory listed only up to the limit: a header past it cannot be compared."""
    from fuseci.ab import reader

    monkeypatch.setattr(reader, "MAX_FILES", 3)
    module = (
        "import cupy\n\nK = cupy.RawKernel('', 'k', options=('-Ikernels/include',))\n\n\n"
        "def a(x):\n    return K\n\n\ndef b(x):\n    return x\n"
    )
    headers = {f"kernels/include/h{i}.h": f"// {i}\n" for i in range(5)}
    repo = _repo(tmp_path / "repo", {"kernels/__init__.py": "", "kernels/mod.py": module, **headers})
    state = _state(repo, {"kernels/include/h4.h": "// changed\n"})
    assert _measured(state) == {"a", "b"}, state
    assert "kernels/include/, which holds more than 3 files" in _state(repo, {}), state
