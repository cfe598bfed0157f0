"""Tests for the sample values of JSON Schemas (what the offline REST upstream answers): each keyword, the same
bytes on every run, the size cap, recursion cut, and values that validate against their schema.

Run with: .venv/bin/python -m pytest tests/test_schema_samples.py -q
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import jsonschema_rs
import pytest
from real_documents import REAL

from progressive_mcp.catalog import _freeze
from progressive_mcp.offline.schema_samples import (
    MAX_BYTES,
    MAX_MIN_ITEMS,
    MAX_OPTIONAL_MEMBERS,
    dumps,
    merge,
    sample_value,
)

OPENAI = REAL["openai"]  # ../shared/openapi beside the repository, or $OPENAPI_DOCS_DIR
SEEDS = [f"tool{i}" for i in range(40)]  # many seeds: a bound must hold for every draw, not one lucky one


def errors(schema: Any, value: Any) -> list[str]:
    return [e.message for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(value)]


def each_seed(schema: Any, **options: Any) -> list[Any]:
    return [sample_value(schema, seed, **options) for seed in SEEDS]


PET: dict[str, Any] = {
    "$defs": {
        "Tag": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 12}}},
        "Pet": {
            "type": "object",
            "required": ["id", "name", "status"],
            "properties": {
                "id": {"type": "integer", "format": "int64", "minimum": 1},
                "name": {"type": "string", "minLength": 1},
                "status": {"type": "string", "enum": ["available", "sold"]},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
                "born": {"type": "string", "format": "date"},
                "weight": {"type": ["number", "null"], "minimum": 0.5, "maximum": 80},
                "owner": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Owner"}]},
            },
        },
        "Owner": {
            "allOf": [
                {
                    "type": "object",
                    "required": ["email"],
                    "properties": {"email": {"type": "string", "format": "email"}},
                },
                {
                    "type": "object",
                    "required": ["since"],
                    "properties": {"since": {"type": "string", "format": "date-time"}},
                },
            ]
        },
    },
    "type": "object",
    "required": ["items", "total"],
    "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/Pet"}},
        "total": {"type": "integer", "minimum": 0},
        "next": {"type": ["string", "null"], "format": "uri"},
    },
}


# --- determinism ------------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_value_and_another_seed_another() -> None:
    first = dumps(sample_value(PET, "listPets"))
    assert dumps(sample_value(PET, "listPets")) == first
    assert dumps(sample_value(PET, "listOtherPets")) != first


@pytest.mark.slow
def test_the_same_bytes_in_other_processes_whatever_their_hash_seed() -> None:
    script = (
        "import json, sys; from progressive_mcp.offline.schema_samples import dumps, sample_value; "
        "sys.stdout.write(dumps(sample_value(json.loads(sys.argv[1]), 'listPets')))"
    )
    outputs = set()
    for hash_seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run(
            [sys.executable, "-c", script, json.dumps(PET)], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(run.stdout)
    assert outputs == {dumps(sample_value(PET, "listPets"))}


def test_frozen_catalog_schemas_give_the_same_value_as_plain_ones() -> None:
    assert sample_value(_freeze(PET), "listPets") == sample_value(PET, "listPets")


# --- validity ---------------------------------------------------------------------------------------


def test_generated_values_validate_against_their_schema() -> None:
    for value in each_seed(PET):
        assert errors(PET, value) == []
        assert value["items"] and all(isinstance(pet["id"], int) and pet["id"] >= 1 for pet in value["items"])


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"type": "string", "minLength": 30},
        {"type": "string", "maxLength": 3},
        {"type": "integer", "minimum": 5, "maximum": 7},
        {"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 7},
        {"type": "number", "minimum": 0.1, "maximum": 0.2},
        {"type": "number", "exclusiveMinimum": 0, "maximum": 0.01},
        {"type": "integer", "multipleOf": 25, "minimum": 1, "maximum": 120},
        {"type": "number", "multipleOf": 0.5, "minimum": 1},
        {"type": "integer", "maximum": -3},
        {"type": "integer", "format": "int32", "minimum": 2147483640},
        {"type": "boolean"},
        {"type": "null"},
        {"type": ["integer", "null"]},
        {"type": ["null", "boolean"]},
        {"type": "array", "items": {"type": "integer"}, "minItems": 3},
        {"type": "array", "items": {"type": "integer"}, "maxItems": 1},
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        {"type": "object", "additionalProperties": {"type": "number"}},
        {"type": "object", "required": ["a", "b"], "properties": {"a": {"const": 1}}},
        {"minimum": 3},  # no type: implied by the keywords
        {"properties": {"x": {"type": "string"}}, "required": ["x"]},
        {"items": {"type": "boolean"}, "minItems": 1},
        {"oneOf": [{"type": "string", "format": "uuid"}, {"type": "integer"}]},
        {"anyOf": [{"type": "null"}, {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}]},
        {
            "allOf": [
                {"type": "object", "required": ["a"]},
                {"required": ["b"], "properties": {"b": {"type": "integer"}}},
            ]
        },
        {"allOf": [{"type": ["integer", "null"]}, {"type": "number", "minimum": 10}]},
    ],
)
def test_each_keyword_gives_a_valid_value(schema: dict[str, Any]) -> None:
    for value in each_seed(schema):
        assert errors(schema, value) == [], value


# --- what a value is made of -----------------------------------------------------------------------


def test_const_then_examples_then_example_then_default_then_enum() -> None:
    everything = {"const": "c", "examples": ["x1", "x2"], "example": "e", "default": "d", "enum": ["n1"]}
    order = ["const", "examples", "example", "default", "enum"]
    expected = ["c", "x1", "e", "d", "n1"]
    for i, want in enumerate(expected):
        schema = {"type": "string", **{k: everything[k] for k in order[i:]}}
        assert sample_value(schema, "t") == want
    assert sample_value({"enum": [None, "on"]}, "t") == "on"  # a nullable enum: its first real value
    assert sample_value({"examples": {"one": {"value": {"a": 1}}}}, "t") == {"a": 1}  # OpenAPI's named examples


def test_an_example_of_the_wrong_type_is_passed_over() -> None:
    # Real documents say `default: null` of non-nullable members and give an object's example as a JSON string.
    assert sample_value({"type": "object", "example": '{"a": 1}', "properties": {}}, "t") == {}
    assert isinstance(sample_value({"type": "string", "default": None}, "t"), str)
    assert sample_value({"type": ["string", "null"], "default": None}, "t") is None
    assert sample_value({"type": "number", "example": 3}, "t") == 3  # an integer is a number


def test_examples_inside_a_schema_are_used_for_their_member() -> None:
    schema = {
        "type": "object",
        "required": ["symbol"],
        "properties": {"symbol": {"type": "string", "examples": ["IBM"]}},
    }
    assert sample_value(schema, "t") == {"symbol": "IBM"}


def test_strings_follow_their_format() -> None:
    def one(fmt: str) -> str:
        value = sample_value({"type": "string", "format": fmt}, "fmt")
        assert isinstance(value, str)
        return value

    stamp = dt.datetime.fromisoformat(one("date-time").replace("Z", "+00:00"))
    assert stamp.tzinfo is not None and dt.datetime(2025, 11, 1, tzinfo=dt.UTC) <= stamp
    dt.date.fromisoformat(one("date"))
    dt.time.fromisoformat(one("time").removesuffix("Z"))
    assert uuid.UUID(one("uuid")).version == 4
    assert one("email").endswith("@example.com") and "@" in one("email")
    assert one("uri").startswith("https://example.com/")
    assert one("uri-reference").startswith("/")
    assert ipaddress.ip_address(one("ipv4")).version == 4
    assert ipaddress.ip_address(one("ipv6")).version == 6
    assert one("hostname").endswith(".example.com")
    base64.b64decode(one("byte"), validate=True)
    assert one("duration").startswith("P")
    assert int(one("int64")) > 0  # a number sent as a string
    assert one("no-such-format")  # text all the same


def test_text_is_named_after_its_member_and_patterns_are_not_followed() -> None:
    schema = {
        "type": "object",
        "required": ["city"],
        "properties": {"city": {"type": "string", "pattern": "^[A-Z]{3}$"}},
    }
    assert sample_value(schema, "t")["city"].startswith("city-")


def test_nullable_types_and_options_give_their_non_null_value() -> None:
    for schema in (
        {"type": ["null", "integer"]},
        {"anyOf": [{"type": "null"}, {"type": "integer"}]},
        {"oneOf": [{"type": "null"}, {"type": "integer"}]},
        {"type": "integer", "nullable": True},  # OpenAPI 3.0
    ):
        assert isinstance(sample_value(schema, "t"), int), schema


def test_one_of_takes_the_first_option_with_its_siblings() -> None:
    schema = {
        "type": "object",
        "required": ["kind"],
        "properties": {"kind": {"type": "string"}},
        "oneOf": [
            {"required": ["cat"], "properties": {"cat": {"const": "meow"}, "kind": {"const": "cat"}}},
            {"required": ["dog"], "properties": {"dog": {"const": "woof"}}},
        ],
    }
    value = sample_value(schema, "t")
    assert value["kind"] == "cat" and value["cat"] == "meow" and "dog" not in value


def test_all_of_merges_members_required_names_and_types() -> None:
    schema = {
        "allOf": [
            {"type": "object", "required": ["id"], "properties": {"id": {"type": ["integer", "string"]}}},
            {
                "type": "object",
                "required": ["name"],
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
            },
        ]
    }
    value = sample_value(schema, "t")
    assert isinstance(value["id"], int) and isinstance(value["name"], str)
    assert merge({"required": ["a"]}, {"required": ["b", "a"]})["required"] == ["a", "b"]
    assert merge({"type": ["integer", "null"]}, {"type": "number"})["type"] == "integer"


def test_write_only_members_are_left_out_of_answers() -> None:
    schema = {
        "type": "object",
        "properties": {"password": {"type": "string", "writeOnly": True}, "a": {"type": "string"}},
    }
    assert sample_value(schema, "t") == {"a": sample_value(schema, "t")["a"]}


def test_arrays_hold_one_or_two_items_within_their_bounds() -> None:
    lengths = {len(sample_value({"type": "array", "items": {"type": "integer"}}, seed)) for seed in SEEDS}
    assert lengths == {1, 2}
    assert all(len(v) == 5 for v in each_seed({"type": "array", "items": {"type": "string"}, "minItems": 5}))
    assert len(sample_value({"type": "array", "items": {"type": "string"}, "minItems": 1000}, "t")) == MAX_MIN_ITEMS
    assert sample_value({"type": "array", "maxItems": 0, "items": {"type": "string"}}, "t") == []
    assert sample_value({"type": "array", "prefixItems": [{"const": 1}, {"const": "b"}]}, "t") == [1, "b"]


def test_unique_items_are_never_repeated_even_when_few_values_exist() -> None:
    # PagerDuty's `include` of getAutomationActionsRunners: uniqueItems over a one-value enum
    one = {"type": "array", "uniqueItems": True, "items": {"type": "string", "enum": ["associated_actions"]}}
    assert {json.dumps(v) for v in each_seed(one)} == {'["associated_actions"]'}
    few = {"type": "array", "uniqueItems": True, "minItems": 2, "items": {"type": "boolean"}}
    for value in each_seed(few):
        assert sorted(value) == [False, True] and not errors(few, value)


def test_a_map_shows_one_entry() -> None:
    assert list(sample_value({"type": "object", "additionalProperties": {"type": "integer"}}, "t")) == [
        "additionalProp1"
    ]


def test_schemas_cut_by_a_source_give_empty_objects() -> None:
    # What a source leaves of a schema it cut for recursion or size: a type and a description.
    cut = {"type": "object", "description": "A Thread (cut: recursive)."}
    assert sample_value(cut, "t") == {}
    assert sample_value({"type": "object", "required": ["parent"], "properties": {"parent": cut}}, "t") == {
        "parent": {}
    }


def test_a_schema_that_says_nothing_gives_text() -> None:
    assert isinstance(sample_value({}, "t"), str)
    assert isinstance(sample_value(True, "t"), str)
    assert sample_value({"type": "object", "required": ["x"], "properties": {"x": {"description": "any"}}}, "t")["x"]


# --- $ref, recursion and size -----------------------------------------------------------------------


TREE: dict[str, Any] = {
    "$defs": {
        "Node": {
            "type": "object",
            "required": ["name", "children"],
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                "parent": {"$ref": "#/$defs/Node"},
            },
        }
    },
    "$ref": "#/$defs/Node",
}


def test_recursion_through_a_ref_is_cut_at_its_first_repeat() -> None:
    for value in each_seed(TREE):
        assert value["children"] == []  # the items would recurse: none
        assert "parent" not in value  # an optional member that would recurse: left out
        assert errors(TREE, value) == []


def test_a_required_member_that_would_recurse_gets_the_smallest_value_of_its_type() -> None:
    schema = {
        "$defs": {
            "A": {
                "type": "object",
                "required": ["next", "n"],
                "properties": {"next": {"$ref": "#/$defs/A"}, "n": {"type": "integer"}},
            }
        },
        "$ref": "#/$defs/A",
    }
    value = sample_value(schema, "t")
    assert value["next"] == {} and isinstance(value["n"], int)


def test_mutual_recursion_and_long_chains_stop_at_the_depth_limit() -> None:
    defs = {
        f"D{i}": {"type": "object", "required": ["next"], "properties": {"next": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(30)
    }
    defs["D30"] = {"type": "string"}
    value = sample_value({"$defs": defs, "$ref": "#/$defs/D0"}, "t", max_ref_depth=4)
    depth = 0
    while isinstance(value, dict) and value:
        value, depth = value["next"], depth + 1
    assert depth == 4 and value == {}  # four refs followed, the fifth cut
    ping_pong = {
        "$defs": {
            "Ping": {"type": "object", "properties": {"pong": {"$ref": "#/$defs/Pong"}}},
            "Pong": {"type": "object", "properties": {"ping": {"$ref": "#/$defs/Ping"}}},
        },
        "$ref": "#/$defs/Ping",
    }
    assert sample_value(ping_pong, "t") == {"pong": {}}


def test_refs_resolve_against_a_given_root_and_json_pointer_escapes() -> None:
    document = {
        "components": {
            "schemas": {"a/b": {"type": "integer", "const": 7}, "Pet": {"$ref": "#/components/schemas/a~1b"}}
        }
    }
    assert sample_value({"$ref": "#/components/schemas/Pet"}, "t", root=document) == 7
    assert sample_value({"$ref": "#/components/schemas/Nope"}, "t", root=document) is not None  # broken: still a value
    assert sample_value({"$ref": "https://example.com/other.json"}, "t") == {}  # external: cut


def test_a_ref_with_siblings_merges_them_over_its_target() -> None:
    schema = {"$defs": {"S": {"type": "string"}}, "$ref": "#/$defs/S", "examples": ["from the sibling"]}
    assert sample_value(schema, "t") == "from the sibling"


def huge_schema(width: int, depth: int) -> dict[str, Any]:
    """An object `width` members wide and `depth` levels deep, every member required."""
    node: dict[str, Any] = {"type": "string"}
    for level in range(depth):
        node = {
            "type": "object",
            "required": [f"m{level}_{i}" for i in range(width)],
            "properties": {f"m{level}_{i}": node for i in range(width)},
        }
    return node


def test_the_size_cap_keeps_a_huge_schema_small() -> None:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(300)}}
    assert len(sample_value(wide, "t")) == MAX_OPTIONAL_MEMBERS  # optional members: a dozen at most
    deep = {"type": "object", "properties": {f"p{i}": {"type": "array", "items": PET} for i in range(300)}}
    value = sample_value(deep, "t", root=PET)
    assert 1 <= len(value) < MAX_OPTIONAL_MEMBERS  # the budget ran out before the dozen
    assert len(dumps(value)) <= MAX_BYTES
    required_everywhere = huge_schema(width=12, depth=4)  # 12**4 = 20,736 required strings
    value = sample_value(required_everywhere, "t")
    assert len(dumps(value)) <= MAX_BYTES
    assert list(value) == [f"m3_{i}" for i in range(12)]  # the top level is whole; deeper ones are cut
    too_wide = huge_schema(width=3000, depth=1)  # its required members alone are over the cap
    assert sample_value(too_wide, "t") == {}


def test_the_schemas_own_example_is_kept_whatever_its_size() -> None:
    big = ["x" * 100] * 500
    assert sample_value({"type": "array", "examples": [big]}, "t") == big


# --- a real, large document -------------------------------------------------------------------------


def openai_answers() -> list[tuple[str, dict[str, Any]]]:
    if not OPENAI.is_file():
        pytest.skip(f"{OPENAI} is not on this machine")
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = json.loads(json.dumps(yaml.load(OPENAI.read_text(encoding="utf-8"), Loader=loader), default=str))
    answers = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            for status, response in operation.get("responses", {}).items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if str(status).startswith("2") and schema is not None:
                    answers.append((operation.get("operationId") or f"{method} {path}", schema))
    answers.append(("document", document))
    return answers


def test_every_answer_of_openais_document_is_small_and_the_same_twice() -> None:
    *answers, (_, document) = openai_answers()
    assert len(answers) > 250
    for name, schema in answers:
        text = dumps(sample_value(schema, name, root=document))
        assert len(text) <= MAX_BYTES or "example" in schema or "examples" in schema, name
        assert dumps(sample_value(schema, name, root=document)) == text


# --- shapes the every-operation sweep met in real documents (issue 28): each value must validate ---------------

EXCLUSIVE_SHAPES = [
    # OpenAI's `stop`: no type of its own, `default: null` beside options none of which is null
    {"default": None, "oneOf": [{"type": "string", "default": "<|endoftext|>"}, {"type": "array", "items": {}}]},
    # OpenAI's file_search: "exactly one of" said as a oneOf of required names
    {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "string"}}, "stores": {"type": "array"}},
        "oneOf": [{"required": ["ids"]}, {"required": ["stores"]}],
    },
    # OpenAI's ImageRefParam: anyOf of required names, and `not` both
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {"image_url": {"type": "string"}, "file_id": {"type": "string"}},
        "anyOf": [{"required": ["image_url"]}, {"required": ["file_id"]}],
        "not": {"required": ["image_url", "file_id"]},
    },
    # `not` of a value or of a type
    {"type": "string", "enum": ["a", "b"], "not": {"const": "a"}},
    {"not": {"type": "string"}},
    # DigitalOcean's app spec: items with required members in a long array once the budget is spent
    {
        "type": "object",
        "properties": {
            f"list{i}": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string"}, "more": {"type": "object", "properties": {"x": {}}}},
                },
            }
            for i in range(30)
        },
        "required": [f"list{i}" for i in range(30)],
    },
]


@pytest.mark.parametrize("schema", EXCLUSIVE_SHAPES)
def test_one_of_options_are_made_exclusive_and_not_is_respected(schema: dict[str, Any]) -> None:
    for seed in SEEDS:
        value = sample_value(schema, seed=seed)
        assert errors(schema, value) == [], (seed, value)
