"""The compiled code of a run's cubins (fuseci.measure.disassembly) and which cubins the harness
process opened (fuseci.harness.cubins): from the recorded cubin of tests/data/sass, CuPy's cache
layout, fake cuobjdump scripts and hostile files; the record keeps what they found."""

from __future__ import annotations

import hashlib
import json
import lzma
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fuseci.errors import ReportError
from fuseci.measure import disassembly
from fuseci.records import sass
from fuseci.records.harness import HarnessRecord, read_record, write_record

SASS = Path(__file__).parent / "data" / "sass"
CUBIN = (SASS / "scale_relu_add.cubin").read_bytes()
KERNEL = "fuseci_scale_relu_add"


def fake_cuobjdump(tmp_path: Path, body: str) -> Path:
    """A cuobjdump that runs ``body`` (Python) with the cubin's path in ``cubin``."""
    tool = tmp_path / "bin" / "cuobjdump"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(f"#!{sys.executable}\nimport sys\ncubin = sys.argv[-1]\n{textwrap.dedent(body)}")
    tool.chmod(0o755)
    return tool


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A cuobjdump that prints the recorded SASS of the fused chain for an ELF file."""
    sass_text = lzma.decompress((SASS / "scale_relu_add.sass.xz").read_bytes()).decode()
    (tmp_path / "out.txt").write_text(sass_text)
    return fake_cuobjdump(
        tmp_path,
        f"""
        if open(cubin, "rb").read(4) != b"\\x7fELF":
            sys.exit("cuobjdump fatal   : not an ELF")
        print(open({str(tmp_path / "out.txt")!r}).read())
        """,
    )


def cupy_entry(directory: Path, cubin: bytes, name: str = "0123_2.cubin") -> Path:
    """A file as CuPy's kernel cache keeps it: the cubin behind its MD5 in hexadecimal."""
    path = directory / name
    path.write_bytes(hashlib.md5(cubin).hexdigest().encode() + cubin)
    return path


def test_cupy_cache_entries_are_unwrapped_and_summarised(tmp_path: Path, recorded: Path) -> None:
    assert disassembly.elf_of(cupy_entry(tmp_path, CUBIN).read_bytes()) == CUBIN
    found = disassembly.compiled_code([cupy_entry(tmp_path, CUBIN)], recorded)
    assert list(found.code) == [KERNEL] and found.notes == {}
    (build,) = found.code[KERNEL]
    assert (build.registers, build.ops["LDG.E.128"]) == (32, 10)


def test_a_file_that_is_no_cubin_is_a_note_never_an_error(tmp_path: Path, recorded: Path) -> None:
    ptx = tmp_path / "ptx_2.cubin"
    ptx.write_bytes(b"0" * 32 + b"//\n.version 8.0\n.target sm_90\n")
    found = disassembly.compiled_code([ptx, tmp_path / "gone.cubin", tmp_path], recorded)
    assert found.code == {}
    assert found.notes["ptx_2.cubin"] == "ptx_2.cubin could not be disassembled: not a cubin (PTX, or a cut file)"
    assert found.notes["gone.cubin"].startswith("gone.cubin could not be read: ")
    assert tmp_path.name in found.notes  # a directory is no file either


