"""Source edits of two shipped kernels, as a pull request makes them: each one a change of the
text of a kernel's file, which recompiles the kernel (its registers change with it), keeping its
name and its result.

Planted regressions must be edits of a kernel's source, not runtime switches: a switch leaves the
compiled kernel as it was, while a real edit recompiles it, and with other registers, block shape
or configuration every check that pairs a kernel with the baseline's by its launch shape stops
comparing. Each :class:`Edit` is one textual change of one file of this package (an exact piece
of text replaced once), used two ways:

* ``fuseci run`` of the planted suites: :func:`edited` imports the file as the edit leaves it,
  under a name of its own, so that a planted variant runs exactly the code the edited file would
  run, its kernel compiled from the edited source under the healthy kernel's name;
* ``fuseci ab`` against the unedited commit: ``tools/edit_study.py`` applies the same edit to the
  file in a repository and judges the pull request (:meth:`Edit.apply`).

The edits of the CUDA kernel ``fuseci_bias_gelu_rows`` (``kernels/elementwise.py``) and of the
Triton kernel ``bias_gelu_residual_kernel`` (``kernels/pytorch.py``), each computing the same
outputs bit for bit as the healthy kernel:

* ``sector``: one thread (one program) reads one more element: one 32-byte sector;
* ``halo``: every block (program) also reads an element of the next row, as a stencil's halo;
* ``store``: the threads of the first row write their outputs a second time (CUDA), one program
  writes one element a second time (Triton), with the same values;
* ``unrolled`` (benign, CUDA): the same loads and stores in another order, two rows in flight
  per thread: more registers, the same bytes;
* ``warps`` (benign, Triton): two warps per program instead of four, each thread holding twice
  the elements: more registers, the same bytes;
* ``block`` (benign): another block shape with the same traffic: 128 threads instead of 256
  (CUDA), 2048 columns per program instead of 1024 (Triton).

The planted regressions must be caught by the bytes the SMs load or store, whatever happened to
the registers; the benign edits must pass.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Edit:
    """One change of a kernel file's text: each ``old`` of :attr:`changes` replaced by its
    ``new``, once."""

    name: str
    """Short id (``cuda_sector``)."""
    module: str
    """The module whose file is edited (``kernels.elementwise``)."""
    changes: tuple[tuple[str, str], ...]
    """(old, new) pairs: each ``old`` is text of the healthy file that occurs exactly once."""
    regression: bool
    """True for a planted regression (more bytes), False for a benign edit (the same bytes)."""
    what: str
    """What the edit does, for people."""

    @property
    def path(self) -> Path:
        """The edited file, in this package."""
        return _healthy_file(self.module)

    def apply(self, text: str) -> str:
        """``text`` as the edit leaves it.

        Raises:
            ValueError: an ``old`` does not occur exactly once in ``text``.
        """
        for old, new in self.changes:
            found = text.count(old)
            if found != 1:
                raise ValueError(
                    f"edit {self.name!r} of {self.module}: a text it replaces occurs {found} times, not once"
                )
            text = text.replace(old, new)
        return text


def _healthy_file(module: str) -> Path:
    """The file of a healthy kernel module, imported here so that what depends on this module
    (``fuseci ab``'s fingerprint of a planted case) depends on the files it edits too."""
    if module == "kernels.elementwise":
        import kernels.elementwise as healthy
    elif module == "kernels.pytorch":
        import kernels.pytorch as healthy  # type: ignore[no-redef]
    else:
        raise KeyError(f"no kernel module {module!r} is edited here")
    return Path(healthy.__file__)


def _cuda(name: str, old: str, new: str, regression: bool, what: str, *more: tuple[str, str]) -> Edit:
    return Edit(f"cuda_{name}", "kernels.elementwise", ((old, new), *more), regression, what)


def _triton(name: str, old: str, new: str, regression: bool, what: str) -> Edit:
    return Edit(f"triton_{name}", "kernels.pytorch", ((old, new),), regression, what)


# The CUDA kernel's row loop, as kernels/elementwise.py writes it (an f-string: braces doubled).
_CUDA_LOOP = """  for (int r = blockIdx.y; r < rows; r += gridDim.y) {{
    const long long i = (long long)r * quads + q;
    float4 v = x4[i];
    v.x = gelu(v.x + b.x); v.y = gelu(v.y + b.y); v.z = gelu(v.z + b.z); v.w = gelu(v.w + b.w);
    __stcs(y4 + i, v);
  }}
"""

CUDA_EDITS: tuple[Edit, ...] = (
    _cuda(
        "sector",
        _CUDA_LOOP,
        "  // the first thread also reads the last element of x (+0 keeps the result)\n"
        "  const float last = (q == 0 && blockIdx.y == 0) ? __ldg(x + (long long)rows * quads * 4 - 1) : 0.0f;\n"
        + _CUDA_LOOP.replace("__stcs(y4 + i, v);", "v.w += 0.0f * last;\n    __stcs(y4 + i, v);"),
        True,
        "one thread reads one more element of x: one 32-byte sector",
    ),
    _cuda(
        "halo",
        "    float4 v = x4[i];\n    v.x = gelu(v.x + b.x);",
        "    float4 v = x4[i];\n"
        "    // the block's last thread reads the first element of the next row, a halo (+0 keeps the result)\n"
        "    if (threadIdx.x == blockDim.x - 1 && r + 1 < rows) v.x += 0.0f * x[(long long)(r + 1) * quads * 4];\n"
        "    v.x = gelu(v.x + b.x);",
        True,
        "each block's last thread reads an element of the next row in every row: a halo",
    ),
    _cuda(
        "store",
        _CUDA_LOOP,
        "  float4 first = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // row 0's outputs, written again at the end\n"
        + _CUDA_LOOP.replace("__stcs(y4 + i, v);", "if (r == blockIdx.y) first = v;\n    __stcs(y4 + i, v);")
        + "  if (blockIdx.y == 0) __stcs(y4 + q, first);  // the same values: 16 bytes a thread, once\n",
        True,
        "the threads of row 0 write their outputs a second time, with the same values",
    ),
    _cuda(
        "unrolled",
        _CUDA_LOOP,
        """  int r = blockIdx.y;
  for (; r + gridDim.y < rows; r += 2 * gridDim.y) {{  // two rows in flight: both loads first
    const long long i = (long long)r * quads + q, k = i + (long long)gridDim.y * quads;
    float4 v = x4[i], u = x4[k];
    v.x = gelu(v.x + b.x); v.y = gelu(v.y + b.y); v.z = gelu(v.z + b.z); v.w = gelu(v.w + b.w);
    u.x = gelu(u.x + b.x); u.y = gelu(u.y + b.y); u.z = gelu(u.z + b.z); u.w = gelu(u.w + b.w);
    __stcs(y4 + i, v);
    __stcs(y4 + k, u);
  }}
  for (; r < rows; r += gridDim.y) {{
    const long long i = (long long)r * quads + q;
    float4 v = x4[i];
    v.x = gelu(v.x + b.x); v.y = gelu(v.y + b.y); v.z = gelu(v.z + b.z); v.w = gelu(v.w + b.w);
    __stcs(y4 + i, v);
  }}
""",
        False,
        "two rows in flight per thread: the same loads and stores in another order",
    ),
    _cuda(
        "block",
        """    gx = ceil_div(quads, 256)
    gy = max(1, min(rows, sm_count() * 8 // gx))
    compile_kernel(_BIAS_GELU_ROWS, "fuseci_bias_gelu_rows")(
        (gx, gy), (256,), (x, bias, y, cp.int32(rows), cp.int32(quads))
    )""",
        """    gx = ceil_div(quads, 128)
    gy = max(1, min(rows, sm_count() * 16 // gx))
    compile_kernel(_BIAS_GELU_ROWS, "fuseci_bias_gelu_rows")(
        (gx, gy), (128,), (x, bias, y, cp.int32(rows), cp.int32(quads))
    )""",
        False,
        "blocks of 128 threads instead of 256, twice as many: the same traffic",
        (
            'extern "C" __global__ void __launch_bounds__(256)\nfuseci_bias_gelu_rows(',
            'extern "C" __global__ void __launch_bounds__(128)\nfuseci_bias_gelu_rows(',
        ),
    ),
)

TRITON_EDITS: tuple[Edit, ...] = (
    _triton(
        "sector",
        "    h = tl.load(x_ptr + at, mask=mask).to(tl.float32) + tl.load(b_ptr + cols, mask=mask).to(tl.float32)\n",
        "    h = tl.load(x_ptr + at, mask=mask).to(tl.float32) + tl.load(b_ptr + cols, mask=mask).to(tl.float32)\n"
        "    first = (row == 0) & (tl.program_id(1) == 0)  # program 0 reads one more element (+0 keeps the result)\n"
        "    h += 0.0 * tl.load(x_ptr + n_cols, mask=first, other=0.0).to(tl.float32)\n",
        True,
        "program 0 reads one more element of x: one 32-byte sector",
    ),
    _triton(
        "halo",
        "    h = tl.load(x_ptr + at, mask=mask).to(tl.float32) + tl.load(b_ptr + cols, mask=mask).to(tl.float32)\n",
        "    h = tl.load(x_ptr + at, mask=mask).to(tl.float32) + tl.load(b_ptr + cols, mask=mask).to(tl.float32)\n"
        "    # every program reads the next row's first 8 elements, a halo (+0 keeps the result)\n"
        "    halo = tl.load(x_ptr + (row + 1) * n_cols + tl.arange(0, 8), mask=row + 1 < tl.num_programs(0), other=0.0)\n"
        "    h += 0.0 * tl.sum(halo.to(tl.float32), axis=0)\n",
        True,
        "every program reads 8 elements of the next row: a halo",
    ),
    _triton(
        "store",
        "    tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask)\n",
        "    tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask)\n"
        "    # program 0 writes its outputs' first element a second time, with the same value\n"
        "    tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask & (at == 0))\n",
        True,
        "program 0 writes one output element a second time, with the same value",
    ),
    _triton(
        "warps",
        "bias_gelu_residual_kernel[(rows, triton.cdiv(cols, block))](x, bias, residual, y, cols, BLOCK=block, num_warps=4)",
        "bias_gelu_residual_kernel[(rows, triton.cdiv(cols, block))](x, bias, residual, y, cols, BLOCK=block, num_warps=2)",
        False,
        "2 warps per program instead of 4: each thread holds twice the elements, the same traffic",
    ),
    _triton(
        "block",
        "    block = 1024\n",
        "    block = 2048\n",
        False,
        "2048 columns per program instead of 1024, half as many programs: the same traffic",
    ),
)

EDITS: dict[str, Edit] = {e.name: e for e in (*CUDA_EDITS, *TRITON_EDITS)}


def _folder() -> Path:
    """Where edited files are written (one per edit and text, named by their hash)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    try:
        folder = Path(root) / "fuseci-edits"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    except OSError:
        folder = Path(tempfile.gettempdir()) / f"fuseci-edits-{os.getuid()}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder


@cache
def edited_module(name: str) -> ModuleType:
    """The module of edit ``name`` as the edited file defines it, imported under a name of its own
    (``kernels.elementwise__cuda_sector``) from a file holding the edited text: Triton and
    :mod:`inspect` read a kernel's source from its file.

    Raises:
        KeyError: no edit has that name.
    """
    edit = EDITS[name]
    text = edit.apply(edit.path.read_text(encoding="utf-8"))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    path = _folder() / f"{edit.module.replace('.', '_')}__{edit.name}_{digest}.py"
    if not path.exists():
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(text, encoding="utf-8")
        os.replace(scratch, path)
    module_name = f"{edit.module}__{edit.name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def edited(name: str, function: str) -> Callable[..., Any]:
    """``function`` of the module as edit ``name`` leaves it."""
    return getattr(edited_module(name), function)  # type: ignore[no-any-return]
