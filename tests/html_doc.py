"""A small reading of an HTML document for tests: every element with its attributes, its
ancestors and its text, parsed with the standard library's HTML parser (no browser)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from html.parser import HTMLParser

#: Elements that never have an end tag.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parent: Element | None
    content: list[Element | str] = field(default_factory=list)
    """Child elements and text, in document order."""

    @property
    def children(self) -> list[Element]:
        return [c for c in self.content if isinstance(c, Element)]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.iter()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes())
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def all_text(self) -> str:
        return "".join(c if isinstance(c, str) else c.all_text() for c in self.content)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.content.append(element)
        if "id" in element.attrs:
            self.ids.append(element.attrs["id"])
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.content.append(element)
        if "id" in element.attrs:
            self.ids.append(element.attrs["id"])

    def handle_endtag(self, tag: str) -> None:
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.content.append(data)


def parse(text: str) -> tuple[Element, list[str]]:
    """The document's root and every id, in document order."""
    parser = _Parser()
    parser.feed(text)
    parser.close()
    return parser.root, parser.ids


@functools.cache
def regressed_comparisons() -> tuple:
    """The recorded regressed elementwise run judged against the committed H200 baselines
    (computed once per test session)."""
    from conftest import ELEMENTWISE, H200_BASELINES, REGRESSED_REPORT

    from fuseci import api
    from fuseci.config.parse import load_suite

    options = api.RunOptions(baselines=H200_BASELINES, from_report=REGRESSED_REPORT)
    return (api.check(load_suite(ELEMENTWISE), options),)


@functools.cache
def regressed_html() -> str:
    """Its HTML report (rendered once per test session)."""
    from fuseci.reporters import html

    return html.render(list(regressed_comparisons()))
