"""Safe prompt templates for pipeline steps: `{{ path }}` placeholders and nothing else.

A path is dot-separated names (`review`, `meta.product`, `steps.classify.answer`) or list indices
(`items.0`). It is looked up in plain JSON data — dict keys and list indices only: no attribute
access, no calls, no filters, no expressions, so an input line can never make a template run code.
Text outside placeholders is copied as is; a value that is not a string is written as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.([A-Za-z_][A-Za-z0-9_-]*|[0-9]+))*")


class TemplateSyntaxError(ValueError):
    """A template that is not `text {{ path }} text`; the message names the placeholder."""


class MissingField(LookupError):
    """A placeholder's path is absent from the data; the message names the path."""


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text parts around placeholder paths (len(texts) == len(paths)+1)."""

    texts: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]

    @classmethod
    def parse(cls, source: str) -> Template:
        texts: list[str] = []
        paths: list[tuple[str, ...]] = []
        pos = 0
        for m in _PLACEHOLDER.finditer(source):
            inner = m.group(1).strip()
            if not _PATH.fullmatch(inner):
                raise TemplateSyntaxError(
                    f"placeholder {m.group(0)!r}: only a field path such as {{{{ text }}}} or "
                    "{{ steps.classify.answer }} is allowed"
                )
            texts.append(source[pos : m.start()])
            paths.append(tuple(inner.split(".")))
            pos = m.end()
        rest = source[pos:]
        if "{{" in rest or "}}" in rest:
            raise TemplateSyntaxError("unbalanced '{{' or '}}'")
        texts.append(rest)
        return cls(tuple(texts), tuple(paths))

    def step_refs(self) -> set[str]:
        """The earlier steps this template reads (`steps.NAME....`)."""
        return {p[1] for p in self.paths if len(p) >= 2 and p[0] == "steps"}

    def render(self, data: Mapping[str, object]) -> str:
        out = [self.texts[0]]
        for path, text in zip(self.paths, self.texts[1:], strict=True):
            out.append(_text(lookup(data, path)))
            out.append(text)
        return "".join(out)


def lookup(data: object, path: tuple[str, ...]) -> object:
    """Follow `path` through dicts (by key) and lists (by index); `MissingField` if absent."""
    value = data
    for i, part in enumerate(path):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise MissingField(".".join(path[: i + 1]))
    return value


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()
