"""A file loaded again in the same process is not parsed again while every file its load read is unchanged
(progressive_mcp/sources/loaded.py); an edit to any of them, however quick, gives a fresh load."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from progressive_mcp.sources import default_spec_path, load_catalog, load_catalog_with_report
from progressive_mcp.sources.compiled import dumps

FIXTURES = Path(__file__).parent / "fixtures"


def _rewrite_keeping_stat(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` (same length) and put the file's times back, as a rewrite within one clock tick
    would leave them: only the content tells the change."""
    assert len(old) == len(new)
    stat = path.stat()
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size


def test_the_bundled_spec_is_parsed_once_per_process() -> None:
    assert load_catalog() is load_catalog()
    assert load_catalog(default_spec_path()) is load_catalog()


def test_a_spec_rewritten_in_place_is_loaded_anew(tmp_path: Path) -> None:
    spec = tmp_path / "lastfm.yaml"
    shutil.copy(FIXTURES / "lastfm" / "lastfm.yaml", spec)
    first = load_catalog(spec)
    assert load_catalog(spec) is first
    _rewrite_keeping_stat(spec, "title: Last.fm", "title: Last.FM")
    second = load_catalog(spec)
    assert second is not first
    assert (first.api.title, second.api.title) == ("Last.fm", "Last.FM")


def test_an_edited_vocabulary_file_is_loaded_anew(tmp_path: Path) -> None:
    """The bundled spec names its vocabulary file: a change there alone is a change of the catalog."""
    spec_dir = default_spec_path().parent
    for name in ("alphavantage.yaml", "alphavantage.vocabulary.yaml"):
        shutil.copy(spec_dir / name, tmp_path / name)
    first = load_catalog(tmp_path / "alphavantage.yaml")
    assert load_catalog(tmp_path / "alphavantage.yaml") is first
    vocabulary = tmp_path / "alphavantage.vocabulary.yaml"
    vocabulary.write_text(vocabulary.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert load_catalog(tmp_path / "alphavantage.yaml") is not first


def test_an_edited_ref_file_of_a_multi_file_document_is_loaded_anew(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "openapi" / "tasks", tmp_path / "tasks")
    document = tmp_path / "tasks" / "openapi.yaml"
    first = load_catalog(document)
    assert load_catalog(document) is first
    _rewrite_keeping_stat(tmp_path / "tasks" / "schemas" / "project.yaml", "The project's name.", "The project's NAME.")
    second = load_catalog(document)
    assert second is not first
    assert "The project's NAME." in json.dumps([dict(t.definition()) for t in second.tools], default=str)


def test_filters_and_vocabulary_are_part_of_the_key(tmp_path: Path) -> None:
    spec = FIXTURES / "lastfm" / "lastfm.yaml"
    whole = load_catalog(spec)
    artists = load_catalog(spec, include="tag:artist")
    assert artists is not whole and len(artists) < len(whole)
    # Terms given as any iterable (here a generator, read once) key the same load as the same terms in a list.
    assert load_catalog(spec, include=(t for t in ["tag:artist"])) is load_catalog(spec, include=["tag:artist"])
    vocabulary = default_spec_path().with_name("alphavantage.vocabulary.yaml")
    assert load_catalog(spec, vocabulary=vocabulary) is not whole


def test_a_report_is_the_callers_own() -> None:
    document = FIXTURES / "openapi" / "tasks" / "openapi.yaml"
    _, report = load_catalog_with_report(document)
    assert report is not None
    report.notes.append("changed by a caller")
    _, again = load_catalog_with_report(document)
    assert again is not None and "changed by a caller" not in again.notes


def test_a_compiled_catalog_is_read_each_time(tmp_path: Path) -> None:
    """A compiled catalog is quick to read, and each read offers its stored vectors to the process's cache."""
    compiled = tmp_path / "catalog.json"
    compiled.write_text(dumps(load_catalog(FIXTURES / "lastfm" / "lastfm.yaml")), encoding="utf-8")
    assert load_catalog(compiled) is not load_catalog(compiled)


def test_a_failed_load_is_not_kept(tmp_path: Path) -> None:
    from progressive_mcp.errors import SpecError

    spec = tmp_path / "spec.yaml"
    spec.write_text("api: [", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(SpecError):
            load_catalog(spec)
    shutil.copy(FIXTURES / "lastfm" / "lastfm.yaml", spec)
    assert load_catalog(spec).api.title == "Last.fm"


def test_the_oldest_load_makes_room() -> None:
    from progressive_mcp.sources.loaded import LoadedCatalogs, note_read, recording

    spec = FIXTURES / "lastfm" / "lastfm.yaml"
    catalog = load_catalog(spec)
    with recording() as reads:
        note_read(spec, spec.read_text(encoding="utf-8"))
    loaded = LoadedCatalogs(size=2)
    for key in ("a", "b", "c"):
        loaded.put(key, catalog, None, reads)
    assert loaded.get("a") is None
    assert loaded.get("c") == (catalog, None)
    # A file whose content no longer matches what the load read is a miss, and its entry is dropped.
    loaded.put("stale", catalog, None, {spec.resolve(): "another digest"})
    assert loaded.get("stale") is None
    assert loaded.get("c") == (catalog, None)  # "b", the oldest, made room for it
