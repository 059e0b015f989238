"""The README's table of supported operators is generated from the converter table: it
lists every operator, and nothing else."""

from __future__ import annotations

from dlvm.onnx import CONVERTERS
from dlvm.onnx.coverage import README, rendered


def test_the_readme_lists_the_supported_operators() -> None:
    text = README.read_text(encoding="utf-8")
    assert text == rendered(text), "run `python -m dlvm.onnx.coverage` to regenerate it"
    for op in CONVERTERS:
        assert f"| `{op}` |" in text
