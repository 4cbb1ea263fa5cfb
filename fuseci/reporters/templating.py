"""The Jinja2 templates of the HTML reports (``fuseci/reporters/templates``), autoescaping every value not already
:class:`markupsafe.Markup` (the charts' SVG from :mod:`fuseci.reporters.chartkit`). No template marks data safe."""

from __future__ import annotations

import functools
from typing import Any

import jinja2


@functools.cache
def environment() -> jinja2.Environment:
    """The templates' environment: autoescaped, undefined names are errors."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("fuseci.reporters", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(template: str, **context: Any) -> str:
    """``template`` rendered with ``context``."""
    return environment().get_template(template).render(**context)
