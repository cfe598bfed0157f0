"""Values leaving the sandbox: copied into plain JSON data, measured and bounded as they are copied.

pydantic-monty hands the host a script's value with the sandbox's sharing kept: `x = [x] * 10` eight times
over is a few hundred bytes in the sandbox and 10**8 elements once written out. So every value the host
reads out of the sandbox (a script's result, a tool call's arguments) is copied here, iteratively, and
each place a shared part appears is counted again, as the JSON text and the host's objects will hold it
again. The copy stops with ValueTooLarge once that count passes the budget or the clock passes the
script's deadline, so what the host does with a value never outgrows the sandbox's own limits. Example::

    plain_copy(snapshot.output, budget_bytes=64 * 2**20, ends_at=deadline)
    # [[1, 1, ...], ...] as lists, dicts and scalars; tuples and sets become lists, other objects text
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

# What the host pays for one value wherever it appears: a pointer to it, a JSON separator, a share of its
# container's header. A container pays CONTAINER_BYTES more, a dict DICT_ENTRY_BYTES per key (its hash table; a
# CPython dict of 10 short keys is 272 bytes); text and numbers also pay their JSON length.
VALUE_BYTES = 16
CONTAINER_BYTES = 64
DICT_ENTRY_BYTES = 40
# pydantic-monty's own stand-in for a value nested deeper than it converts (its limit is the script's recursion
# limit); used here too, so a value nested past `max_depth` reads the same whichever side cut it.
DEEPLY_NESTED = "<deeply nested>"
DEFAULT_MAX_DEPTH = 256  # far below what json.dumps and the result's shaping recurse through safely
# The longest int written as a number: Python refuses to turn ints of over 4,300 digits into text.
MAX_INT_BITS = 14_000
CLOCK_EVERY_BYTES = 256 * 1024  # bytes copied between looks at the clock
SMALL_INT = 2**63  # ints that cost VALUE_BYTES and 20 digits at most
_MEMO_CHARS = 64  # text at least this long has its cost kept by identity: a shared string is measured once
_SMALL_REPR = (bytes, bytearray, complex, type, type(Ellipsis), dt.date, dt.time, dt.timedelta, dt.tzinfo)


class ValueTooLarge(Exception):
    """The copy passed its budget (`reason` "size") or the deadline ("time")."""

    def __init__(self, reason: str, copied_bytes: int) -> None:
        self.reason = reason
        self.copied_bytes = copied_bytes
        super().__init__(f"the value passed its {'size budget' if reason == 'size' else 'deadline'} while copied")


def plain_copy(
    value: Any,
    *,
    budget_bytes: int,
    ends_at: float | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """`value` as JSON data (dict keys text, tuples and sets lists, non-finite floats None, a dataclass instance
    the dict of its fields, other objects a short text), never recursing; raises ValueTooLarge."""
    return _Copy(budget_bytes, max_depth, ends_at, clock).run(value)


class _Frame:
    """A container being copied: where its parts go, and the parts still to copy."""

    __slots__ = ("depth", "keyed", "parts", "sort", "target")

    def __init__(self, target: Any, parts: Iterator[Any], depth: int, *, keyed: bool, sort: bool = False) -> None:
        self.target, self.parts, self.depth, self.keyed, self.sort = target, parts, depth, keyed, sort


class _Copy:
    def __init__(self, budget_bytes: int, max_depth: int, ends_at: float | None, clock: Callable[[], float]) -> None:
        self.budget = budget_bytes
        self.spent = 0
        self.max_depth = max_depth
        self.ends_at = ends_at
        self.clock = clock
        # One comparison on the hot path: `spent` past `check_at` means over the budget or time to read the clock.
        self.check_at = min(budget_bytes, CLOCK_EVERY_BYTES) if ends_at is not None else budget_bytes
        self._text_costs: dict[int, int] = {}

    def run(self, value: Any) -> Any:
        plain, frame = self._value(value, 0)
        stack = [frame] if frame is not None else []
        while stack:  # depth-first with an explicit stack: a value nested 10**5 deep costs no recursion
            top = stack[-1]
            depth, target = top.depth + 1, top.target
            frame = None
            keyed = top.keyed
            name: Any = None
            for part in top.parts:
                # The commonest parts (short plain text, ints that fit a machine word) are counted here, without a
                # call: the loop runs once for every place of every shared part, until the budget stops it.
                if keyed:
                    key, child = part
                    if type(key) is str and len(key) < _MEMO_CHARS and key.isascii() and key.isprintable():
                        self.spent += DICT_ENTRY_BYTES + len(key)
                        name = key
                    else:
                        name = self._key(key)
                else:
                    child = part
                kind = type(child)
                if kind is int and -SMALL_INT < child < SMALL_INT:
                    self.spent += VALUE_BYTES + 20
                elif kind is str and len(child) < _MEMO_CHARS and child.isascii() and child.isprintable():
                    self.spent += VALUE_BYTES + len(child)
                else:
                    child, frame = self._value(child, depth)
                if self.spent > self.check_at:
                    self._check()
                if keyed:
                    target[name] = child
                else:
                    target.append(child)
                if frame is not None:
                    break
            if frame is not None:
                stack.append(frame)  # its parts first, then the rest of this one's
                continue
            stack.pop()
            if top.sort:  # a set: an order that does not depend on hashing
                target.sort(key=repr)
        return plain

    def _charge(self, cost: int) -> None:
        self.spent += cost
        if self.spent > self.check_at:
            self._check()

    def _check(self) -> None:
        if self.spent > self.budget:
            raise ValueTooLarge("size", self.spent)
        assert self.ends_at is not None  # check_at is below the budget only when there is a deadline
        if self.clock() > self.ends_at:
            raise ValueTooLarge("time", self.spent)
        self.check_at = min(self.budget, self.spent + CLOCK_EVERY_BYTES)

    def _value(self, value: Any, depth: int) -> tuple[Any, _Frame | None]:
        """The copy of one value, and the frame of its parts when it is a container (filled in by `run`)."""
        if value is None or isinstance(value, bool):
            self._charge(VALUE_BYTES)
            return value, None
        if isinstance(value, str):
            self._charge(VALUE_BYTES + self._text_cost(value))
            return value, None
        if isinstance(value, int):
            bits = value.bit_length()
            if bits > MAX_INT_BITS:  # Python writes no int this long as text (sys.get_int_max_str_digits)
                self._charge(VALUE_BYTES)
                return f"<an integer of about {int(bits * math.log10(2)):,} digits>", None
            self._charge(VALUE_BYTES + bits // 3)  # its decimal digits, a little over
            return value, None
        if isinstance(value, float):
            self._charge(VALUE_BYTES)
            return (value if math.isfinite(value) else None), None
        fields = _fields(value)
        if isinstance(value, dict | list | tuple | set | frozenset) or fields is not None:
            if depth >= self.max_depth:
                self._charge(VALUE_BYTES)
                return DEEPLY_NESTED, None
            self._charge(VALUE_BYTES + CONTAINER_BYTES)
            if isinstance(value, dict) or fields is not None:
                target: dict[str, Any] = {}
                return target, _Frame(target, iter((value if fields is None else fields).items()), depth, keyed=True)
            listed: list[Any] = []
            return listed, _Frame(listed, iter(value), depth, keyed=False, sort=isinstance(value, set | frozenset))
        if isinstance(value, bytes | bytearray):
            self._charge(4 * len(value))  # before its repr is made
        text = _text(value)
        self._charge(VALUE_BYTES + len(text))
        return text, None

    def _key(self, key: Any) -> str:
        """A dict key as JSON object keys are: text. A tuple key is copied (and charged) like a value first."""
        self._charge(DICT_ENTRY_BYTES)
        if isinstance(key, str):
            self._charge(self._text_cost(key))
            return key
        if key is None or isinstance(key, bool | int | float):
            text = str(key) if not isinstance(key, int) or key.bit_length() <= MAX_INT_BITS else "<an integer>"
        elif isinstance(key, tuple | frozenset):
            text = str(self.run(key))
        else:
            text = _text(key)
        self._charge(len(text))
        return text

    def _text_cost(self, text: str) -> int:
        """Bytes of `text` in JSON: more for text that is escaped (control characters) or not ASCII."""
        long = len(text) >= _MEMO_CHARS
        cost = self._text_costs.get(id(text)) if long else None
        if cost is None:
            if text.isascii():
                cost = len(text) if text.isprintable() else 6 * len(text)
            else:
                cost = 4 * len(text) if text.isprintable() else 6 * len(text)
            if long:  # the value holds the string, so its identity stays its own until the copy ends
                self._text_costs[id(text)] = cost
        return cost


def _fields(value: Any) -> dict[str, Any] | None:
    """The fields of an instance of a class the script defined (pydantic-monty's MontyClassProxy), else None."""
    if type(value).__name__ != "MontyClassProxy":
        return None
    attributes = getattr(value, "attributes", None)
    return attributes if isinstance(attributes, dict) else None


def _text(value: Any) -> str:
    """Text for an object JSON has no form for, never by a repr that could walk what it holds."""
    if isinstance(value, _SMALL_REPR):
        return repr(value)
    if isinstance(value, BaseException):
        args = value.args
        said = repr(args[0]) if len(args) == 1 and isinstance(args[0], str | int | float) else "…" if args else ""
        return f"{type(value).__name__}({said})"
    return f"<{type(value).__name__}>"
