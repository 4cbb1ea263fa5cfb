"""Array frameworks and the element types they bring, on any machine: the suite keys
(``framework``, ``kernels``, the dtypes), bfloat16 and float8 rounding against ml_dtypes, the
declared-kernels and compile-in-range checks, framework versions in the fingerprint, and what
the harness processes' environment holds."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from helpers import ROOT, variant_of
from philox import encode_host, host_values

from fuseci.config import names
from fuseci.config.dtypes import DTYPES, FRAMEWORKS, dtype, dtype_of
from fuseci.config.model import Case, InputSpec, KernelRule, Variant
from fuseci.config.parse import load_suite
from fuseci.errors import HarnessError, SuiteError
from fuseci.frames.inventory import KernelLaunch
from fuseci.harness.arrays import minifloat
from fuseci.harness.inputs import _store
from fuseci.judge import checks as ck
from fuseci.judge.verdict import CheckKind, Verdict, env_differences
from fuseci.measure.run import MeasureOptions
from fuseci.records.harness import FORMAT, CaseRecord, CaseStatus, CheckRecord, HarnessRecord

ML = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}

SUITE = """\
suite: t
defaults: {{framework: {default}}}
cases:
  - id: c
    inputs:
      x: {{shape: [1024], dtype: {dtype}}}
    variants:
      unfused: m.ops:f
      fused:
        fn: m.fused:f
{extra}
"""


def _load(tmp_path: Path, default: str = "cupy", dt: str = "float32", extra: str = "") -> object:
    path = tmp_path / "s.yaml"
    path.write_text(SUITE.format(default=default, dtype=dt, extra=extra))
    return load_suite(path)


# --- the suite keys --------------------------------------------------------------------------


def test_the_framework_is_inherited_and_may_be_overridden_per_variant(tmp_path: Path) -> None:
    suite = _load(tmp_path, "torch", extra="        framework: cupy")
    (case,) = suite.cases
    assert [(v.id, v.framework) for v in case.variants] == [("unfused", "torch"), ("fused", "cupy")]
    assert case.frameworks == ("torch", "cupy") and suite.frameworks == ("torch", "cupy")


def test_an_unknown_framework_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"s\.yaml:2: defaults\.framework: unknown array framework 'jax'.*cupy, torch"):
        _load(tmp_path, "jax")


@pytest.mark.parametrize("dt", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_a_dtype_cupy_cannot_hold_asks_for_torch_at_the_input(tmp_path: Path, dt: str) -> None:
    with pytest.raises(SuiteError) as err:
        _load(tmp_path, "cupy", dt)
    assert f"s.yaml:6: case 'c'.inputs.x: {dt} input, but variant 'unfused' takes cupy arrays" in str(err.value)
    assert "set `framework: torch`" in str(err.value)
    assert _load(tmp_path, "torch", dt).cases[0].inputs[0].dtype == dt


def test_only_the_variant_that_takes_cupy_arrays_is_named(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="variant 'fused' takes cupy arrays"):
        _load(tmp_path, "torch", "bfloat16", "        framework: cupy")


@pytest.mark.parametrize(
    ("count", "low", "high", "said"),
    [("1", 1, 1, "exactly 1"), ("'>= 2'", 2, None, "at least 2"), ("'<= 3'", 0, 3, "at most 3"),
     ("'1..3'", 1, 3, "1 to 3"), ("0", 0, 0, "exactly 0"), ("'== 4'", 4, 4, "exactly 4")],
)  # fmt: skip
def test_declared_kernel_counts(tmp_path: Path, count: str, low: int, high: int | None, said: str) -> None:
    suite = _load(tmp_path, extra=f"        kernels: {{'triton_.*': {count}}}")
    (rule,) = variant_of(suite.cases[0], "fused").kernels
    assert (rule.pattern, rule.low, rule.high, rule.describe()) == ("triton_.*", low, high, said)
    assert rule.holds(low) and not rule.holds(low - 1) and (high is None or not rule.holds(high + 1))


@pytest.mark.parametrize(
    ("kernels", "message"),
    [
        ("{'triton_.*': 'two'}", "expected a kernel count for 'triton_.*'"),
        ("{'triton_.*': -1}", "expected a kernel count"),
        ("{'triton_.*': '3..1'}", "3 is above 1"),
        ("{'triton_(': 1}", "is not a regular expression"),
        ("{}", "names no kernel"),
        ("[triton_x]", "expected a mapping"),
    ],
)
def test_declared_kernels_that_cannot_be_read_say_why(tmp_path: Path, kernels: str, message: str) -> None:
    with pytest.raises(SuiteError, match=message):
        _load(tmp_path, extra=f"        kernels: {kernels}")


def test_shipped_pytorch_suites_load(root: Path) -> None:
    for name in ("pytorch", "pytorch_mutants"):
        suite = load_suite(root / "suites" / f"{name}.yaml")
        assert suite.frameworks == ("torch",)
        assert all(i.dtype == "bfloat16" for c in suite.cases for i in c.inputs)
        compiled = [v for c in suite.cases for v in c.variants if v.id == "compiled"]
        assert compiled and all(
            r.pattern == "triton_.*" and r.describe() == "exactly 1" for v in compiled for r in v.kernels
        )


# --- element types ---------------------------------------------------------------------------


def test_every_dtype_keeps_its_size_and_its_frameworks() -> None:
    assert tuple(DTYPES) == tuple(d.name for d in DTYPES.values())
    for d in DTYPES.values():
        assert np.dtype(d.storage).itemsize == d.itemsize, d.name
        assert set(d.frameworks) <= set(FRAMEWORKS) and d.frameworks
        assert (d.minifloat is None) == (d.storage == d.name)
        rtol, atol = d.correctness
        assert 0 < rtol < 1 and 0 < atol < 1
    assert "cupy" not in dtype("bfloat16").frameworks
    assert dtype_of("torch.bfloat16") is dtype("bfloat16") and dtype_of("bool") is None


def test_tolerances_grow_with_the_rounding_of_the_dtype() -> None:
    order = ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
    assert [dtype(n).rtol for n in order] == sorted(dtype(n).rtol for n in order)
    assert dtype("float32").correctness == (1e-5, 1e-6)  # what fuseci always had
    assert dtype("bfloat16").rtol == 2 * 2.0**-7 and dtype("float8_e4m3fn").rtol == 2.0**-3


@pytest.mark.parametrize("name", list(ML))
def test_rounding_to_a_minifloat_is_ml_dtypes_rounding(name: str) -> None:
    kind = dtype(name)
    fmt = kind.minifloat
    assert fmt is not None
    rng = np.random.default_rng()
    for scale in (1e-6, 1e-3, 1.0, 30.0, 1e4, 1e30):
        x = (rng.standard_normal(20_000) * scale).astype(np.float32)
        ties = np.array(
            [1.0 + 2.0**-fmt.mantissa_bits / 2, 3 * fmt.min_normal * 2.0**-fmt.mantissa_bits / 2], np.float32
        )
        x = np.concatenate([x, ties, -ties, [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
        mine = encode_host(x, fmt, kind.storage)
        theirs = np.clip(x, -fmt.max_finite, fmt.max_finite).astype(ML[name]).view(kind.storage)
        assert np.array_equal(mine, theirs), (name, scale)


@pytest.mark.parametrize("name", list(ML))
def test_every_bit_pattern_reads_back_as_ml_dtypes_reads_it(name: str) -> None:
    kind = dtype(name)
    bits = np.arange(1 << (8 * kind.itemsize), dtype=np.int64).astype(kind.storage)
    assert kind.minifloat is not None
    with np.errstate(invalid="ignore"):  # ml_dtypes warns on the NaN patterns
        theirs = bits.view(ML[name]).astype(np.float64)
    assert np.array_equal(minifloat.decode_host(bits, kind.minifloat), theirs, equal_nan=True)
    assert math.isclose(
        minifloat.decode_host(minifloat.max_bits(kind.minifloat), kind.minifloat), kind.minifloat.max_finite
    )
    assert math.isnan(minifloat.decode_host(minifloat.nan_bits(kind.minifloat), kind.minifloat))


@pytest.mark.parametrize("name", list(ML))
def test_minifloat_inputs_are_the_float32_draw_rounded(name: str) -> None:
    """Element i of a bfloat16 or float8 input is element i of the float32 input of the same
    seed, rounded to the format: the same draw, in fewer bits."""
    kind = dtype(name)
    assert kind.minifloat is not None
    for distribution in ("normal", "uniform", "randint"):
        spec = InputSpec("x", (5000,), name, distribution, seed=42, low=-3, high=4)
        wide = host_values(replace(spec, dtype="float32"))
        bits = host_values(spec)
        assert bits.dtype == np.dtype(kind.storage)
        top = kind.minifloat.max_finite
        assert np.array_equal(bits, np.clip(wide, -top, top).astype(ML[name]).view(kind.storage)), distribution
    assert "fuseci_encode_e8m7" in _store("normal", "bfloat16") and "fuseci_encode_e4m3" in _store(
        "randint", "float8_e4m3fn"
    )
    assert "fuseci_encode" not in _store("normal", "float16")


def test_the_device_source_holds_the_format_s_constants() -> None:
    source = minifloat.cuda_source(dtype("float8_e4m3fn").minifloat)
    assert (
        "unsigned int fuseci_encode_e4m3(float f)" in source
        and "double fuseci_decode_e4m3(unsigned int bits)" in source
    )
    assert "448.0" in source and "126u" in source  # the largest finite value and its bits


# --- outputs from any producer ---------------------------------------------------------------


def test_an_output_that_is_no_array_names_what_is_accepted() -> None:
    from fuseci.harness.arrays import take

    with pytest.raises(
        HarnessError,
        match=r"variant 'f' output 1 is dict; return an array or tensor \(CuPy, PyTorch, or any DLPack or CUDA Array Interface producer",
    ):
        take((np.zeros(3), {"a": 1}), "variant 'f'")
    with pytest.raises(HarnessError, match="returned no output"):
        take((), "variant 'f'")


def test_a_host_array_from_dlpack_stays_on_the_host() -> None:
    from fuseci.harness.arrays import take

    (t,) = take(np.arange(4, dtype=np.float32), "reference")
    assert t.on_host and t.dtype.name == "float32" and t.nbytes == 16


# --- the checks ------------------------------------------------------------------------------


def _ctx(launched: list[str], rules: tuple[KernelRule, ...]) -> ck.VariantContext:
    variant = Variant("compiled", "m:f", {}, kernels=rules)
    case = Case("c", "", (), {}, (Variant("unfused", "m:g", {}), variant), None, None, {}, 1)
    kernels = tuple(KernelLaunch(n, 1, 128, 32) for n in launched)
    return ck.VariantContext(case, variant, {}, None, kernels, {}, None)


def test_declared_kernels_pass_when_launched_as_declared() -> None:
    d = ck.kernels_check(_ctx(["triton_poi_fused_add_gelu_0"], (KernelRule("triton_.*", 1, 1),)))
    assert d is not None and d.verdict is Verdict.PASS and d.check is CheckKind.KERNELS
    assert "as declared (exactly 1 'triton_.*')" in d.message


def test_a_graph_break_and_a_fallback_to_eager_fail_the_declared_kernels() -> None:
    rule = (KernelRule("triton_.*", 1, 1),)
    split = ck.kernels_check(_ctx(["triton_poi_fused_add_gelu_0", "triton_poi_fused_add_1"], rule))
    assert split is not None and split.verdict is Verdict.REGRESSED
    assert (
        "exactly 1 matching 'triton_.*' declared, 2: triton_poi_fused_add_gelu_0, triton_poi_fused_add_1"
        in split.message
    )
    eager = ck.kernels_check(_ctx(["vectorized_elementwise_kernel", "elementwise_kernel"], rule))
    assert eager is not None and eager.verdict is Verdict.REGRESSED
    assert "declared, none" in eager.message and "fell back to eager" in eager.message


def test_a_pattern_matches_the_whole_kernel_name() -> None:
    d = ck.kernels_check(_ctx(["my_triton_kernel"], (KernelRule("triton_.*", 1, 1),)))
    assert d is not None and d.verdict is Verdict.REGRESSED
    assert ck.kernels_check(_ctx(["x"], ())) is None


def test_a_compilation_in_the_range_is_an_error_a_planted_one_is_caught() -> None:
    variant = Variant("recompiles", "m:f", {}, candidate_for="compiled", caught_by=("compile",))
    case = Case("c", "", (), {}, (Variant("unfused", "m:g", {}), variant), None, None, {}, 1)
    d = ck.compile_check(case, variant, ("Triton compiled salted_kernel",))
    assert d.verdict is Verdict.ERROR and d.check is CheckKind.COMPILE
    assert d.message.startswith("recompiles compiled inside its measured range (Triton compiled salted_kernel)")
    judged = ck.planted(case, variant, [d])
    assert [c.verdict for c in judged] == [Verdict.PASS, Verdict.PASS]
    assert judged[-1].message == "planted regression caught by compile"
    missed = ck.planted(case, variant, [])
    assert missed[-1].verdict is Verdict.REGRESSED and "NOT caught by compile" in missed[-1].message


# --- records, fingerprint, environment ------------------------------------------------------


def test_records_keep_first_calls_compilations_and_notes(tmp_path: Path) -> None:
    from fuseci.records.harness import read_record, write_record

    check = CheckRecord("fused", "reference", 0, False, 3, 10, math.inf, math.inf, 7, 0.016, 0.031, 3, "bfloat16")
    case = CaseRecord(
        "c", CaseStatus.OK, checks=(check,), first_call_ns={"compiled": 3.2e9}, compiled={"fused": ("Triton compiled k",)},
        autotuned={"compiled": ("CachingAutotuner autotuned triton_red_fused_0",)},
        notes=("fused: torch's caching allocator took 1.0 MB new",),
    )  # fmt: skip
    record = HarnessRecord("s", {"torch_version": "2.11.0"}, {"c": case}, complete=True)
    write_record(record, tmp_path / "r.json")
    back = read_record(tmp_path / "r.json")
    assert back == record and FORMAT.dumps(back.to_json()) == FORMAT.dumps(record.to_json())
    said = check.describe()
    assert "outside rtol=0.016, atol=0.031 for bfloat16" in said
    assert "3 elements NaN where the expected value is not: never written" in said


def test_framework_versions_join_the_fingerprint_only_where_a_suite_uses_them() -> None:
    from fuseci.judge.baseline import from_results

    assert set(names.FRAMEWORK_ENV_FIELDS) <= set(names.ENV_FIELDS)
    base = {"gpu_name": "NVIDIA H200", "torch_version": "2.11.0+cu130", "triton_version": "3.6.0"}
    upgraded = {**base, "torch_version": "2.12.0+cu130"}
    (diff,) = env_differences(base, upgraded, frozenset())
    assert (diff.field, diff.baseline_value, diff.current, diff.accepted) == (
        "torch_version",
        "2.11.0+cu130",
        "2.12.0+cu130",
        False,
    )
    assert env_differences(base, upgraded, frozenset({"torch_version"}))[0].accepted
    cupy_only = {"gpu_name": "NVIDIA H200"}
    assert env_differences(cupy_only, {**cupy_only, "unrelated": 1}, frozenset()) == ()

    class Results:
        def __init__(self, env: dict) -> None:
            import pandas as pd

            from fuseci.records.harness import HarnessRecord

            self.env, self.suite = env, "s"
            self.record = HarnessRecord("s", env, {}, complete=True)
            self.variants = pd.DataFrame({names.CASE: [], names.VARIANT: []})

    assert "torch_version" not in from_results(Results(cupy_only), set()).env  # type: ignore[arg-type]
    assert from_results(Results(base), set()).env["torch_version"] == "2.11.0+cu130"  # type: ignore[arg-type]


def test_the_harness_environment_shares_compile_caches_and_compiles_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_COMPILE_THREADS", "PYTHONPYCACHEPREFIX"):
        monkeypatch.delenv(var, raising=False)
    env = MeasureOptions(report_dir=tmp_path / "out", device="1").env
    assert env == {
        "CUDA_VISIBLE_DEVICES": "1",
        "TORCHINDUCTOR_CACHE_DIR": str((tmp_path / "out" / "compile-cache" / "inductor").absolute()),
        "TRITON_CACHE_DIR": str((tmp_path / "out" / "compile-cache" / "triton").absolute()),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "PYTHONPYCACHEPREFIX": str((tmp_path / "out" / "compile-cache" / "python").absolute()),
        "PYTHONDONTWRITEBYTECODE": "",
    }
    monkeypatch.setenv("TRITON_CACHE_DIR", "/mine")
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "pyc"))
    env = MeasureOptions(report_dir=tmp_path).env
    assert not {"TRITON_CACHE_DIR", "TORCHINDUCTOR_COMPILE_THREADS", "PYTHONPYCACHEPREFIX"} & set(env)  # the user's win
    assert "PYTHONDONTWRITEBYTECODE" not in env


def test_the_harness_keeps_bytecode_in_the_compile_cache_even_where_writing_it_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``PYTHONDONTWRITEBYTECODE`` set (as CI images often do), a harness process still keeps
    the bytecode of what it imports, under the compile cache and nowhere else, so the next run
    does not compile the frameworks' modules from source again."""
    import subprocess
    import sys

    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("VALUE = 41 + 1\n")
    options = MeasureOptions(report_dir=tmp_path / "out")
    env = {**os.environ, **options.env, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", "import sys, pkg; print(sys.dont_write_bytecode, pkg.VALUE)"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "42"]
    kept = list((options.compile_cache / "python").rglob("*.pyc"))
    assert any(p.name.startswith("__init__.") for p in kept), kept
    assert not list(tree.rglob("*.pyc"))  # nothing in the user's tree
    mine = {**os.environ, "PYTHONPATH": str(tree)}  # without fuseci's environment, Python writes nothing
    subprocess.run(argv, env=mine, capture_output=True, text=True, check=True)
    assert not list(tree.rglob("*.pyc"))


def test_doctor_names_the_array_frameworks_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from fuseci.doctor import host

    versions = {"cupy-cuda13x": "14.2.0", "torch": "2.11.0"}

    def version(dist: str) -> str:
        if dist in versions:
            return versions[dist]
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(metadata, "version", version)
    assert host.framework_versions() == {"CuPy": "14.2.0", "PyTorch": "2.11.0"}
    check = host.check_fuseci()
    assert "array frameworks: CuPy 14.2.0, PyTorch 2.11.0 (Triton not installed)" in check.detail
    assert check.facts["frameworks"] == {"CuPy": "14.2.0", "PyTorch": "2.11.0"}


def test_fuseci_itself_keeps_bytecode_in_the_compile_cache_only_where_writing_it_is_off(tmp_path: Path) -> None:
    """The process that runs ``fuseci run`` keeps its bytecode (pandas, the report reader) under
    the compile cache when the machine writes none, and leaves a machine that writes bytecode,
    or a prefix of the user's, as it is."""
    import subprocess
    import sys

    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("VALUE = 41 + 1\n")
    cache = tmp_path / "out" / "compile-cache"
    code = (
        "import sys; from pathlib import Path; from fuseci.measure import caches; "
        f"kept = caches.keep(Path({str(tmp_path / 'out')!r})); import pkg; print(kept, sys.dont_write_bytecode, pkg.VALUE)"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    base["PYTHONPATH"] = os.pathsep.join([str(tree), str(Path.cwd())])

    def run(**env: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run(PYTHONDONTWRITEBYTECODE="1") == ["True", "False", "42"]
    assert any(p.name.startswith("__init__.") for p in (cache / "python").rglob("*.pyc"))
    assert not list(tree.rglob("*.pyc"))  # nothing beside the sources
    mine = tmp_path / "mine"
    assert run(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(mine)) == ["False", "True", "42"]
    assert not mine.exists()  # the user's prefix, with writing off as the user asked
    assert run()[:2] == ["False", "False"]  # a machine that writes bytecode: left as it is


def test_the_harness_ends_with_its_exit_code_and_its_output_flushed(tmp_path: Path) -> None:
    """The harness process ends at once (``os._exit``) once its work is done: its exit code and
    its last message must still come out."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "fuseci.harness", str(tmp_path / "missing.yaml"), "--record", str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3
    assert done.stderr.rstrip().splitlines()[-1].startswith("fuseci-harness: error:")
    assert "missing.yaml" in done.stderr


def test_nothing_heavy_is_imported_before_the_profiled_run_starts(tmp_path: Path) -> None:
    """Until ncu is on its way, ``fuseci run`` imports neither pandas nor the report reader (they
    would hold the interpreter while the spawn is prepared); the warming thread starts only then."""
    import subprocess
    import sys

    code = f"""
import subprocess, sys
from pathlib import Path
from fuseci.api import running
from fuseci.config.parse import load_suite
from fuseci.measure import process, profile
import fuseci.measure.run as m
seen = []
def fake_run_logged(argv, log_path, timeout_s, cwd=None, env=None, started=None):
    seen.append(sorted({{"pandas", "ncu_report"}} & set(sys.modules)))
    started()
    raise FileNotFoundError(argv[0])
profile.find_ncu = lambda explicit=None: "ncu"
profile.ncu_version = lambda exe: "2025.3.1.0"
process.run_logged = fake_run_logged
process.start_logged = lambda *a, **k: subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
suite = load_suite(Path({str(ROOT / "suites" / "elementwise.yaml")!r}))
options = running.RunOptions(report_dir=Path({str(tmp_path)!r}))
try:
    running.check_results(suite, options)
except Exception as exc:
    pass
m.warm_imports().join()
print(seen, sorted({{"pandas", "ncu_report"}} & set(sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[[]] ['ncu_report', 'pandas']", done.stderr


def test_the_judging_imports_load_beside_the_harness_not_before_it() -> None:
    """``fuseci run`` starts the harness processes before it imports pandas and NVIDIA's report
    reader (0.4-0.6 s), which a thread of their own then loads while the harness starts."""
    import subprocess
    import sys

    code = (
        "import sys, fuseci.api.running, fuseci.measure.run as m; "
        "before = sorted({'pandas', 'ncu_report'} & set(sys.modules)); m.warm_imports().join(); "
        "print(before, sorted({'pandas', 'ncu_report'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[] ['ncu_report', 'pandas']"


def _fake_compiler_module(
    monkeypatch: pytest.MonkeyPatch, module: str, name: str, calls: list[str], fail: bool = False
):
    import functools
    import types

    @functools.lru_cache
    def key() -> str:
        calls.append(name)
        if fail:
            raise RuntimeError(f"{name} cannot hash")
        return name

    fake = types.ModuleType(module)
    setattr(fake, name, key)
    monkeypatch.setitem(sys.modules, module, fake)
    return key


def test_the_compilers_cache_keys_are_hashed_once_beside_the_gpu_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's and Inductor's once-per-process hashing (their cache keys) runs in a thread of its
    own once the suite's modules brought them in, and is done before any variant is called."""
    from fuseci.harness.arrays import frameworks

    monkeypatch.setattr(frameworks, "_key_threads", [])
    calls: list[str] = []
    _fake_compiler_module(monkeypatch, "triton.runtime.cache", "triton_key", calls, fail=True)
    torch_key = _fake_compiler_module(monkeypatch, "torch._inductor.codecache", "torch_key", calls)
    frameworks.warm_compiler_keys()
    frameworks.warm_compiler_keys()  # once per process
    frameworks.compiler_keys_ready()
    assert calls == ["triton_key", "torch_key"]  # a key that fails leaves the next one computed
    assert torch_key() == "torch_key" and calls == ["triton_key", "torch_key"]  # the compile finds it cached
    assert len(frameworks._key_threads) == 1 and not frameworks._key_threads[0].is_alive()


def test_no_compiler_is_imported_for_the_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from fuseci.harness.arrays import frameworks

    monkeypatch.setattr(frameworks, "_key_threads", [])
    for module, _ in frameworks.COMPILER_KEYS:
        monkeypatch.delitem(sys.modules, module, raising=False)
    frameworks.warm_compiler_keys()
    frameworks.compiler_keys_ready()
    assert frameworks._key_threads == []
    assert not {m for m, _ in frameworks.COMPILER_KEYS} & set(sys.modules)
