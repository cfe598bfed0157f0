"""Pinning: a pinned server's tools are served only in the definition the user approved, named by its hash.

A server is pinned by its `pin` (or the file's `"progressive-mcp": {"pin": true}`). The store keeps one approved
definition per server and tool name, apart from the tool's document, so it outlives a tool that is dropped and
listed again. What a sync takes as approved (`approved_by_sync`): every definition of a server that is not pinned
(so turning `pin` on freezes what was being served), and on a pinned server only the tools its first sync lists
(trust on first use). After that, a pinned server's tool whose definition is not the approved one for its name,
whether it changed, was dropped and listed again differently, was renamed, or is new, is withheld: left out of
the catalog and listed as withheld with its hash (`withheld_entry`; its untrusted text is not shown to the model).
The operator sees the pending definition and its diff with the approved one (`review`, printed by `progressive-mcp
sync`) and approves that very definition by its hash (`approve`). Example::

    approve(store, "toy.add@" + entry["hash"])      # ApprovalRefused if the pending definition has another hash
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from progressive_mcp.errors import ConfigError
from progressive_mcp.gateway.documents import ToolDocument
from progressive_mcp.gateway.store import StoredTool, ToolStore

HASH = re.compile(r"[0-9a-f]{64}")
REVIEW_COMMAND = "progressive-mcp sync --servers FILE"
_SHOWN_AS_IS = {"Zs"}  # of the separator and other categories, spaces are the only characters printed as they are


class ApprovalRefused(ConfigError):
    """An approval that does not name a stored tool's pending definition by its hash."""


def approved_by_sync(
    current: Iterable[ToolDocument], stored: Mapping[str, StoredTool], *, pinned: bool, first_sync: bool
) -> list[ToolDocument]:
    """The definitions a sync takes as approved: all of a server that is not pinned, and those a pinned server lists
    at its first sync (trust on first use); none otherwise. Only those not approved already are returned."""
    if pinned and not first_sync:
        return []
    return [doc for doc in current if doc.name not in stored or stored[doc.name].approved_hash != doc.hash]


def withheld_entry(item: StoredTool) -> dict[str, str]:
    """How TOOL_LIST and the CLI name a withheld tool: its name, server, whether it is new or not the approved
    definition, its pending hash, and how to approve it. No text of the definition: that is untrusted."""
    doc = item.document
    if item.approved_hash is None:
        status, why = "new", f"it is new on the pinned server {doc.server}"
    else:
        status = "changed"
        why = f"its definition is not the one approved on the pinned server {doc.server} (changed, or listed again)"
    return {
        "name": doc.public_name,
        "server": doc.server,
        "status": status,
        "hash": doc.hash,
        "reason": f"{why}; the operator reviews it with `{REVIEW_COMMAND}` and approves it with "
        f"`{REVIEW_COMMAND} --approve {doc.public_name}@{doc.hash}`",
    }


def review(store: ToolStore, entry: Mapping[str, str]) -> dict[str, Any]:
    """A withheld entry with what the operator needs to decide: the pending definition and a unified diff from the
    approved one (every line of the pending one when none was approved, or it was approved before its definition
    was kept), control and invisible characters shown as escapes."""
    item = next((t for t in store.tools(entry["server"]) if t.document.public_name == entry["name"]), None)
    if item is None:  # gone since the entry was made (a sync in another process)
        return {**entry, "definition": None, "diff": []}
    approval = store.approval(item.document.server, item.document.name)
    before = definition_lines(approval.definition) if approval and approval.definition is not None else []
    if approval is None:
        label = "(none: a new tool)"
    elif approval.definition is None:  # migrated from a store of schema 1, which kept only the hash
        label = "(approved before definitions were kept)"
    else:
        label = f"approved {approval.hash}"
    diff = list(
        difflib.unified_diff(
            before, definition_lines(item.document.definition), label, f"pending {item.document.hash}", lineterm=""
        )
    )
    return {**entry, "definition": dict(item.document.definition), "diff": diff}


def review_text(reviewed: Mapping[str, Any], servers_file: str = "FILE") -> str:
    """A reviewed entry as the CLI prints it: the tool, its status and the approve command, then the diff."""
    command = REVIEW_COMMAND.replace("FILE", shlex.quote(servers_file))
    lines = [
        f"withheld: {reviewed['name']} ({reviewed['status']}): pending hash {reviewed['hash']}",
        f"  approve it with: {command} --approve {reviewed['name']}@{reviewed['hash']}",
    ]
    return "\n".join([*lines, *(f"  {line}" for line in reviewed["diff"])])


def definition_lines(definition: Mapping[str, Any]) -> list[str]:
    """A definition as lines to diff: the description a line per line of its text, the rest as indented JSON."""
    description = str(definition.get("description") or "")
    rest = {k: v for k, v in definition.items() if k != "description"}
    lines = ["description:", *(f"  {line}" for line in description.splitlines() or [""])]
    lines += json.dumps(rest, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    return [_visible(line) for line in lines]


def approve(store: ToolStore, named: str) -> StoredTool:
    """Approve `SERVER.TOOL@HASH`: the stored tool's pending definition, if its hash is HASH; raises
    ApprovalRefused, saying why, for a missing hash, another hash or an unknown tool."""
    name, _, hash_ = named.partition("@")
    if not hash_:
        raise ApprovalRefused(
            f"{named}: name the hash you reviewed, as {name}@HASH (`{REVIEW_COMMAND}` prints each withheld tool's "
            "pending definition and hash)"
        )
    hash_ = hash_.strip().lower()
    if not HASH.fullmatch(hash_):
        raise ApprovalRefused(f"{named}: the hash must be the 64 hex digits `{REVIEW_COMMAND}` prints")
    found = next((t for t in store.tools() if t.document.public_name == name), None)
    if found is None:
        raise ApprovalRefused(f"no stored tool named {name}")
    if found.document.hash != hash_:
        raise ApprovalRefused(
            f"the pending definition of {name} has hash {found.document.hash}, not {hash_}: it changed after you "
            f"reviewed it, or the hash is mistyped; review it again with `{REVIEW_COMMAND}`"
        )
    if found.approved:
        return found
    approved = store.approve(name, hash_)
    if approved is None:  # it changed between the check and the write
        raise ApprovalRefused(f"{name} changed while it was being approved; review it again with `{REVIEW_COMMAND}`")
    return approved


def _visible(line: str) -> str:
    """`line` with control, format (bidi, zero-width) and other invisible characters as \\u escapes, so a review
    shows what the text holds and a terminal does not act on it."""
    return "".join(
        ch
        if ch == " " or (unicodedata.category(ch)[0] not in "CZ" or unicodedata.category(ch) in _SHOWN_AS_IS)
        else f"\\u{ord(ch):04x}"
        for ch in line
    )
