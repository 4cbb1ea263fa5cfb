"""A model case's variants from a factory (``factory:`` in the suite): each factory builds a ``torch.nn.Module``
once per case and process, under ``torch.manual_seed`` of its :attr:`fuseci.config.model.Factory.seed` (the same
weights in every process), and a variant calls it, eager or through ``torch.compile``, on the case's inputs.
PyTorch is imported only when a factory is called."""

from __future__ import annotations

import copy
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fuseci.config.model import Case, Variant
from fuseci.errors import HarnessError
from fuseci.harness import arrays
from fuseci.harness.correctness import BoundCall
from fuseci.records.harness import CaseRecord

#: The framework a factory's module takes its inputs in.
FRAMEWORK = "torch"
#: How much of what a factory raised a message quotes.
_QUOTED = 300


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise HarnessError(
            f"a variant names a factory of a torch.nn.Module but PyTorch is not installed ({exc}); install fuseci "
            "with the torch extra"
        ) from None
    return torch


def _raised(exc: BaseException) -> str:
    """What was raised, on one line, with where (the innermost frame)."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= _QUOTED else text[:_QUOTED] + "..."
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {text}{where}" if text else f"{type(exc).__name__}{where}"


def build(make: Callable[..., Any], variant: Variant, case: Case) -> Any:
    """The module the variant's factory ``make`` returns for the case's params, in ``eval()`` mode.

    Raises:
        HarnessError: the factory raised or returned no ``torch.nn.Module``; one line naming variant, factory and why.
    """
    assert variant.factory is not None, variant.id  # only factory variants are built
    torch = _torch()
    who = f"variant {variant.id!r}: factory {variant.fn}"
    torch.manual_seed(variant.factory.seed)
    try:
        module = make(**case.params)
    except Exception as exc:  # a user's factory may raise anything: the case's error, said in one line
        raise HarnessError(f"{who} raised {_raised(exc)}; fix the factory, or the case's params") from None
    if not isinstance(module, torch.nn.Module):
        cls = type(module)
        kind = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
        raise HarnessError(
            f"{who} returned {kind}, not a torch.nn.Module; return the model itself "
            "(built, on the GPU, in its inputs' dtype), not its weights, output or class"
        )
    module.eval()
    return module


def forward(module: Any, names: tuple[str, ...]) -> Callable[..., Any]:
    """``module(*inputs)`` under ``torch.no_grad()``, the keyword inputs passed in the order of ``names``."""

    def call(**inputs: Any) -> Any:
        with _torch().no_grad():
            return module(*(inputs[name] for name in names))

    return call


class Models:
    """The modules of one case's factory variants, each factory called once."""

    def __init__(self, case: Case, find: Callable[[str], Callable[..., Any]]) -> None:
        """``find`` imports a ``module:function`` reference (:func:`fuseci.harness.case_runner.resolve`)."""
        self.case = case
        self._find = find
        self._names = tuple(spec.name for spec in case.inputs)
        self._built: dict[str, Any] = {}

    def module(self, variant: Variant) -> Any:
        """The module of the variant's factory, built at its first use in this case.

        Raises:
            HarnessError: the factory cannot be imported, raised, or returned no module.
        """
        if variant.fn not in self._built:
            self._built[variant.fn] = build(self._find(variant.fn), variant, self.case)
        return self._built[variant.fn]

    def call(self, variant: Variant) -> BoundCall:
        """The variant bound to its module (compiled when its ``compile:`` says so).

        Raises:
            HarnessError: as :meth:`module`.
        """
        assert variant.factory is not None, variant.id  # only factory variants are bound here
        module = self.module(variant)
        options = variant.factory.compile
        runs = _torch().compile(module, **options.arguments()) if options is not None else module
        how = "compiled" if options is not None else "eager"
        return BoundCall(
            forward(runs, self._names), arrays.get(FRAMEWORK), {}, f"variant {variant.id!r} ({variant.fn}, {how})"
        )

    def reference(self) -> BoundCall | None:
        """The float64 reference of a case that names none: a float64 copy of its first factory
        variant's module, made at its first call; None when no variant names a factory.

        Raises:
            HarnessError: as :meth:`module`; at its call, the module cannot be copied.
        """
        first = next((v for v in self.case.variants if v.factory is not None), None)
        if first is None:
            return None
        who = f"reference (a float64 copy of {first.fn}'s module)"
        module, names = self.module(first), self._names
        made: list[Any] = []

        def call(**inputs: Any) -> Any:
            if not made:
                try:
                    made.append(copy.deepcopy(module).double())
                except Exception as exc:
                    raise HarnessError(
                        f"{who}: cannot make a float64 copy of the module for the case's reference ({_raised(exc)}); "
                        "name a float64 reference (reference: module:function) in the case"
                    ) from None
            return forward(made[0], names)(**inputs)

        return BoundCall(call, arrays.get(FRAMEWORK), {}, who, model=True)


def noted(case: Case, record: CaseRecord) -> CaseRecord:
    """The case's record with the compile options of its factory variants that compile."""
    options = {
        v.id: v.factory.compile.arguments()
        for v in case.variants
        if v.factory is not None and v.factory.compile is not None
    }
    return replace(record, compile_options=options) if options else record
