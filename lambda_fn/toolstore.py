"""The gateway's tool store in DynamoDB: the `ToolStore` the Lambda functions share.

The scheduled sync function (`lambda_fn.sync`) writes it; the serving function only reads it, at a cold start and
again whenever the store's generation moves (it looks every `PMCP_INDEX_POLL_S`, one small read), so no request
waits on another MCP server. One table, partition key `pk` and sort key `sk` (both strings); a `definition`
is zlib-compressed JSON:

| pk | sk | attributes |
|---|---|---|
| `tool` | `SERVER#TOOL` | `server`, `name`, `public_name`, `hash`, `pinned_hash`, `indexed_seq` (N), `definition` (B) |
| `server` | `SERVER` | `synced_at` (N), `fingerprint` |
| `meta` | `meta` | `seq` (N: the last sync's number), `generation` (N: moves with every write) |

Server names hold no `#` (`[A-Za-z0-9_-]`), so `SERVER#` prefixes exactly one server's tools. A sync's writes are
not one transaction (DynamoDB's hold at most 100 items): the generation is moved last, so readers reload once the
writes are in. Reads are strongly consistent. Example::

    store = DynamoToolStore("pmcp-tools", client=boto3.client("dynamodb"))
    gateway = Gateway(config, store, poll_s=60)
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from typing import Any

from progressive_mcp.gateway.documents import ToolDocument
from progressive_mcp.gateway.store import ServerState, StoredTool

TOOL, SERVER, META = "tool", "server", "meta"
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
        tools = [_stored(item) for item in items]
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
    ) -> int:
        seq = self._add(META, "seq")
        writes: list[dict[str, Any]] = [
            {"PutRequest": {"Item": _item(doc, pinned_hash=doc.hash, seq=seq)}} for doc in created
        ]
        writes += [{"DeleteRequest": {"Key": _key(TOOL, f"{server}#{name}")}} for name in deleted]
        self._batch(writes)
        for doc in updated:  # the pinned hash stays until `sync --approve` (or is the first seen, if none)
            self.client.update_item(
                TableName=self.table_name,
                Key=_key(TOOL, f"{doc.server}#{doc.name}"),
                UpdateExpression="SET #server = :server, #name = :name, #public = :public, #hash = :hash, "
                "#definition = :definition, #seq = :seq, #pinned = if_not_exists(#pinned, :hash)",
                ExpressionAttributeNames={
                    "#server": "server",
                    "#name": "name",
                    "#public": "public_name",
                    "#hash": "hash",
                    "#definition": "definition",
                    "#seq": "indexed_seq",
                    "#pinned": "pinned_hash",
                },
                ExpressionAttributeValues={
                    ":server": {"S": doc.server},
                    ":name": {"S": doc.name},
                    ":public": {"S": doc.public_name},
                    ":hash": {"S": doc.hash},
                    ":definition": {"B": _pack(doc.definition)},
                    ":seq": {"N": str(seq)},
                },
            )
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

    def forget(self, server: str) -> int:
        keys = [
            {"DeleteRequest": {"Key": _key(TOOL, item["sk"]["S"])}}
            for item in self._query(
                "pk = :pk AND begins_with(sk, :prefix)",
                {":pk": {"S": TOOL}, ":prefix": {"S": f"{server}#"}},
                projection="sk",
            )
        ]
        self._batch(keys)
        self.client.delete_item(TableName=self.table_name, Key=_key(SERVER, server))
        self._add(META, "generation")
        return len(keys)

    def approve(self, public_name: str) -> StoredTool | None:
        found = next((t for t in self.tools() if t.document.public_name == public_name), None)
        if found is None:
            return None
        doc = found.document
        self.client.update_item(
            TableName=self.table_name,
            Key=_key(TOOL, f"{doc.server}#{doc.name}"),
            UpdateExpression="SET #pinned = :hash",
            ExpressionAttributeNames={"#pinned": "pinned_hash"},
            ExpressionAttributeValues={":hash": {"S": doc.hash}},
        )
        self._add(META, "generation")
        return StoredTool(doc, doc.hash, found.indexed_seq)

    # --- helpers -------------------------------------------------------------------------------------------

    def _query(self, condition: str, values: dict[str, Any], projection: str | None = None) -> list[dict[str, Any]]:
        """Every item the key condition matches, across all pages."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        if projection:  # one attribute, by a placeholder name (DynamoDB reserves many words)
            request["ProjectionExpression"] = "#projected"
            request["ExpressionAttributeNames"] = {"#projected": projection}
        items: list[dict[str, Any]] = []
        while True:
            page = self.client.query(**request)
            items += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

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


def _pack(definition: dict[str, Any]) -> bytes:
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return zlib.compress(text.encode("utf-8"))


def _item(doc: ToolDocument, *, pinned_hash: str, seq: int) -> dict[str, Any]:
    return {
        **_key(TOOL, f"{doc.server}#{doc.name}"),
        "server": {"S": doc.server},
        "name": {"S": doc.name},
        "public_name": {"S": doc.public_name},
        "hash": {"S": doc.hash},
        "pinned_hash": {"S": pinned_hash},
        "indexed_seq": {"N": str(seq)},
        "definition": {"B": _pack(doc.definition)},
    }


def _stored(item: dict[str, Any]) -> StoredTool:
    definition = json.loads(zlib.decompress(item["definition"]["B"]).decode("utf-8"))
    document = ToolDocument(
        item["server"]["S"], item["name"]["S"], item["public_name"]["S"], definition, item["hash"]["S"]
    )
    return StoredTool(document, item["pinned_hash"]["S"], int(item["indexed_seq"]["N"]))
