"""Which of a source's operations become tools: the `--include` / `--exclude` terms (env PMCP_INCLUDE /
PMCP_EXCLUDE), for any source. Example::

    keep(Filter.parse("method:GET"), Filter.parse("tag:billing"), name="droplets_list", operation_id=None,
         method="GET", path="/v2/droplets", tags=["Droplets"])          # True

Standard library only: the Lambda applies filters to a compiled catalog without the OpenAPI tooling.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from progressive_mcp.errors import SpecError

_SLUG = re.compile(r"[^a-z0-9]+")
HTTP_METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE")


@dataclass(frozen=True, slots=True)
class Filter:
    """--include / --exclude terms: `tag:NAME`, `method:GET`, `path:/v2/droplets*` (glob) or a bare glob over the
    tool name and operationId. Case does not matter; a tag matches its name or its category's."""

    terms: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str | Iterable[str] | None) -> Filter:
        if text is None:
            return cls()
        items = text.split(",") if isinstance(text, str) else list(text)
        terms = tuple(t.strip() for item in items for t in item.split(",") if t.strip())
        for term in terms:
            kind, _, value = term.partition(":")
            if value and kind.lower() not in ("tag", "method", "path", "name"):
                raise SpecError("--include/--exclude", [f"{term!r}: use tag:NAME, method:GET, path:GLOB or a name"])
            if value and kind.lower() == "method" and value.strip().upper() not in HTTP_METHODS:
                raise SpecError(
                    "--include/--exclude",
                    [f"{term!r}: {value!r} is not an HTTP method (use one of {', '.join(HTTP_METHODS)})"],
                )
        return cls(terms)

    def unknown_tags(self, tags: Iterable[str]) -> list[str]:
        """The `tag:` terms that match none of `tags` (by name or category name)."""
        known = {t.casefold() for t in tags} | {slug(t) for t in tags}
        out = []
        for term in self.terms:
            kind, _, value = term.partition(":")
            if kind.lower() == "tag" and value.casefold() not in known and slug(value) not in known:
                out.append(term)
        return out

    def __bool__(self) -> bool:
        return bool(self.terms)

    def matches(
        self, *, name: str, operation_id: str | None, method: str, path: str | None, tags: Iterable[str]
    ) -> bool:
        for term in self.terms:
            kind, _, value = term.partition(":")
            if not value:
                kind, value = "name", term
            kind, pattern = kind.lower(), value.casefold()
            if kind == "method" and method.casefold() == pattern:
                return True
            if kind == "path" and path is not None and fnmatch.fnmatchcase(path.casefold(), pattern):
                return True
            if kind == "tag" and any(t.casefold() == pattern or slug(t) == slug(pattern) for t in tags):
                return True
            names = [name] + ([operation_id] if operation_id else [])
            if kind == "name" and any(fnmatch.fnmatchcase(n.casefold(), pattern) for n in names):
                return True
        return False


def unknown_tag_help(include: Filter, exclude: Filter, tags: Iterable[str], shown: int = 30) -> list[str]:
    """A line for each `tag:` term that matches no tag of the source, naming the tags there are."""
    names = sorted(dict.fromkeys(tags), key=str.casefold)
    listed = ", ".join(names[:shown]) + (f" ({len(names) - shown} more)" if len(names) > shown else "")
    return [
        f"{term!r} matches no tag; the tags are: {listed or 'none'}"
        for term in include.unknown_tags(names) + exclude.unknown_tags(names)
    ]


def keep(include: Filter, exclude: Filter, **facts: Any) -> bool:
    return (not include or include.matches(**facts)) and not (exclude and exclude.matches(**facts))


def slug(text: str) -> str:
    """A category name: "1-Click Applications" → "1_click_applications" (lower case, `_` between words)."""
    return _SLUG.sub("_", text.casefold()).strip("_")[:64] or "other"
