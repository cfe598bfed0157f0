"""Python's cyclic garbage collector paused around work that makes many containers, keeps them all and is no cycle
(building a search index, loading an OpenAPI document): each collection those allocations set off walks every
object of the process and frees almost nothing. Example::

    with collector_paused():
        index = SearchIndex(catalog.tools)

    @collector_paused()
    def load(...): ...

The collector runs again when the block ends, if it was running when it began: a nested block, or one that
overlaps another in a thread, leaves it as it found it. What the block left cyclic is collected from then on.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (as a decorator: inside the call)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
