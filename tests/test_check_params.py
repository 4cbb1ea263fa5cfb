"""``fuseci check`` compares each function's parameters with the names its case gives (inputs and
params, passed by keyword), read from source without importing anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write
from typer.testing import CliRunner

from fuseci.cli import app

runner = CliRunner()

SUITE = """\
suite: demo
cases:
  - id: c1
    inputs:
      x: {shape: [67108864]}
    params: {alpha: 2.0}
    variants:
      unfused: kern.ops:unfused
      fused: kern.ops:fused
    reference: kern.ops:reference
"""
GOOD = "def unfused(x, alpha):\n    return x\n\ndef reference(x, alpha):\n    return x\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(project: Path, fused: str, suite: str = SUITE):
    write(project / "kern" / "__init__.py", "")
    write(project / "kern" / "ops.py", GOOD + fused)
    path = write(project / "suites" / "s.yaml", suite)
    return path, runner.invoke(app, ["check", str(path)])


def test_an_input_the_function_does_not_take_is_an_error(project: Path) -> None:
    path, result = check(project, "def fused(inp, alpha):\n    return inp\n")
    assert result.exit_code == 3, result.output
    assert (
        f"{path}:9: case 'c1'.variants.fused: 'kern.ops:fused': fused() parameter 'inp' is given by no input or "
        "params entry of the case; did you mean 'x'? name an input or a params entry 'inp', or give the "
        "parameter a default"
    ) in result.stderr
    assert (
        f"{path}:9: case 'c1'.variants.fused: 'kern.ops:fused': fused() the case gives 'x', which it takes no "
        "parameter for; did you mean 'inp'? rename the input or params entry, or add the parameter"
    ) in result.stderr
    assert "all valid" not in result.stdout


def test_a_param_the_function_does_not_take_is_an_error(project: Path) -> None:
    path, result = check(project, "def fused(x):\n    return x\n")
    assert result.exit_code == 3
    assert f"{path}:9: case 'c1'.variants.fused: 'kern.ops:fused': fused() the case gives 'alpha'" in result.stderr
    assert result.stderr.count("kern.ops:") == 1  # unfused and the reference take what the case gives


def test_the_reference_is_checked_at_its_line(project: Path) -> None:
    suite = SUITE.replace("reference: kern.ops:reference", "reference: kern.ops:ref2")
    path, result = check(project, "def fused(x, alpha):\n    return x\n\ndef ref2(x):\n    return x\n", suite)
    assert result.exit_code == 3
    assert f"{path}:10: case 'c1'.reference: 'kern.ops:ref2': ref2() the case gives 'alpha'" in result.stderr


@pytest.mark.parametrize(
    "fused",
    [
        "def fused(x, alpha, beta=1.0):\n    return x\n",  # a default need not be given
        "def fused(x, *, alpha, out=None):\n    return x\n",  # keyword-only
        "def fused(x, **kw):\n    return x\n",  # **kwargs takes any name
        "def fused(*args, **kw):\n    return 0\n",
        "def fused(x, *args, alpha):\n    return x\n",
        "def fused(w=None, /, *, x, alpha):\n    return x\n",  # a positional-only one with a default
        "import functools\n\ndef _g(x, alpha, beta):\n    return x\n\nfused = functools.partial(_g, beta=1)\n",
        "class _K:\n    def __call__(self, y):\n        return y\n\nfused = _K()\n",  # an instance: not read
        "import mylib\n\n@mylib.wrap\ndef fused(y):\n    return y\n",  # a decorator that may change them
        "import torch\n\n@torch.compile(mode='max-autotune')\ndef fused(x, alpha):\n    return x\n",
        "import torch\n\ndef _g(x, alpha):\n    return x\n\nfused = torch.compile(_g)\n",
        "from elsewhere import fused\n",  # imported: not followed
    ],
)
def test_what_may_take_the_names_or_cannot_be_read_passes(project: Path, fused: str) -> None:
    torch = "import torch" in fused  # a torch-only module takes torch tensors
    _, result = check(
        project, fused, SUITE.replace("cases:", "defaults: {framework: torch}\ncases:") if torch else SUITE
    )
    assert result.exit_code == 0, result.output
    assert "all valid" in result.stdout


def test_torch_compile_of_a_function_is_read_as_the_function(project: Path) -> None:
    path, result = check(project, "import torch\n\ndef _g(inp, alpha):\n    return inp\n\nfused = torch.compile(_g)\n")
    assert result.exit_code == 3
    assert f"{path}:9: case 'c1'.variants.fused: 'kern.ops:fused': _g() parameter 'inp'" in result.stderr


def test_a_positional_only_parameter_without_default_is_an_error(project: Path) -> None:
    _, result = check(project, "def fused(x, /, alpha):\n    return x\n")
    assert result.exit_code == 3
    assert "fused() parameter 'x' is positional-only (before /), but inputs and params are passed by keyword" in (
        result.stderr
    )
    assert "the case gives 'x'" in result.stderr


@pytest.mark.parametrize(
    ("params", "fused", "said"),
    [
        (
            "{alpha: 2.0, eps: 1e-06}",
            "def fused(x, alpha, eps: float = 1e-6):\n    return x\n",
            "fused() parameter 'eps' takes a float (annotated float), but params gives string '1e-06'; YAML 1.1 "
            "reads 1e-06 as a string, not a number (a float needs a dot, and an exponent its sign): write 1.0e-06",
        ),
        (
            "{alpha: 2.0, eps: 1e-06}",
            "def fused(x, alpha, eps=1e-6):\n    return x\n",
            "fused() parameter 'eps' takes a float (default 1e-06), but params gives string '1e-06'; YAML 1.1",
        ),
        (
            "{alpha: 2.0, n: 2.5}",
            "def fused(x, alpha, n: int = 2):\n    return x\n",
            "fused() parameter 'n' takes an int (annotated int), but params gives number 2.5; give it an int",
        ),
        (
            "{alpha: 2.0, flag: 1}",
            "def fused(x, alpha, flag=False):\n    return x\n",
            "fused() parameter 'flag' takes a bool (default False), but params gives integer 1; give it a bool",
        ),
    ],
)
def test_a_param_whose_type_contradicts_the_functions_is_an_error(project: Path, params, fused, said) -> None:
    path, result = check(project, fused, SUITE.replace("{alpha: 2.0}", params))
    assert result.exit_code == 3, result.output
    assert f"{path}:9: case 'c1'.variants.fused: 'kern.ops:fused': {said}" in result.stderr


def test_params_of_the_types_the_function_says_pass(project: Path) -> None:
    fused = "def fused(x, alpha: float, n: int = 2, eps=1e-6, name='a', on=True):\n    return x\n"
    params = "{alpha: 2, n: 3, eps: 1.0e-06, name: b, on: false}"
    _, result = check(project, fused, SUITE.replace("{alpha: 2.0}", params))
    assert result.exit_code == 3  # unfused and the reference take no n, eps...: only that
    assert "takes a" not in result.stderr, result.stderr


def test_a_yaml_11_string_where_a_number_goes_says_why(project: Path) -> None:
    suite = SUITE.replace("    variants:", "    correctness: {rtol: 1e-5}\n    variants:")
    path, result = check(project, "def fused(x, alpha):\n    return x\n", suite)
    assert result.exit_code == 3
    assert (
        f"{path}:7: case 'c1'.correctness.rtol: expected a finite number, got string '1e-5'; YAML 1.1 reads 1e-5 "
        "as a string, not a number (a float needs a dot, and an exponent its sign): write 1.0e-05"
    ) in result.stderr


TORCH_ONLY = "import torch\n\ndef fused(x, alpha):\n    return torch.relu(x)\n"


@pytest.mark.parametrize("stated", ["", "defaults: {framework: cupy}\n"])
def test_cupy_arrays_for_a_function_whose_module_imports_torch_alone_is_an_error(project: Path, stated) -> None:
    path, result = check(project, TORCH_ONLY, SUITE.replace("cases:", stated + "cases:"))
    assert result.exit_code == 3, result.output
    line = 9 + bool(stated)
    assert (
        f"{path}:{line}: case 'c1'.variants.fused: 'kern.ops:fused': fused() is given cupy arrays (framework: "
        "cupy), but its module imports torch and not cupy; set `framework: torch` (in defaults, the case or the "
        "variant)"
    ) in result.stderr


@pytest.mark.parametrize(
    "kernel",
    [
        "import triton\n\n@triton.jit\ndef fused(x, alpha):\n    pass\n",
        "from triton import jit\n\n@jit\ndef fused(x, alpha):\n    pass\n",
        "import triton as tr\n\n@tr.autotune(configs=[], key=[])\n@tr.jit\ndef fused(x, alpha):\n    pass\n",
        "from numba import cuda\n\n@cuda.jit\ndef fused(x, alpha):\n    pass\n",
    ],
)
def test_a_gpu_kernel_named_as_a_variant_is_an_error(project: Path, kernel: str) -> None:
    path, result = check(project, kernel)
    assert result.exit_code == 3, result.output
    assert f"{path}:9: case 'c1'.variants.fused: 'kern.ops:fused': fused() is a GPU kernel (@" in result.stderr
    assert "name the Python function that launches it" in result.stderr


def test_a_misspelt_module_or_package_gets_a_did_you_mean(project: Path) -> None:
    suite = SUITE.replace("unfused: kern.ops:unfused", "unfused: kren.ops:unfused").replace(
        "fused: kern.ops:fused", "fused: kern.opz:fused"
    )
    path, result = check(project, "def fused(x, alpha):\n    return x\n", suite)
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"fuseci: error: {path}:8: case 'c1'.variants.unfused: 'kren.ops:unfused': no module")
    assert "; did you mean 'kern'?; fix the reference" in lines[0]
    assert "has no module 'opz'; did you mean 'ops'?; fix the reference" in lines[1]


def test_a_structural_error_hides_no_problem_of_the_other_cases(project: Path) -> None:
    suite = SUITE.replace("    variants:", "    varients:") + (
        "  - id: c2\n    inputs:\n      x: {shape: [67108864]}\n    params: {alpha: 2.0}\n"
        "    variants:\n      unfused: kern.ops:unfusd\n      fused: kern.ops:fused\n"
    )
    path, result = check(project, "def fused(x, alpha: float):\n    return x\n", suite)
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert any("unknown key 'varients'; did you mean 'variants'?" in line for line in lines)
    assert f"fuseci: error: {path}:16: case 'c2'.variants.unfused: 'kern.ops:unfusd': module" in lines[-1]
    assert "did you mean 'unfused'?" in lines[-1]