def test_a_cubin_cuobjdump_refuses_is_a_note_naming_its_kernel(tmp_path: Path) -> None:
    failing = fake_cuobjdump(tmp_path, 'sys.exit("cuobjdump fatal   : Could not open input file")')
    cut = tmp_path / "k.cubin"
    cut.write_bytes(CUBIN[: len(CUBIN) // 2] + CUBIN[-2000:])
    found = disassembly.compiled_code([cut], failing)
    assert found.notes == {
        KERNEL: "k.cubin could not be disassembled: cuobjdump exited 1: cuobjdump fatal   : Could not open input file"
    }


def test_garbage_from_cuobjdump_is_a_note(tmp_path: Path) -> None:
    garbage = fake_cuobjdump(tmp_path, 'print("\\x00 no sass here")')
    (tmp_path / "k.cubin").write_bytes(CUBIN)
    found = disassembly.compiled_code([tmp_path / "k.cubin"], garbage)
    assert found.notes == {KERNEL: "k.cubin could not be disassembled: cuobjdump found no kernel in it"}


def test_without_cuobjdump_each_kernel_is_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disassembly, "find_tool", lambda: None)
    (tmp_path / "k.cubin").write_bytes(CUBIN)
    found = disassembly.compiled_code([tmp_path / "k.cubin"])
    assert found.code == {} and "no cuobjdump" in found.notes[KERNEL]


def test_builds_of_one_name_are_kept_apart(tmp_path: Path, recorded: Path) -> None:
    found = disassembly.Compiled()
    a, b = sass.KernelCode(registers=32), sass.KernelCode(registers=40)
    for build in (a, b, a):
        found.add("k", build)
    assert found.code == {"k": [a, b]}


@pytest.mark.skipif(disassembly.find_tool() is None, reason="no cuobjdump here")
def test_the_real_cuobjdump_reads_the_recorded_cubin(tmp_path: Path) -> None:
    found = disassembly.compiled_code([cupy_entry(tmp_path, CUBIN)])
    (recorded,) = sass.summarize(lzma.decompress((SASS / "scale_relu_add.sass.xz").read_bytes()).decode()).values()
    assert found.code == {KERNEL: [recorded]}


def test_the_harness_notes_the_cubins_its_process_opens(tmp_path: Path) -> None:
    # An audit hook stays for the life of a process: this one is a child.
    script = f"""
import os, shutil, tempfile
from pathlib import Path
from fuseci.harness import cubins
d = Path({str(tmp_path)!r})
(d / "before.cubin").write_bytes(b"x")
cubins.listen()
(d / "triton.json").write_text("{{}}")
(d / "triton.cubin").read_bytes() if (d / "triton.cubin").exists() else (d / "triton.cubin").write_bytes(b"x")
with tempfile.NamedTemporaryFile(dir=d, delete=False) as tf:  # CuPy's write of a new entry
    tf.write(b"y")
shutil.move(tf.name, d / "abc_2.cubin")
print([p.name for p in cubins.opened()])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['triton.cubin', 'abc_2.cubin']"


def test_the_record_keeps_the_code_and_checks_it(tmp_path: Path) -> None:
    build = sass.KernelCode(registers=32, local_bytes=0, instructions=264, ops={"LDG.E.128": 10})
    record = HarnessRecord(
        suite="s", env={}, cases={}, complete=True, code={KERNEL: (build,)}, code_notes={"k": "k.cubin could not..."}
    )
    write_record(record, tmp_path / "r.harness.json")
    assert read_record(tmp_path / "r.harness.json") == record
    doc = json.loads((tmp_path / "r.harness.json").read_text())
    for bad, where in (
        ({KERNEL: []}, KERNEL),
        ({KERNEL: [{"registers": -1}]}, "registers"),
        ({KERNEL: [{"ops": {"LDG.E": "ten"}}]}, "ops"),
        ({KERNEL: [{"ops": {"<script>": 1}}]}, "ops"),
        ({KERNEL: [{"spills": 1}]}, "spills"),
        ([1], "code"),
    ):
        (tmp_path / "bad.harness.json").write_text(json.dumps({**doc, "code": bad}))
        with pytest.raises(ReportError, match=where):
            read_record(tmp_path / "bad.harness.json")


@pytest.mark.skipif(disassembly.find_tool() is None, reason="no cuobjdump here")
def test_a_cuobjdump_without_its_nvdisasm_is_a_note_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = disassembly.find_tool()
    assert tool is not None
    lone = tmp_path / "bin" / "cuobjdump"
    lone.parent.mkdir()
    shutil.copy(tool, lone)
    monkeypatch.setenv("PATH", str(lone.parent))
    monkeypatch.delenv("NVDISASM_PATH", raising=False)
    found = disassembly.compiled_code([cupy_entry(tmp_path, CUBIN)], tool=lone)
    assert found.code == {} and "nvdisasm" in found.notes[KERNEL]
