"""Lambda SnapStart runtime hooks: what a snapshot of the serving function must not carry into restored instances.

With `snap_start` on (infra/config.py), Lambda runs the handler's init once per published version (the catalog,
the surface, the AWS SDK clients), snapshots the microVM, and resumes every new instance from that snapshot, so
whatever init left in memory is shared by all of them. Two things here must not be:

- `close_pooled_connections`, before the snapshot: the keep-alive connections the AWS SDK opened during init
  (the gateway reads its DynamoDB tool store, and its servers secret, at init). Restored minutes or days later on
  another host, such a connection is dead, and the first call on it would wait for a timeout and a retry.
- `reseed_random`, after each restore: the `random` module's generator, seeded once at interpreter start, would
  give every restored instance the same sequence (botocore's retry jitter, Powertools' log sampling).

Nothing else needs a hook: the upstream key and endpoint tokens are read per request through Powertools' cache,
whose entries expire by the wall clock (right again after a restore); a SnapStart function gets container
credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI), which boto3's default chain reads and refreshes when they expire;
the upstream HTTP client and code mode's sandbox workers start with the first call or script, never during init;
the gateway looks for a newer tool store every PMCP_INDEX_POLL_S, as warm instances do.

`snapshot_restore_py` exists only in Lambda's Python runtimes (3.12 and later); anywhere else `register_hooks` does
nothing, and importing this module imports nothing. Example::

    from lambda_fn import snapstart
    snapstart.register_hooks()  # once, from the handler module (Lambda ignores hooks in modules it never imports)
"""

from __future__ import annotations

import sys


def register_hooks() -> bool:
    """Register the hooks with the runtime's `snapshot_restore_py`; False (and nothing done) where there is none."""
    try:
        import snapshot_restore_py
    except ImportError:  # not on Lambda: nothing will ever be snapshotted
        return False
    snapshot_restore_py.register_before_snapshot(close_pooled_connections)
    snapshot_restore_py.register_after_restore(reseed_random)
    return True


def close_pooled_connections() -> int:
    """Close every connection kept open in a urllib3 pool (the AWS SDK's); the pools reconnect on their next request.

    Returns how many pool managers were emptied. The clients live deep inside the endpoint, so they are found
    through the garbage collector's list of objects: a pass of tens of milliseconds, paid once per published
    version before its snapshot, never by a request.
    """
    urllib3 = sys.modules.get("urllib3")
    if urllib3 is None:  # nothing imported it, so no pool exists
        return 0
    import gc

    managers = [obj for obj in gc.get_objects() if isinstance(obj, urllib3.PoolManager)]
    for manager in managers:
        manager.clear()
    return len(managers)


def reseed_random() -> None:
    """Seed `random`'s shared generator again, so that restored instances stop sharing one sequence."""
    import os
    import random
    import time

    # The clock as well as the OS: should the kernel's generator come out of the snapshot alike too, two restores
    # still differ by the nanosecond they happen at.
    random.seed(os.urandom(32) + time.time_ns().to_bytes(8, "little"))
