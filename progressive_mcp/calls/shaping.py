"""Result shaping: an upstream answer as one JSON envelope that fits a model's token budget.

Small answers pass through whole. A large one becomes a structured preview: the first entries of
every long series or list (upstream series are newest first), how many were kept of how many,
and how to ask for less. Where a result store is configured (S3 on Lambda), `when_cut` adds a
link to the full answer (`full_result`), and the preview is cut so that the whole still fits.
The payload appears once. Example::

    envelope = shape_result(tool, {"symbol": "IBM"}, payload, "json", budget_tokens=8000)
    envelope["truncated"]["note"]   # present only when the answer was cut
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from progressive_mcp.catalog import CatalogTool, less_data_options
from progressive_mcp.tokens import dumps, fits_budget

# A dict with at least this many members, all of them containers, is a series (dated bars, ...).
SERIES_MIN_MEMBERS = 12
# Room kept for the `truncated` note when a script's answer is cut (the note itself is ~60 tokens).
NOTE_TOKENS = 150


def shape_result(
    tool: CatalogTool,
    arguments: dict[str, Any],
    payload: Any,
    fmt: str,
    *,
    budget_tokens: int,
    when_cut: Callable[[], dict[str, Any]] | None = None,
    out_of_time: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """The envelope for a tool result: tool, arguments used, format, data, and `truncated` when cut.

    `when_cut` is called only when the answer does not fit; the fields it returns join the envelope.
    `out_of_time` says when the call's deadline has passed: the search for the largest preview that fits
    then stops with the best one found so far (or a text excerpt), so shaping never outlives the deadline.
    """
    envelope: dict[str, Any] = {"tool": tool.name, "arguments": arguments, "format": fmt, "data": payload}
    if fits_budget(dumps(envelope), budget_tokens):
        return envelope
    if when_cut is not None:
        envelope.update(when_cut())
    if fmt == "csv" and isinstance(payload, str):
        return _preview_csv(tool, envelope, payload, budget_tokens, out_of_time)
    if fmt == "text" and isinstance(payload, str):  # plain text, XML...: no rows or series to keep whole
        return _text_excerpt(tool, envelope, payload, budget_tokens)
    return _preview_json(tool, envelope, payload, budget_tokens, out_of_time)


def was_cut(envelope: dict[str, Any]) -> bool:
    return "truncated" in envelope


def _preview_json(
    tool: CatalogTool, envelope: dict[str, Any], payload: Any, budget: int, out_of_time: Callable[[], bool]
) -> dict[str, Any]:
    sizes: dict[str, int] = {}
    _measure(payload, "", sizes)
    longest = max(sizes.values(), default=0)

    def attempt(keep: int) -> dict[str, Any]:
        kept: dict[str, dict[str, int]] = {}
        data = _cut(payload, "", keep, kept, sizes)
        cut_envelope = dict(envelope, data=data)
        cut_envelope["truncated"] = {"series": kept, "note": _note(tool, envelope, kept, budget)}
        return cut_envelope

    best = _largest_fitting(longest, attempt, budget, out_of_time)
    if best is not None:
        return best
    # Not even one entry per series fits (or there are no series): fall back to a text excerpt.
    return _text_excerpt(tool, envelope, dumps(payload), budget)


def _preview_csv(
    tool: CatalogTool, envelope: dict[str, Any], text: str, budget: int, out_of_time: Callable[[], bool]
) -> dict[str, Any]:
    lines = text.splitlines()
    header, rows = lines[:1], lines[1:]

    def attempt(keep: int) -> dict[str, Any]:
        kept = {"rows": {"kept": keep, "total": len(rows)}}
        cut_envelope = dict(envelope, data="\n".join(header + rows[:keep]) + "\n")
        cut_envelope["truncated"] = {"series": kept, "note": _note(tool, envelope, kept, budget)}
        return cut_envelope

    best = _largest_fitting(len(rows), attempt, budget, out_of_time)
    return best if best is not None else _text_excerpt(tool, envelope, text, budget)


def _largest_fitting(longest: int, attempt: Any, budget: int, out_of_time: Callable[[], bool]) -> dict[str, Any] | None:
    """Binary search for the most entries per series that still fit the budget (the best so far, when time
    runs out)."""
    low, high, best = 1, max(longest - 1, 1), None
    while low <= high and not (best is not None and out_of_time()):
        middle = (low + high) // 2
        candidate = attempt(middle)
        if fits_budget(dumps(candidate), budget):
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best  # type: ignore[no-any-return]


def _text_excerpt(tool: CatalogTool, envelope: dict[str, Any], text: str, budget: int) -> dict[str, Any]:
    # A cl100k token averages well over 2 characters on JSON and CSV, so half the budget in
    # characters is a safe first cut; halve again until it fits.
    length = budget * 2
    while True:
        excerpt = text[:length]
        kept = {"characters": {"kept": len(excerpt), "total": len(text)}}
        cut_envelope = dict(envelope, data=None, excerpt=excerpt)
        cut_envelope["truncated"] = {"series": kept, "note": _note(tool, envelope, kept, budget)}
        if fits_budget(dumps(cut_envelope), budget) or length < 64:
            return cut_envelope
        length //= 2


def _is_series(value: Any) -> bool:
    if isinstance(value, list):
        return len(value) > 1
    if isinstance(value, dict):
        return len(value) >= SERIES_MIN_MEMBERS and all(isinstance(v, dict | list) for v in value.values())
    return False


def _measure(value: Any, path: str, sizes: dict[str, int]) -> None:
    if _is_series(value):
        sizes[path or "(root)"] = len(value)
        return
    if isinstance(value, dict):
        for key, member in value.items():
            _measure(member, f"{path}.{key}" if path else key, sizes)


def _cut(
    value: Any, path: str, keep: int, kept: dict[str, dict[str, int]], series: dict[str, int] | None = None
) -> Any:
    """`value` with each series cut to its first `keep` entries; `series` (from `_measure`, when known) names
    the series by path, so the answer is not searched again for them on every try."""
    name = path or "(root)"
    if name in series if series is not None else _is_series(value):
        if len(value) > keep:
            kept[name] = {"kept": keep, "total": len(value)}
            return value[:keep] if isinstance(value, list) else dict(itertools.islice(value.items(), keep))
        return value
    if isinstance(value, dict):
        return {k: _cut(v, f"{path}.{k}" if path else k, keep, kept, series) for k, v in value.items()}
    return value


def _note(tool: CatalogTool, envelope: dict[str, Any], kept: dict[str, dict[str, int]], budget: int) -> str:
    shown = "; ".join(f"{name}: first {c['kept']} of {c['total']}" for name, c in kept.items())
    hints = less_data_options(tool)
    names = {p.name for p in tool.params}
    if "month" in names:
        hints.append("month=YYYY-MM for one month")
    if {"time_from", "time_to"} & names:
        hints.append("a narrower time_from/time_to range")
    datatype = tool.param("datatype")
    if datatype is not None and "csv" in (datatype.enum or ()) and envelope["format"] != "csv":
        hints.append("datatype=csv (more compact)")
    ask = f" To get less, call again with {', or '.join(hints)}." if hints else ""
    if "full_result" in envelope:
        ask += " The whole answer can be downloaded from full_result.url until full_result.expires_at."
    return f"Answer cut to fit the {budget}-token budget (first entries kept): {shown}.{ask}"


def shape_script_answer(answer: dict[str, Any], budget_tokens: int) -> dict[str, Any]:
    """A script's answer (`result`, `printed`, `calls`) cut to the token budget, saying what was cut: the
    printed text keeps its start and end, the result its first entries (as a tool's answer would)."""
    if fits_budget(dumps(answer), budget_tokens):
        return answer
    budget = budget_tokens  # what comes back in all, the note about the cut included
    budget_tokens = max(budget - NOTE_TOKENS, budget // 2)  # for the cut parts
    cut: dict[str, Any] = dict(answer)
    notes: list[str] = []
    printed = str(answer.get("printed") or "")
    if printed:
        keep = max(200, budget_tokens)  # characters: a token is at least one
        while len(printed) > keep and not fits_budget(dumps(dict(cut, printed=printed)), budget_tokens):
            keep //= 2
            head, tail = printed[: keep // 2], printed[-keep // 2 :]
            omitted = len(answer["printed"]) - len(head) - len(tail)
            printed = f"{head}\n… [{omitted:,} characters cut] …\n{tail}"
            if keep < 200:
                break
        if printed != answer["printed"]:
            cut["printed"] = printed
            notes.append(f"printed output cut to its start and end ({len(answer['printed']):,} characters in all)")
    if not fits_budget(dumps(cut), budget_tokens):
        result = answer.get("result")
        sizes: dict[str, int] = {}
        _measure(result, "", sizes)
        longest = max(sizes.values(), default=0)

        def attempt(keep: int) -> dict[str, Any]:
            kept: dict[str, dict[str, int]] = {}
            return dict(cut, result=_cut(result, "", keep, kept), _kept=kept)

        best = _largest_fitting(longest, attempt, budget_tokens, lambda: False) if longest else None
        if best is not None:
            kept = best.pop("_kept")
            cut = best
            shown = "; ".join(f"{name}: first {c['kept']} of {c['total']}" for name, c in kept.items())
            notes.append(f"result cut: {shown}")
        else:
            text = dumps(result)
            length = budget_tokens * 2
            while True:
                cut["result"] = None
                cut["result_excerpt"] = text[:length]
                if fits_budget(dumps(cut), budget_tokens) or length < 64:
                    break
                length //= 2
            notes.append(f"result cut to its first {len(cut['result_excerpt']):,} of {len(text):,} characters")
    cut["truncated"] = {
        "note": f"Answer cut to fit the {budget}-token budget: {'; '.join(notes)}. Return less: aggregate "
        "in the script and print or return only what is needed."
    }
    return cut
