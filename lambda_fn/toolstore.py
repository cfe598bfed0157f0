"""The gateway's tool store in DynamoDB: the `ToolStore` the Lambda functions share.

The scheduled sync function (`lambda_fn.sync`) writes it; the serving function only reads it, at a cold start and
again whenever the store's generation moves (it looks every `PMCP_INDEX_POLL_S`, one small read), so no request
waits on another MCP server. One table, partition key `pk` and sort key `sk` (both strings); a `definition`
is zlib-compressed JSON:

| pk | sk | attributes |
|---|---|---|
| `tool` | `SERVER#TOOL` | `server`, `name`, `public_name`, `hash`, `indexed_seq` (N), `definition` (B) |
| `approval` | `SERVER#TOOL` | `hash`, `definition` (B): the tool's approved definition (see `pins`) |
| `server` | `SERVER` | `synced_at` (N), `fingerprint` |
| `vector` | `KEY` | `row` (B): a tool document's int8 vector, by `search.vectors.key_of` (model + digest) |
| `meta` | `meta` | `seq` (N: the last sync's number), `generation` (N: moves with every write), `schema_version` (N) |

Server names hold no `#` (`[A-Za-z0-9_-]`), so `SERVER#` prefixes exactly one server's tools. A sync's writes are
not one transaction (DynamoDB's hold at most 100 items): the generation is moved last, so readers reload once the
writes are in. Reads are strongly consistent. A table of schema 1 (a `pinned_hash` on each tool, hashes joined
with `|`, fingerprints with `${VAR}` values) is read as it is, and migrated by the sync function (`upgrade`), the
one writer. Example::

    store = DynamoToolStore("pmcp-tools", client=boto3.client("dynamodb"))
    gateway = Gateway(config, store, poll_s=60)
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from progressive_mcp.gateway.documents import ToolDocument, tool_hash
from progressive_mcp.gateway.store import (
    LEGACY_APPROVAL,
    SCHEMA_VERSION,
    Approval,
    ServerState,
    StoredTool,
    legacy_digest,
)

TOOL, APPROVAL, SERVER, META, VECTOR = "tool", "approval", "server", "meta", "vector"
BATCH_GET_SIZE = 100  # BatchGetItem's limit
BATCH_SIZE = 25  # BatchWriteItem's limit
MAX_BATCH_ROUNDS = 8  # unprocessed items are sent again this many times before the write fails


class DynamoToolStore:
    """A `ToolStore` in one DynamoDB table (see the module's docstring for its items)."""

    def __init__(self, table_name: str, *, client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb")
        self.table_name = table_name
        self.client = client

    # --- reads ---------------------------------------------------------------------------------------------

    def tools(self, server: str | None = None) -> list[StoredTool]:
        condition = "pk = :pk"
        values: dict[str, Any] = {":pk": {"S": TOOL}}
        if server is not None:
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": f"{server}#"}
        items = self._query(condition, values)
        approvals = {
            item["sk"]["S"]: item["hash"]["S"]
            for item in self._query(condition, {**values, ":pk": {"S": APPROVAL}}, projection=("sk", "hash"))
        }
        tools = [_stored(item, approvals.get(item["sk"]["S"])) for item in items]
        return sorted(tools, key=lambda t: (t.document.server, t.document.name))

    def servers(self) -> list[ServerState]:
        items = self._query("pk = :pk", {":pk": {"S": SERVER}})
        states = [ServerState(i["sk"]["S"], float(i["synced_at"]["N"]), i["fingerprint"]["S"]) for i in items]
        return sorted(states, key=lambda s: s.server)

    def generation(self) -> int:
        item = self.client.get_item(
            TableName=self.table_name,
            Key=_key(META, META),
            ProjectionExpression="#generation",
            ExpressionAttributeNames={"#generation": "generation"},
            ConsistentRead=True,
        ).get("Item")
        return int(item["generation"]["N"]) if item and "generation" in item else 0

    def vectors(self, keys: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), BATCH_GET_SIZE):
            request: dict[str, Any] = {
                self.table_name: {"Keys": [_key(VECTOR, key) for key in wanted[start : start + BATCH_GET_SIZE]]}
            }
            for _ in range(MAX_BATCH_ROUNDS):
                answer = self.client.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    found[item["sk"]["S"]] = bytes(item["row"]["B"])
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
        return found

    # --- writes --------------------------------------------------------------------------------------------

    def apply(
        self,
        server: str,
        *,
        created: Iterable[ToolDocument],
        updated: Iterable[ToolDocument],
        deleted: Iterable[str],
        synced_at: float,
        fingerprint: str,
        approved: Iterable[ToolDocument] = (),
    ) -> int:
        seq = self._add(META, "seq")
        # A changed document is written whole too: no attribute of an older one (a schema-1 `pinned_hash`) stays.
        writes: list[dict[str, Any]] = [{"PutRequest": {"Item": _item(doc, seq=seq)}} for doc in (*created, *updated)]
        writes += [{"DeleteRequest": {"Key": _key(TOOL, f"{server}#{name}")}} for name in deleted]
        writes += [{"PutRequest": {"Item": _approval_item(doc)}} for doc in approved]
        self._batch(writes)
        self.client.put_item(
            TableName=self.table_name,
            Item={
                **_key(SERVER, server),
                "synced_at": {"N": repr(float(synced_at))},
                "fingerprint": {"S": fingerprint},
            },
        )
        self._add(META, "generation")
        return seq

    def put_vectors(self, rows: Mapping[str, bytes]) -> None:
        # Not a change of the documents: the generation stays, no reader reloads for it.
        self._batch([{"PutRequest": {"Item": {**_key(VECTOR, key), "row": {"B": row}}}} for key, row in rows.items()])

    def forget(self, server: str) -> int:
        prefix = {":prefix": {"S": f"{server}#"}}
        condition = "pk = :pk AND begins_with(sk, :prefix)"
        tools = self._query(condition, {":pk": {"S": TOOL}, **prefix}, projection=("sk",))
        approvals = self._query(condition, {":pk": {"S": APPROVAL}, **prefix}, projection=("sk",))
        self._batch(
            [{"DeleteRequest": {"Key": _key(TOOL, item["sk"]["S"])}} for item in tools]
            + [{"DeleteRequest": {"Key": _key(APPROVAL, item["sk"]["S"])}} for item in approvals]
        )
        self.client.delete_item(TableName=self.table_name, Key=_key(SERVER, server))
        self._add(META, "generation")
        return len(tools)

    def approve(self, public_name: str, hash: str) -> StoredTool | None:
        found = next((t for t in self.tools() if t.document.public_name == public_name), None)
        if found is None or found.document.hash != hash:
            return None
        doc = found.document
        try:  # written only if the tool still has that hash: a sync between the read and here cannot slip in
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.table_name,
                            "Key": _key(TOOL, f"{doc.server}#{doc.name}"),
                            "ConditionExpression": "#hash = :hash",
                            "ExpressionAttributeNames": {"#hash": "hash"},
                            "ExpressionAttributeValues": {":hash": {"S": hash}},
                        }
                    },
                    {"Put": {"TableName": self.table_name, "Item": _approval_item(doc)}},
                ]
            )
        except self.client.exceptions.TransactionCanceledException:
            return None
        self._add(META, "generation")
        return StoredTool(doc, found.indexed_seq, hash)

    def approval(self, server: str, name: str) -> Approval | None:
        item = self.client.get_item(
            TableName=self.table_name, Key=_key(APPROVAL, f"{server}#{name}"), ConsistentRead=True
        ).get("Item")
        if item is None:
            tool = self.client.get_item(
                TableName=self.table_name, Key=_key(TOOL, f"{server}#{name}"), ConsistentRead=True
            ).get("Item")
            if tool is not None and "pinned_hash" in tool:  # a schema-1 table, not migrated yet
                return Approval(LEGACY_APPROVAL + tool["pinned_hash"]["S"], None)
            return None
        definition = _unpack(item["definition"]["B"]) if "definition" in item else None
        return Approval(item["hash"]["S"], definition)

    def upgrade(self) -> bool:
        """Migrate a table of schema 1 (see the module's docstring); True if it was one. Safe to run again after
        an interrupted run: each item is migrated once, and the schema version is written last."""
        meta = self.client.get_item(TableName=self.table_name, Key=_key(META, META), ConsistentRead=True).get("Item")
        if meta is not None and int(meta.get("schema_version", {"N": "1"})["N"]) >= SCHEMA_VERSION:
            return False
        if meta is None and not self._query("pk = :pk", {":pk": {"S": TOOL}}, projection=("sk",)):
            self._set_schema_version()  # a new table: nothing to migrate
            return False
        for item in self._query("pk = :pk", {":pk": {"S": TOOL}}):
            if "pinned_hash" not in item:
                continue  # migrated by an earlier, interrupted run
            stored = _stored(item, None)
            doc = ToolDocument(
                stored.document.server,
                stored.document.name,
                stored.document.public_name,
                stored.document.definition,
                tool_hash(stored.document.definition),
            )
            if item["pinned_hash"]["S"] == item["hash"]["S"]:
                approval = _approval_item(doc)
            else:  # withheld then, withheld now: the approved definition was never kept
                approval = {
                    **_key(APPROVAL, f"{doc.server}#{doc.name}"),
                    "hash": {"S": LEGACY_APPROVAL + item["pinned_hash"]["S"]},
                }
            self.client.put_item(TableName=self.table_name, Item=approval)
            self.client.put_item(TableName=self.table_name, Item=_item(doc, seq=stored.indexed_seq))
        for item in self._query("pk = :pk", {":pk": {"S": SERVER}}):
            fingerprint = item["fingerprint"]["S"]
            if not fingerprint.startswith("sha256:"):
                item["fingerprint"] = {"S": legacy_digest(fingerprint)}
                self.client.put_item(TableName=self.table_name, Item=item)
        self._set_schema_version()
        self._add(META, "generation")
        return True

    # --- helpers -------------------------------------------------------------------------------------------

    def _query(self, condition: str, values: dict[str, Any], projection: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Every item the key condition matches, across all pages (only the `projection` attributes, if named)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        if projection:  # by placeholder names: DynamoDB reserves many words (`hash` among them)
            request["ProjectionExpression"] = ", ".join(f"#p{i}" for i in range(len(projection)))
            request["ExpressionAttributeNames"] = {f"#p{i}": name for i, name in enumerate(projection)}
        items: list[dict[str, Any]] = []
        while True:
            page = self.client.query(**request)
            items += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _set_schema_version(self) -> None:
        self.client.update_item(
            TableName=self.table_name,
            Key=_key(META, META),
            UpdateExpression="SET #version = :version",
            ExpressionAttributeNames={"#version": "schema_version"},
            ExpressionAttributeValues={":version": {"N": str(SCHEMA_VERSION)}},
        )

    def _add(self, sk: str, counter: str) -> int:
        """Add one to a counter of the meta item; its new value."""
        answer = self.client.update_item(
            TableName=self.table_name,
            Key=_key(META, sk),
            UpdateExpression="ADD #counter :one",
            ExpressionAttributeNames={"#counter": counter},
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )
        return int(answer["Attributes"][counter]["N"])

    def _batch(self, writes: list[dict[str, Any]]) -> None:
        for start in range(0, len(writes), BATCH_SIZE):
            pending = writes[start : start + BATCH_SIZE]
            for _ in range(MAX_BATCH_ROUNDS):
                answer = self.client.batch_write_item(RequestItems={self.table_name: pending})
                pending = answer.get("UnprocessedItems", {}).get(self.table_name, [])
                if not pending:
                    break
            else:
                raise RuntimeError(f"DynamoDB left {len(pending)} tool-store writes unprocessed; sync again")


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _pack(definition: Mapping[str, Any]) -> bytes:
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return zlib.compress(text.encode("utf-8"))


def _unpack(data: bytes) -> dict[str, Any]:
    definition: dict[str, Any] = json.loads(zlib.decompress(data).decode("utf-8"))
    return definition


def _item(doc: ToolDocument, *, seq: int) -> dict[str, Any]:
    return {
        **_key(TOOL, f"{doc.server}#{doc.name}"),
        "server": {"S": doc.server},
        "name": {"S": doc.name},
        "public_name": {"S": doc.public_name},
        "hash": {"S": doc.hash},
        "indexed_seq": {"N": str(seq)},
        "definition": {"B": _pack(doc.definition)},
    }


def _approval_item(doc: ToolDocument) -> dict[str, Any]:
    return {
        **_key(APPROVAL, f"{doc.server}#{doc.name}"),
        "hash": {"S": doc.hash},
        "definition": {"B": _pack(doc.definition)},
    }


def _stored(item: dict[str, Any], approved_hash: str | None) -> StoredTool:
    """A tool item as a StoredTool; a schema-1 item not migrated yet keeps its `pinned_hash` as the approved one
    (both hashes there are of the old form, so they compare as before)."""
    document = ToolDocument(
        item["server"]["S"], item["name"]["S"], item["public_name"]["S"], _unpack(item["definition"]["B"]),
        item["hash"]["S"],
    )  # fmt: skip
    if approved_hash is None and "pinned_hash" in item:
        approved_hash = item["pinned_hash"]["S"]
    return StoredTool(document, int(item["indexed_seq"]["N"]), approved_hash)
