"""Experiment (issue 29, model): bench/_exp_rank_variants.py with another model file in place of the bundled one.

    .venv/bin/python bench/_exp_model.py model/work/model.onnx --variants minilm,shipped,conf-rel-0.5-1.5
    .venv/bin/python bench/_exp_model.py model/work/model.onnx --variants conf-rel-0.5-1.5 --catalogs OUT.json

The file must have the shipped model's graph (model/pack.py writes one): the embedder reads it in place of
progressive_mcp/search/models/minilm/model.onnx, so the tool documents, the int8 query graph and the fusion are the
engine's own.
Everything after the file is _exp_rank_variants.py's arguments: tuning sets by default, or `--catalogs OUT` for
`eval --catalogs --json --outcomes` (bench/paired_eval.py). Nothing is stored: vectors live in the process.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    if len(sys.argv) < 2 or not Path(sys.argv[1]).is_file():
        raise SystemExit("usage: bench/_exp_model.py MODEL.onnx [_exp_rank_variants.py arguments]")
    model = Path(sys.argv.pop(1)).resolve()
    from progressive_mcp.search import embedder

    embedder.MODEL = model  # what embedder.Embedder opens
    # The shipped everyday requests' vectors are the shipped model's: this model embeds its own (fusion.closeness).
    embedder.EVERYDAY = model.with_name(model.name + ".no-everyday.json")
    import _exp_rank_variants

    _exp_rank_variants.main()


if __name__ == "__main__":
    main()
