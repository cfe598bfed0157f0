"""The OpenAPI source: documents → catalogs (names, categories, arguments, bodies, schemas, annotations, auth,
filters, compiled catalogs, errors), on fixtures written here and on the real documents in ../shared/openapi/."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
import yaml
from real_documents import REAL as REAL_DOCUMENTS
from real_documents import SHARED

from progressive_mcp.calls.rest import rest_parts
from progressive_mcp.catalog import _thaw
from progressive_mcp.errors import SpecError
from progressive_mcp.sources import filter_catalog, load_catalog, load_catalog_with_report
from progressive_mcp.sources.compiled import dumps, loads
from progressive_mcp.sources.filters import Filter
from progressive_mcp.sources.openapi import (
    MAX_NAME,
    argument_name,
    load_openapi,
    parse_text,
    path_category,
    tool_name,
)

FIXTURES = Path(__file__).parent / "fixtures" / "openapi"
TASKS = FIXTURES / "tasks" / "openapi.yaml"
SWAGGER = FIXTURES / "swagger2.json"
REAL = {name: REAL_DOCUMENTS[name] for name in ("spotify", "slack", "openai", "digitalocean")}
# What the documents' README says each holds: (path, method) pairs under `paths`.
REAL_OPERATIONS = {"spotify": 97, "slack": 174, "openai": 288, "digitalocean": 659}
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def schema_of(catalog: Any, name: str) -> dict[str, Any]:
    return _thaw(catalog.get(name).input_schema)


@pytest.fixture(scope="module")
def tasks() -> Any:
    return load_catalog_with_report(TASKS)


# --- the fixture document, rule by rule ------------------------------------------------------------------------


def test_a_split_document_loads_with_its_report(tasks: Any) -> None:
    catalog, report = tasks
    assert report.version == "3.0.3"
    assert (report.operations, report.tools, len(catalog)) == (10, 9, 9)
    skipped = {s.operation: s.reason for s in report.skipped}
    # A $ref that does not resolve names the operation, the JSON pointer and the file it wanted.
    reason = skipped["GET /tasks/{task_id}/watchers (watchers_list)"]
    assert "#/paths/~1tasks~1{task_id}~1watchers/get/parameters/0/schema" in reason
    assert "schemas/missing.yaml does not exist" in reason


def test_api_server_variables_and_auth(tasks: Any) -> None:
    api = tasks[0].api
    assert api.base_url == "https://eu.tasks.example.com/api/v1"  # {region} from its default
    assert api.dispatch is None and api.default_cache_ttl_s == 0
    assert (api.auth.scheme, api.auth.in_, api.auth.name, api.auth.env) == (
        "bearer",
        "header",
        "Authorization",
        "PMCP_UPSTREAM_KEY",
    )


def test_names_from_operation_ids_or_method_and_path(tasks: Any) -> None:
    names = {t.name for t in tasks[0].tools}
    assert {"projects_list", "projects.get", "projects_create", "projects_delete"} <= names
    assert "comments_add_v2_new" in names  # "comments:add/v2 (new)" made a valid name
    assert "get_projects_project_id_tasks" in names  # no operationId
    assert "head_health" in names
    assert all(TOOL_NAME.match(n) for n in names)
    # The original operationId, method and path stay visible (TOOL_GET shows the description).
    comment = tasks[0].get("comments_add_v2_new")
    assert comment.operation.operation_id == "comments:add/v2 (new)"
    assert comment.description.startswith("POST /tasks/{task_id}/comments (operationId comments:add/v2 (new)).")


def test_long_and_clashing_names_stay_valid_and_stable() -> None:
    long_id = "x" * 80
    name = tool_name(long_id, "GET", "/a")
    assert len(name) <= MAX_NAME and TOOL_NAME.match(name)
    assert name == tool_name(long_id, "GET", "/a")  # stable
    assert tool_name(long_id, "GET", "/a") != tool_name("x" * 79 + "y", "GET", "/a")
    assert tool_name(None, "GET", "/v2/{id}/top-tracks") == "get_v2_id_top-tracks"
    assert tool_name("1st", "GET", "/") == "op_1st"


def test_categories_from_tags_and_paths(tasks: Any) -> None:
    catalog = tasks[0]
    assert catalog.categories["projects"] == "Projects: Projects group tasks."
    assert catalog.categories["tasks"] == "Tasks: Tasks belong to a project."  # a $ref'd tag description
    assert catalog.get("head_health").category == "health"  # untagged: the first path segment
    assert path_category("/v2/api/droplets/{id}") == "droplets"
    assert path_category("/chat.postMessage") == "chat"


def test_summary_title_and_description_fallbacks(tasks: Any) -> None:
    catalog = tasks[0]
    listed = catalog.get("get_projects_project_id_tasks")
    assert listed.summary == "List the tasks of a project."  # first sentence of the description
    assert len(catalog.get("projects.get").summary) <= 120
    health = catalog.get("head_health")
    assert (health.summary, health.description) == ("HEAD /health", "HEAD /health.")


def test_path_level_parameters_apply_and_the_operations_own_win(tasks: Any) -> None:
    catalog = tasks[0]
    get = catalog.get("projects.get")
    trace = get.param("X_Trace")
    assert (trace.location, trace.upstream_name, trace.required) == ("header", "X-Trace", True)
    assert "own trace header" in trace.description
    delete = catalog.get("projects_delete")  # no own X-Trace: the path-level one
    assert delete.param("X_Trace").description == "Path-level trace header."
    assert delete.param("X_Trace").required is False
    assert schema_of(catalog, "projects_delete")["properties"]["project_id"]["pattern"] == "^p[0-9]+$"


def test_parameters_keep_styles_enums_defaults_and_deprecation(tasks: Any) -> None:
    catalog = tasks[0]
    tool = catalog.get("get_projects_project_id_tasks")
    status, filt, limit = tool.param("status"), tool.param("filter"), tool.param("limit")
    assert (status.style, status.explode) == ("form", False)
    assert filt.style == "deepObject"
    props = schema_of(catalog, tool.name)["properties"]
    assert props["status"]["items"]["enum"] == ["open", "done", "off"]  # YAML 1.2: `off` is a string
    assert props["limit"] == {
        "type": ["integer", "null"],  # 3.0 nullable
        "minimum": 1,
        "maximum": 100,
        "default": 20,
        "deprecated": True,
    }
    assert limit.deprecated and limit.type == "integer"
    assert props["due_before"]["format"] == "date"
    # Credentials and ignored headers never become arguments.
    assert "access_token" not in props and "Accept" not in props


def test_json_bodies_flatten_when_plain_and_forms_always(tasks: Any) -> None:
    catalog = tasks[0]
    create = catalog.get("projects_create")
    assert create.operation.body == "members" and create.operation.body_type == "application/json"
    schema = schema_of(catalog, "projects_create")
    assert set(schema["properties"]) == {"name", "owner_id"} and schema["required"] == ["name"]
    # allOf of two plain objects is merged, then flattened; the body is optional, so nothing is required.
    replace = schema_of(catalog, "projects_replace")
    assert {"name", "owner_id", "archived"} <= set(replace["properties"])
    assert replace["required"] == ["project_id"]
    comment = catalog.get("comments_add_v2_new")
    assert comment.operation.body_type == "application/x-www-form-urlencoded"
    assert [(p.name, p.location) for p in comment.params] == [("task_id", "path"), ("text", "body"), ("notify", "body")]


def test_a_body_that_cannot_be_flattened_is_one_argument(tmp_path: Path) -> None:
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Bodies", "version": "1"},
        "paths": {
            "/items/{id}": {
                "post": {
                    "operationId": "update",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}}}}
                        },
                    },
                    "responses": {"204": {"description": "done"}},
                },
                "put": {
                    "operationId": "either",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}
                        }
                    },
                    "responses": {"204": {"description": "done"}},
                },
            }
        },
    }
    path = tmp_path / "bodies.json"
    path.write_text(json.dumps(document))
    catalog = load_catalog(path)
    clash = catalog.get("update")  # a member named like the path parameter: not flattened
    assert clash.operation.body == "whole"
    assert [(p.name, p.location, p.required) for p in clash.params] == [("id", "path", True), ("body", "body", True)]
    either = schema_of(catalog, "either")["properties"]["body"]
    assert either["anyOf"] == [{"type": "string"}, {"type": "integer"}]  # a document's oneOf reads as anyOf
    assert catalog.get("either").param("body").required is False


def test_schemas_translate_to_2020_12_and_cut_recursion(tasks: Any) -> None:
    catalog = tasks[0]
    output = _thaw(catalog.get("projects.get").output_schema)
    assert "secret_note" not in output["properties"]  # write-only: not in answers
    assert output["properties"]["budget"] == {"type": "number", "exclusiveMinimum": 0}  # 3.0 boolean form
    assert output["properties"]["open_tasks"] == {"type": "integer", "minimum": 0}
    assert output["properties"]["parent"]["description"].endswith("(recursive; not expanded further).")
    assert output["examples"] == [{"id": "p1", "name": "Garden", "owner": {"id": "u1", "name": "Ada"}}]
    create_input = schema_of(catalog, "projects_create")
    assert "id" not in create_input["properties"]  # read-only (only in Project, not ProjectCreate; checked below)
    for tool in catalog.tools:
        for schema in (tool.input_schema, tool.output_schema):
            if schema is not None:
                jsonschema.Draft202012Validator.check_schema(_thaw(schema))
                jsonschema_rs.Draft202012Validator(_thaw(schema))


def test_read_only_members_leave_request_bodies(tmp_path: Path) -> None:
    document = {
        "openapi": "3.0.0",
        "info": {"title": "RO", "version": "1"},
        "paths": {
            "/things": {
                "post": {
                    "operationId": "make",
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["id", "name"],
                                    "properties": {
                                        "id": {"type": "string", "readOnly": True},
                                        "name": {"type": "string"},
                                    },
                                }
                            }
                        },
                        "required": True,
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    (tmp_path / "ro.json").write_text(json.dumps(document))
    schema = schema_of(load_catalog(tmp_path / "ro.json"), "make")
    assert set(schema["properties"]) == {"name"} and schema["required"] == ["name"]


def test_annotations_follow_the_method(tasks: Any) -> None:
    catalog = tasks[0]
    hints = {t.method: dict(t.annotations) for t in catalog.tools}
    assert hints["GET"]["readOnlyHint"] is True and hints["HEAD"]["readOnlyHint"] is True
    assert hints["POST"] == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert hints["GET"] == {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": True}
    assert hints["DELETE"]["destructiveHint"] is True and hints["DELETE"]["idempotentHint"] is True
    assert hints["PUT"]["idempotentHint"] is True
    assert catalog.get("projects_delete").definition()["annotations"]["destructiveHint"] is True


def test_swagger_2_documents_load_natively() -> None:
    catalog, report = load_catalog_with_report(SWAGGER)
    assert report is not None and report.version == "2.0"
    assert catalog.api.base_url == "https://notes.example.com/v1"
    assert (catalog.api.auth.scheme, catalog.api.auth.in_, catalog.api.auth.name) == ("api_key", "header", "X-Key")
    search = catalog.get("notes_search")
    tags = search.param("tags")
    assert (tags.style, tags.explode) == ("form", True)  # collectionFormat multi
    assert search.param("fields").style == "pipeDelimited"
    assert "X_Key" not in schema_of(catalog, "notes_search")["properties"]  # the apiKey's own parameter
    create = catalog.get("notes_create")  # an in: body parameter with a plain object: flattened
    assert create.operation.body == "members"
    assert schema_of(catalog, "notes_create")["properties"]["pinned"]["type"] == ["boolean", "null"]  # x-nullable
    share = catalog.get("notes_share")  # formData with a file: a multipart form, the file as base64
    assert share.operation.body_type == "multipart/form-data"
    assert {p.name for p in share.params} == {"note_id", "email", "card"}
    assert dict(share.param("card").schema) == {"type": "string", "contentEncoding": "base64"}
    image = catalog.get("notes_image")
    assert image.operation.body_type == "multipart/form-data" and image.param("image").required
    assert report.skipped == []


ENCODED_FORMS = {
    "openapi": "3.1.0",
    "info": {"title": "Forms", "version": "1"},
    "servers": [{"url": "https://forms.example"}],
    "paths": {
        "/refunds": {
            "post": {
                "operationId": "refund",
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "amount": {"type": "integer"},
                                    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                                    "options": {"type": "object"},
                                    "ids": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                            "encoding": {
                                "metadata": {"style": "deepObject", "explode": True},
                                "options": {"contentType": "application/json"},
                                "ids": {"style": "pipeDelimited", "explode": False},
                            },
                        }
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/uploads": {
            "post": {
                "operationId": "upload",
                "requestBody": {
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "file": {"type": "string", "format": "binary", "description": "The file."},
                                    "pages": {
                                        "type": "array",
                                        "items": {"type": "string", "contentMediaType": "image/png"},
                                    },
                                    "image": {"anyOf": [{"type": "string", "format": "binary"}, {"type": "string"}]},
                                    "sdp": {"type": "string"},
                                },
                            },
                            "encoding": {
                                "sdp": {
                                    "contentType": "application/sdp",
                                    "headers": {
                                        "X-Rate": {"schema": {"type": "integer", "const": 5}},
                                        "X-Free": {"schema": {"type": "string"}},
                                        "Content-Type": {"schema": {"const": "text/html"}},
                                    },
                                }
                            },
                        }
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
}


def test_a_bodys_encoding_and_its_files_are_kept_for_the_request(tmp_path: Path) -> None:
    """The Encoding Object (style, explode, contentType, fixed part headers) reaches each body member, files become
    base64-or-data-URL arguments (alone, in arrays, in anyOf), and a compiled catalog keeps all of it."""
    loaded = load_catalog(write(tmp_path, ENCODED_FORMS))
    compiled = loads(dumps(loaded))
    for catalog in (loaded, compiled):
        refund, upload = catalog.get("refund"), catalog.get("upload")
        metadata, options, ids = (refund.param(n) for n in ("metadata", "options", "ids"))
        assert (metadata.style, metadata.explode, metadata.content_type) == ("deepObject", True, None)
        assert (options.style, options.content_type) == (None, "application/json")
        assert (ids.style, ids.explode) == ("pipeDelimited", False)
        assert refund.param("amount").style is None
        sdp = upload.param("sdp")
        assert sdp.content_type == "application/sdp" and dict(sdp.part_headers or {}) == {"X-Rate": "5"}
        schema = schema_of(catalog, "upload")["properties"]
        assert schema["file"]["contentEncoding"] == "base64" and "data URL" in schema["file"]["description"]
        assert schema["file"]["description"].startswith("The file.")
        assert schema["pages"]["items"] == {"type": "string", "contentEncoding": "base64"}
        assert schema["image"]["anyOf"][0] == {"type": "string", "contentEncoding": "base64"}
        parts = rest_parts(refund, {"ids": ["a", "b"], "metadata": {"k": "v"}, "options": {"x": 1}, "amount": 1}, None)
        assert parts.body == b"amount=1&metadata[k]=v&options=%7B%22x%22%3A1%7D&ids=a|b"
    assert compiled.get("upload").content_hash == loaded.get("upload").content_hash


def test_swagger_collection_formats_are_kept_for_the_request(tmp_path: Path) -> None:
    document = {
        "swagger": "2.0",
        "info": {"title": "S", "version": "1"},
        "host": "s.example",
        "paths": {
            "/things/{ids}": {
                "post": {
                    "operationId": "things",
                    "consumes": ["application/x-www-form-urlencoded"],
                    "parameters": [
                        {"name": "ids", "in": "path", "required": True, "type": "array", "items": {"type": "string"}},
                        {
                            "name": "t",
                            "in": "query",
                            "type": "array",
                            "items": {"type": "string"},
                            "collectionFormat": "tsv",
                        },
                        {
                            "name": "m",
                            "in": "formData",
                            "type": "array",
                            "items": {"type": "string"},
                            "collectionFormat": "multi",
                        },
                        {
                            "name": "s",
                            "in": "formData",
                            "type": "array",
                            "items": {"type": "string"},
                            "collectionFormat": "ssv",
                        },
                        {"name": "n", "in": "formData", "type": "string"},
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    catalog = loads(dumps(load_catalog(write(tmp_path, document))))
    tool = catalog.get("things")
    assert [tool.param(n).collection_format for n in ("ids", "t", "m", "s", "n")] == [
        "csv",
        "tsv",
        "multi",
        "ssv",
        None,
    ]
    parts = rest_parts(tool, {"ids": ["1", "2"], "t": ["a", "b"], "m": ["x", "y"], "s": ["p", "q"], "n": "z"}, None)
    assert (parts.path, parts.query) == ("/things/1,2", ("t=a%09b",))
    assert (parts.body, parts.content_type) == (b"m=x&m=y&s=p%20q&n=z", "application/x-www-form-urlencoded")


def test_yaml_is_read_as_yaml_1_2() -> None:
    data = parse_text("a: [off, on, yes, no, true, 2024-01-31, 1.5]\n", "x.yaml")
    assert data == {"a": ["off", "on", "yes", "no", True, "2024-01-31", 1.5]}


def test_argument_names_are_identifiers_and_unique() -> None:
    taken: set[str] = set()
    assert argument_name("X-Request-Id", "header", taken) == "X_Request_Id"
    assert argument_name("filter[name]", "query", taken) == "filter_name"
    assert argument_name("id", "path", taken) == "id"
    assert argument_name("id", "body", taken) == "id_body"
    assert argument_name("2fa", "query", taken) == "p_2fa"


# --- broken documents ------------------------------------------------------------------------------------------


def write(tmp_path: Path, document: Any, name: str = "api.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def one_operation(**operation: Any) -> dict[str, Any]:
    body = {"operationId": "op", "responses": {"200": {"description": "ok"}}, **operation}
    return {"openapi": "3.0.0", "info": {"title": "T", "version": "1"}, "paths": {"/x": {"get": body}}}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"openapi": "4.0.0", "info": {}, "paths": {"/x": {}}}, "OpenAPI version '4.0.0' is not supported"),
        ({"openapi": "3.0.0", "info": {}, "paths": {}}, "#/paths: the document has no operations"),
        ({"openapi": "3.0.0", "info": {}}, "#/paths: the document has no operations"),
        (
            {"openapi": "3.1.0", "info": {}, "paths": {}, "webhooks": {"account.created": {"post": {}}}},
            "it describes only webhooks (1), the requests the API sends, which are not tools to call",
        ),
        ("openapi: 3.0.0\npaths: {/x: [unclosed\n", "not valid YAML or JSON (line"),
    ],
)
def test_unusable_documents_are_refused_with_the_reason(tmp_path: Path, document: Any, message: str) -> None:
    name = "api.yaml" if isinstance(document, str) else "api.json"
    with pytest.raises(SpecError) as caught:
        load_openapi(write(tmp_path, document, name))
    assert message in str(caught.value)


def test_every_operation_broken_means_no_catalog_naming_each(tmp_path: Path) -> None:
    document = one_operation(parameters=[{"$ref": "#/components/parameters/Nope"}])
    with pytest.raises(SpecError) as caught:
        load_catalog(write(tmp_path, document))
    text = str(caught.value)
    assert "no operation could become a tool" in text
    assert "GET /x (op): $ref '#/components/parameters/Nope' at #/paths/~1x/get/parameters/0" in text


def test_refs_outside_the_folder_or_remote_are_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("password: hunter2\n")
    folder = tmp_path / "api"
    folder.mkdir()
    document = {
        "openapi": "3.0.0",
        "info": {"title": "T", "version": "1"},
        "paths": {
            "/a": {"get": {"operationId": "a", "description": {"$ref": "../secret.yaml#/password"}, "responses": {}}},
            "/b": {
                "get": {
                    "operationId": "b",
                    "parameters": [{"$ref": "../secret.yaml#/password"}],
                    "responses": {},
                }
            },
            "/c": {
                "get": {
                    "operationId": "c",
                    "parameters": [{"$ref": "https://example.com/params.yaml#/p"}],
                    "responses": {},
                }
            },
        },
    }
    catalog, report = load_catalog_with_report(write(folder, document))
    assert [t.name for t in catalog.tools] == ["a"]
    assert "hunter2" not in json.dumps([t.definition() for t in catalog.tools])
    reasons = {s.operation: s.reason for s in report.skipped}
    assert "outside the document's folder" in reasons["GET /b (b)"]
    assert "not a local file" in reasons["GET /c (c)"]


def test_a_symlink_inside_the_folder_is_followed_before_the_folder_check(tmp_path: Path) -> None:
    """A link to a file outside (or to a folder outside) is refused like the path it points at; one that stays
    inside is read."""
    (tmp_path / "secret.yaml").write_text("password: {name: hunter2, in: query}\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "p.yaml").write_text("password: {name: hunter2, in: query}\n")
    folder = tmp_path / "api"
    (folder / "shared").mkdir(parents=True)
    (folder / "shared" / "p.yaml").write_text("q: {name: q, in: query}\n")
    (folder / "link.yaml").symlink_to(tmp_path / "secret.yaml")
    (folder / "linked_folder").symlink_to(tmp_path / "elsewhere")
    (folder / "inside.yaml").symlink_to(folder / "shared" / "p.yaml")
    refs = {"a": "inside.yaml#/q", "b": "link.yaml#/password", "c": "linked_folder/p.yaml#/password"}
    document = {
        "openapi": "3.0.0",
        "info": {"title": "T", "version": "1"},
        "paths": {f"/{k}": {"get": {"operationId": k, "parameters": [{"$ref": ref}], "responses": {}}}
                  for k, ref in refs.items()},
    }  # fmt: skip
    catalog, report = load_catalog_with_report(write(folder, document))
    assert [t.name for t in catalog.tools] == ["a"]
    reasons = {s.operation: s.reason for s in report.skipped}
    assert "outside the document's folder" in reasons["GET /b (b)"]
    assert "outside the document's folder" in reasons["GET /c (c)"]


def test_a_ref_cycle_is_refused_not_followed_forever(tmp_path: Path) -> None:
    document = one_operation(parameters=[{"$ref": "#/components/parameters/A"}])
    document["components"] = {
        "parameters": {"A": {"$ref": "#/components/parameters/B"}, "B": {"$ref": "#/components/parameters/A"}}
    }
    with pytest.raises(SpecError, match=r"\$ref chain longer than 32"):
        load_catalog(write(tmp_path, document))


# --- filters and compiled catalogs ----------------------------------------------------------------------------


def test_filters_by_method_tag_path_and_name() -> None:
    def names(include: str | None = None, exclude: str | None = None) -> set[str]:
        return {t.name for t in load_catalog(TASKS, include=include, exclude=exclude).tools}

    assert names("method:GET") == {"projects_list", "projects.get", "get_projects_project_id_tasks"}
    assert names("tag:tasks") == {"get_projects_project_id_tasks", "comments_add_v2_new", "attachments_upload"}
    assert names("path:/projects/*", "method:DELETE,method:PUT") == {"projects.get", "get_projects_project_id_tasks"}
    assert names("projects_*", "projects_create") == {"projects_list", "projects_replace", "projects_delete"}
    with pytest.raises(SpecError, match="leave no tool"):
        load_catalog(TASKS, include="method:PATCH")
    with pytest.raises(SpecError, match="use tag:NAME"):
        Filter.parse("verb:GET")


def test_filters_apply_to_spec_catalogs_by_category() -> None:
    catalog = filter_catalog(load_catalog(), "tag:forex", None)
    assert {t.category for t in catalog.tools} == {"forex"} and list(catalog.categories) == ["forex"]


@pytest.mark.slow
def test_compiled_catalogs_round_trip_without_the_openapi_tooling(tmp_path: Path, tasks: Any) -> None:
    catalog = tasks[0]
    compiled = tmp_path / "tasks.catalog.json"
    compiled.write_text(dumps(catalog))
    again, report = load_catalog_with_report(compiled)
    assert report is None
    assert again.version == catalog.version and again.tools == catalog.tools and again.api == catalog.api
    assert dict(again.categories) == dict(catalog.categories)
    assert [t.definition() for t in again.tools] == [t.definition() for t in catalog.tools]
    # The Lambda's path: a fresh interpreter loads it without importing the OpenAPI source or its libraries.
    import subprocess
    import sys

    probe = (
        "import sys; from progressive_mcp.sources import load_catalog; c = load_catalog(sys.argv[1]); "
        "print(len(c), [m for m in ('referencing', 'openapi_spec_validator', 'progressive_mcp.sources.openapi', "
        "'progressive_mcp.sources.spec') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(compiled)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "9 []"


def test_a_compiled_catalog_from_another_version_is_refused(tmp_path: Path, tasks: Any) -> None:
    data = json.loads(dumps(tasks[0]))
    data["progressive_mcp_catalog"] = 99
    with pytest.raises(SpecError, match="compile it again"):
        loads(json.dumps(data))
    data["progressive_mcp_catalog"] = 1
    data["tools"][0]["content_hash"] = "0" * 64  # a record from another build than the version says
    with pytest.raises(SpecError, match="do not match the version"):
        loads(json.dumps(data))


def test_the_alpha_vantage_catalog_round_trips_too() -> None:
    catalog = load_catalog()
    again = loads(dumps(catalog))
    assert again.version == catalog.version and again.tools == catalog.tools


# --- the real documents ----------------------------------------------------------------------------------------


needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real OpenAPI documents are not at {SHARED}")


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    return {name: load_catalog_with_report(path) for name, path in REAL.items()}


@pytest.mark.slow  # every operation of every real document
@needs_shared
def test_every_real_document_loads_and_every_operation_is_accounted_for(real: dict[str, Any]) -> None:
    lines = []
    for name, (catalog, report) in real.items():
        assert report.operations == REAL_OPERATIONS[name]
        assert report.tools == len(catalog) and report.filtered == 0
        lines.append(f"{name}: {report.operations} operations / {len(catalog)} tools / {len(report.skipped)} skipped")
        for skipped in report.skipped:
            lines.append(f"    skipped {skipped.operation}: {skipped.reason}")
        names = [t.name for t in catalog.tools]
        assert len(set(n.casefold() for n in names)) == len(names)
        assert all(TOOL_NAME.match(n) for n in names)
        assert all(len(t.summary) <= 120 for t in catalog.tools)
    print("\n" + "\n".join(lines))
    counts = {name: (len(c), len(r.skipped)) for name, (c, r) in real.items()}
    # Every operation is a tool (file uploads too: their files are base64 arguments).
    assert counts == {"spotify": (97, 0), "slack": (174, 0), "openai": (288, 0), "digitalocean": (659, 0)}


@pytest.mark.slow  # every operation of every real document
@needs_shared
@pytest.mark.slow  # checks every schema of four big documents: ~2 minutes on a busy 2-core machine
@pytest.mark.timeout(900)
def test_real_schemas_are_valid_2020_12_and_compile(real: dict[str, Any]) -> None:
    for catalog, _ in real.values():
        for tool in catalog.tools:
            for schema in (tool.input_schema, tool.output_schema):
                if schema is not None:
                    jsonschema.Draft202012Validator.check_schema(_thaw(schema))
                    jsonschema_rs.Draft202012Validator(_thaw(schema))


@needs_shared
def test_real_documents_auth_and_servers(real: dict[str, Any]) -> None:
    apis = {name: catalog.api for name, (catalog, _) in real.items()}
    assert apis["digitalocean"].base_url == "https://api.digitalocean.com"
    assert apis["spotify"].base_url == "https://api.spotify.com/v1"
    assert apis["slack"].base_url == "https://slack.com/api"
    assert all(api.auth is not None and api.auth.scheme == "bearer" for api in apis.values())
    slack = real["slack"][0]
    # Slack's `token` parameter carries the credentials: never an argument.
    assert not any(p.upstream_name == "token" for t in slack.tools for p in t.params)
    post = slack.get("chat_postMessage")
    assert post.method == "POST" and post.operation.body_type == "application/x-www-form-urlencoded"


@needs_shared
def test_digitalocean_names_categories_and_droplet_status(real: dict[str, Any]) -> None:
    catalog = real["digitalocean"][0]
    droplets = catalog.get("droplets_list")
    assert droplets.category == "droplets" and droplets.operation.path == "/v2/droplets"
    status = _thaw(droplets.output_schema)["properties"]["droplets"]["items"]["properties"]["status"]
    assert status["enum"] == ["new", "active", "off", "archive"]
    assert {"per_page", "page", "tag_name"} <= set(schema_of(catalog, "droplets_list")["properties"])


@needs_shared
def test_digitalocean_compiles_and_reloads_identically(real: dict[str, Any], tmp_path: Path) -> None:
    catalog = real["digitalocean"][0]
    again = loads(dumps(catalog))
    assert again.version == catalog.version and len(again) == len(catalog)


def test_no_real_document_is_copied_into_the_project() -> None:
    root = Path(__file__).resolve().parents[1]
    titles = ("DigitalOcean API", "Spotify Web API", "OpenAI API", "Slack Web API")
    for path in (root / "tests" / "fixtures" / "openapi").rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not any(t in text for t in titles), path


@pytest.mark.slow
def test_spec_check_and_compile_from_the_command_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "progressive_mcp.cli", *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    check = cli("spec", "check", str(TASKS))
    assert check.returncode == 0, check.stderr
    assert "OpenAPI 3.0.3, 10 operations → 9 tools, 1 skipped in 3 categories" in check.stdout
    assert "skipped GET /tasks/{task_id}/watchers (watchers_list): $ref" in check.stdout
    # The fixture $refs a tag description and an operation, as DigitalOcean's document does; OpenAPI 3.0 allows
    # neither, so the full validator objects (a warning with --validate, a failure with --strict).
    strict = cli("spec", "check", "--strict", str(TASKS))
    assert strict.returncode == 1
    assert (
        'problem (openapi-spec-validator): #/tags/1/description: {"$ref":"descriptions.yaml#/tasks"}' in strict.stdout
    )
    assert cli("spec", "check", "--validate", str(TASKS)).returncode == 0
    compiled = tmp_path / "tasks.json"
    made = cli("spec", "compile", str(TASKS), "-o", str(compiled), "--include", "method:GET")
    assert made.returncode == 0, made.stderr
    assert "3 tools" in made.stderr
    assert json.loads(compiled.read_text())["progressive_mcp_catalog"] == 2
    again = cli("spec", "check", str(compiled))
    assert again.returncode == 0 and "OK: 3 tools in 2 categories" in again.stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text("openapi: 3.0.0\ninfo: {title: T, version: '1'}\npaths: {}\n")
    failed = cli("spec", "check", str(broken))
    assert failed.returncode == 1 and "#/paths: the document has no operations" in failed.stderr


def test_the_garbage_collector_runs_again_after_a_load_as_it_did_before(tmp_path: Path) -> None:
    """The load pauses the cyclic collector (it only finds live objects there); it is running after the load,
    failed or not, and one the caller had paused stays paused."""
    import gc

    assert gc.isenabled()
    load_openapi(write(tmp_path, one_operation()))
    assert gc.isenabled()
    with pytest.raises(SpecError):
        load_openapi(write(tmp_path, {"openapi": "3.0.0", "info": {}, "paths": {}}, "empty.json"))
    assert gc.isenabled()
    gc.disable()
    try:
        load_openapi(write(tmp_path, one_operation()))
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [1, 2.5, null, true, off, 2020-01-01, '', ~]\nc: {d: [{e: f}]}\n",
        "<<: {a: 1}\nb: 2\n",  # a merge key
        "=: 3\n",  # a value key
        "200: {x: !!binary aGk=}\n'201': y\n",
        "a: !!set {x, y}\nb: !!omap [x: 1]\n",
        "a: 1\na: 2\n",
        "- !!str 1\n- !!int '2'\n",
        "? [1]\n: 2\n",  # an unhashable key
        "a: &x [1, 2]\nb: *x\n",
    ],
)
def test_yaml_is_read_as_pyyaml_reads_it(text: str) -> None:
    """The loader builds a file without anchors in one pass of its own: the same data (and errors) as PyYAML's
    constructor."""
    from progressive_mcp.sources.openapi_documents import Yaml12Loader as _Yaml12Loader

    class PyYamlBuilt(_Yaml12Loader):
        def construct_document(self, node: yaml.Node) -> Any:
            return yaml.constructor.SafeConstructor.construct_document(self, node)

    def read(loader: type) -> Any:
        try:
            return yaml.load(text, Loader=loader)
        except yaml.YAMLError as exc:
            return str(exc)

    ours, theirs = read(_Yaml12Loader), read(PyYamlBuilt)
    assert ours == theirs and repr(ours) == repr(theirs)


def test_operations_sharing_an_answer_schema_each_get_it_whole_and_their_own_example(tmp_path: Path) -> None:
    """An answer schema is converted once per place (and $ref): each operation still gets its own top object
    (its example), the same schema as alone, and what the conversion cut counts at every use."""

    def answer(example: dict[str, Any] | None) -> dict[str, Any]:
        media = {"schema": {"$ref": "#/components/schemas/Node"}} | ({"example": example} if example else {})
        return {"200": {"description": "ok", "content": {"application/json": media}}}

    node = {"type": "object", "properties": {"id": {"type": "string"}, "children": {"type": "array", "items": {
        "$ref": "#/components/schemas/Node"}}, "kind": {"type": "integer", "enum": ["1", "2"]}}}  # fmt: skip
    document = {
        "openapi": "3.0.0",
        "info": {"title": "T", "version": "1"},
        "paths": {
            "/a": {"get": {"operationId": "a", "responses": answer({"id": "a"})}},
            "/b": {"get": {"operationId": "b", "responses": answer({"id": "b"})}},
            "/c": {"get": {"operationId": "c", "responses": answer(None)}},
        },
        "components": {"schemas": {"Node": node}},
    }
    catalog, report = load_catalog_with_report(write(tmp_path, document))
    a, b = (_thaw(catalog.get(name).output_schema) for name in ("a", "b"))
    assert a.pop("examples") == [{"id": "a"}] and b.pop("examples") == [{"id": "b"}]
    assert a == b == _thaw(catalog.get("c").output_schema)
    assert a["properties"]["children"]["items"]["description"] == "A Node (recursive; not expanded further)."
    assert a["properties"]["kind"]["enum"] == [1, 2]
    only_b = {**document, "paths": {"/b": document["paths"]["/b"]}}
    alone, _ = load_catalog_with_report(write(tmp_path, only_b, "b.json"))
    assert _thaw(alone.get("b").output_schema) == {**b, "examples": [{"id": "b"}]}
    assert "3 schema parts cut" in " ".join(report.notes)
    assert sum("is integer: enum" in note for note in report.notes) == 1  # one note per place, naming the first use
