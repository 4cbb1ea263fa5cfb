"""The fuzz tests' seed, as a pytest plugin (``pytest_plugins`` in conftest.py).

Every fuzz test (:func:`helpers.fuzz_settings`) draws its examples from one seed,
``FUSECI_FUZZ_SEED``; without it, the run draws one (so that each CI run tries new examples),
prints it in pytest's header, and prints it again beside every fuzz test that fails:
``FUSECI_FUZZ_SEED=N pytest NODE`` replays the failure. The seed is drawn before pytest-xdist
starts its workers, which inherit it from the environment: every worker draws from the same.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from helpers import SEED_VARIABLE, fuzz_seed


def pytest_configure(config: pytest.Config) -> None:
    """Draw the run's seed unless one is given; set in the environment, so that any worker
    process of the run uses the same."""
    if not os.environ.get(SEED_VARIABLE, "").strip():
        os.environ[SEED_VARIABLE] = str(random.SystemRandom().randrange(2**32))
    fuzz_seed()  # a malformed seed stops the run here, with the fix


def pytest_report_header(config: pytest.Config) -> str:
    return f"fuzz seed: {fuzz_seed()} (replay with {SEED_VARIABLE}={fuzz_seed()})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and getattr(getattr(item, "obj", None), "fuseci_fuzz", False):
        replay = f"{SEED_VARIABLE}={fuzz_seed()} python -m pytest '{item.nodeid}'"
        report.sections.append(("fuzz seed", f"this fuzz test failed with seed {fuzz_seed()}; replay: {replay}"))
    return report
