"""The compiled code of the cubins a run loaded (:mod:`fuseci.harness.cubins`: the compilers'
cache files), summarised per kernel name (:mod:`fuseci.records.sass`) with ``cuobjdump -sass
-res-usage``. A file that cannot be read gets a note naming its kernels, never an error: the
compiled code is evidence beside the counters, not a measurement."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fuseci.records import sass
from fuseci.records.sass import KernelCode

log = logging.getLogger(__name__)

#: Largest cubin read; a larger file is no kernel cache's.
MAX_BYTES = 256 << 20
#: Longest one disassembly may take.
TIMEOUT_S = 60.0
#: Builds kept per kernel name (autotuning compiles one per configuration).
MAX_BUILDS = 16
_ELF = b"\x7fELF"
_HEX = re.compile(rb"^[0-9a-f]{32}$")
#: A kernel's code section in a cubin's section names: how a file cuobjdump cannot read still
#: names its kernels.
_TEXT = re.compile(rb"\.text\.([A-Za-z_$][\w$.]{0,4095})\x00")


def find_tool() -> Path | None:
    """cuobjdump: on ``PATH``, under ``$CUDA_HOME``, ``/usr/local/cuda`` or the ``nvidia-cuda-cuobjdump`` wheel (whose
    ``-sass`` needs the ``nvidia-cuda-nvdisasm`` wheel's nvdisasm beside it)."""
    if found := shutil.which("cuobjdump"):
        return Path(found)
    places = [Path(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    places.append(Path("/usr/local/cuda/bin"))
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in spec.submodule_search_locations or () if spec else ():
        places += sorted(Path(root).glob("*/bin"))
    return next((p / "cuobjdump" for p in places if (p / "cuobjdump").is_file()), None)


def elf_of(data: bytes) -> bytes | None:
    """The cubin a compiler's cache file holds (itself, or CuPy's after its 32-digit MD5); None for PTX, garbage."""
    if data.startswith(_ELF):
        return data
    if data[32:36] == _ELF and _HEX.match(data[:32]):
        return data[32:]
    return None


def kernel_names(data: bytes) -> list[str]:
    """The kernels a cubin's section names name, without disassembling it (empty: none found)."""
    return sorted({m.decode("ascii", "replace") for m in _TEXT.findall(data)})


@dataclass(slots=True)
class Compiled:
    """The compiled code of a run's cubins: each kernel name's builds, and why one could not be read."""

    code: dict[str, list[KernelCode]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, summary: KernelCode) -> None:
        builds = self.code.setdefault(name, [])
        if summary not in builds and len(builds) < MAX_BUILDS:
            builds.append(summary)

    def note(self, data: bytes, path: Path, why: str) -> None:
        for name in kernel_names(data) or [path.name]:
            self.notes.setdefault(name, f"{path.name} could not be disassembled: {why}")


def _disassemble(tool: Path, cubin: bytes) -> str:
    """cuobjdump's text for a cubin; OSError when it could not run, ran too long or failed."""
    with tempfile.TemporaryDirectory(prefix="fuseci-cubin-") as tmp:
        path = Path(tmp, "kernel.cubin")
        path.write_bytes(cubin)
        try:
            done = subprocess.run(
                [str(tool), "-sass", "-res-usage", str(path)],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise OSError(f"cuobjdump took over {TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise OSError(f"cuobjdump exited {done.returncode}: {said[-1] if said else 'no message'}")
    return done.stdout


def compiled_code(paths: Iterable[Path], tool: Path | None = None) -> Compiled:
    """Each kernel's compiled code in ``paths`` (cubins, or CuPy's cache files), by kernel name, disassembled
    several at once; a file that cannot be read or disassembled is a note naming its kernels (or the file)."""
    out = Compiled()
    tool = tool or find_tool()
    readable: list[tuple[Path, bytes]] = []
    for path in paths:
        try:
            with path.open("rb") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as exc:
            out.notes.setdefault(path.name, f"{path.name} could not be read: {exc.strerror or exc}")
            continue
        cubin = elf_of(data) if len(data) <= MAX_BYTES else None
        if cubin is None:
            out.note(data[:MAX_BYTES], path, "not a cubin (PTX, or a cut file)")
        elif tool is None:
            out.note(
                cubin, path, "no cuobjdump (install the CUDA toolkit, or fuseci[full]'s cuobjdump and nvdisasm wheels)"
            )
        else:
            readable.append((path, cubin))
    if tool is None or not readable:
        return out

    def text(cubin: bytes) -> str | OSError:
        try:
            return _disassemble(tool, cubin)
        except OSError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=min(len(readable), os.cpu_count() or 1, 16)) as pool:
        texts = list(pool.map(text, (cubin for _, cubin in readable)))
    for (path, cubin), said in zip(readable, texts, strict=True):
        if isinstance(said, OSError):
            out.note(cubin, path, str(said))
            continue
        summaries = sass.summarize(said)
        if not summaries:
            out.note(cubin, path, "cuobjdump found no kernel in it")
        for name, summary in summaries.items():
            out.add(name, summary)
    log.debug("compiled code of %d kernels, %d notes", len(out.code), len(out.notes))
    return out
