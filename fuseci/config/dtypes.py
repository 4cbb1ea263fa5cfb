"""The element types an input may have, each declared once: its size, how the harness keeps it
on the device (bfloat16 and float8 as raw bits, viewed by PyTorch), which array frameworks can
hold it, and its default correctness tolerances (docs/SUITES.md has the reasons).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The array frameworks a suite may hand its inputs over in (``framework:``), default first.
FRAMEWORKS: tuple[str, ...] = ("cupy", "torch")
DEFAULT_FRAMEWORK = FRAMEWORKS[0]


@dataclass(frozen=True, slots=True)
class MiniFloat:
    """A float format narrower than float16's NumPy support reaches, as sign, exponent and
    mantissa bits (IEEE-like: subnormals, a bias)."""

    exponent_bits: int
    """Width of the exponent field."""
    mantissa_bits: int
    """Width of the stored mantissa (without the implicit bit)."""
    bias: int
    """Exponent bias."""
    max_finite: float
    """Largest finite value; larger draws are clamped to it."""
    has_inf: bool
    """True when the all-ones exponent encodes inf and NaN (IEEE); False for the ``fn`` formats,
    whose all-ones exponent holds finite values except the one NaN pattern (all bits set)."""

    @property
    def epsilon(self) -> float:
        """Distance from 1.0 to the next larger value."""
        return 2.0**-self.mantissa_bits

    @property
    def min_normal(self) -> float:
        """Smallest positive normal value."""
        return 2.0 ** (1 - self.bias)


@dataclass(frozen=True, slots=True)
class DType:
    """One element type an input may have."""

    name: str
    """The name a suite writes (``dtype: bfloat16``), PyTorch's and ml_dtypes' name for it."""
    itemsize: int
    """Bytes per element."""
    kind: str
    """``float``, ``int`` or ``uint``."""
    storage: str
    """The NumPy dtype the harness keeps its elements in on the device: itself, or raw bits."""
    frameworks: tuple[str, ...]
    """The frameworks whose arrays can hold it."""
    rtol: float = 1e-5
    """Default relative tolerance of an output of this dtype."""
    atol: float = 1e-6
    """Default absolute tolerance of an output of this dtype."""
    minifloat: MiniFloat | None = None
    """The bit layout of a type kept as raw bits (None for NumPy's own types)."""

    @property
    def is_float(self) -> bool:
        """True for floating-point types."""
        return self.kind == "float"

    @property
    def correctness(self) -> tuple[float, float]:
        """(rtol, atol) for an output of this dtype when the suite states none."""
        return self.rtol, self.atol


_BF16 = MiniFloat(exponent_bits=8, mantissa_bits=7, bias=127, max_finite=(2 - 2**-7) * 2.0**127, has_inf=True)
_E4M3FN = MiniFloat(exponent_bits=4, mantissa_bits=3, bias=7, max_finite=448.0, has_inf=False)
_E5M2 = MiniFloat(exponent_bits=5, mantissa_bits=2, bias=15, max_finite=57344.0, has_inf=True)

_BOTH = FRAMEWORKS
_TORCH = ("torch",)

#: Every dtype an input may have, by name, in the order the docs list them.
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float64", 8, "float", "float64", _BOTH),
        DType("float32", 4, "float", "float32", _BOTH),
        # 16-bit floats: 2 and 4 machine epsilons.
        DType("float16", 2, "float", "float16", _BOTH, rtol=2 * 2.0**-10, atol=4 * 2.0**-10),
        DType(
            "bfloat16", 2, "float", "uint16", _TORCH, rtol=2 * _BF16.epsilon, atol=4 * _BF16.epsilon, minifloat=_BF16
        ),
        # float8: one step of the format, and the smallest normal value near zero.
        DType(
            "float8_e4m3fn",
            1,
            "float",
            "uint8",
            _TORCH,
            rtol=_E4M3FN.epsilon,
            atol=_E4M3FN.min_normal,
            minifloat=_E4M3FN,
        ),
        DType("float8_e5m2", 1, "float", "uint8", _TORCH, rtol=_E5M2.epsilon, atol=_E5M2.min_normal, minifloat=_E5M2),
        DType("int8", 1, "int", "int8", _BOTH),
        DType("int16", 2, "int", "int16", _BOTH),
        DType("int32", 4, "int", "int32", _BOTH),
        DType("int64", 8, "int", "int64", _BOTH),
        DType("uint8", 1, "uint", "uint8", _BOTH),
    )
}

#: The names, in order (the suite format's enum).
DTYPE_NAMES: tuple[str, ...] = tuple(DTYPES)


def dtype(name: str) -> DType:
    """The dtype called ``name``.

    Raises:
        KeyError: no such dtype.
    """
    return DTYPES[name]


def dtype_of(name: str) -> DType | None:
    """The dtype an array reports as ``name`` (``str(array.dtype)``: ``bfloat16``,
    ``torch.bfloat16``, ``float8_e4m3fn``...), or None when fuseci has no such dtype."""
    return DTYPES.get(name.removeprefix("torch."))
