"""Diagnostics worth reading (issue 19, item 7): a rule conflict shows the other half where it is written (where
`backend: sglang` is, for G2-BACKEND) as a secondary label, and every rule's diagnostic names its spec section.

The text of every labelled diagnostic of the negative corpus is pinned with a syrupy snapshot
(tests/__snapshots__/test_rule_labels/); its JSON is in the corpus's own snapshots."""
from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from kvreplay.compiler.pipeline import compile_file
from kvreplay.compiler.rules import all_rules
from kvreplay.report import format_diagnostic, text_report

from .support import compile_yaml
from .test_negative_corpus import NEGATIVE_DIR, REPO_ROOT

RELATED = {rule.id for rule in all_rules() if rule.related}
LABELLED = sorted(p for p in NEGATIVE_DIR.iterdir() if p.stem in RELATED and p.suffix == ".yaml")
CONFLICT = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  backend: sglang
  workers:
    aggregated:
      kv_cache:
        host_offload: {num_host_blocks: 8}
traffic: {source: {type: synthetic}, stop: {requests: 1}, load: {type: concurrency}}
"""


class _Text(SingleFileSnapshotExtension):
    file_extension = "txt"
    _write_mode = WriteMode.TEXT

    def serialize(self, data, **kwargs) -> str:
        return data


def _position(text: str, needle: str) -> tuple[int, int]:
    """(line, column) of the first `needle` in `text`, 1-based."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(needle)


def test_g2_backend_labels_where_the_backend_is_written(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(CONFLICT)
    (d,) = compile_file(config).diagnostics
    assert d.code == "G2-BACKEND"
    assert (d.span.line, d.span.col) == _position(CONFLICT, "host_offload:")
    ((label, span),) = d.labels
    assert label == "`backend: sglang` is chosen here"
    assert (span.line, span.col) == _position(CONFLICT, "sglang")
    assert d.section == "kv-cache-tiers.md: Host offload (G2) / Supported"
    text = format_diagnostic(d)
    assert f"  note: `backend: sglang` is chosen here: {config}:{span.line}:{span.col}\n      backend: sglang\n" \
           f"{' ' * (3 + span.col)}^" in text
    assert text.endswith("  spec: kv-cache-tiers.md \N{SECTION SIGN} Host offload (G2) / Supported")


def test_the_other_half_from_a_set_option_is_labelled_at_the_option():
    (d,) = compile_yaml(CONFLICT.replace("  backend: sglang\n", ""), ["engine.backend=trtllm"]).diagnostics
    ((label, span),) = d.labels
    assert label == "`backend: trtllm` is chosen here" and span.source == "--set #1"
    assert span.col == len("engine.backend=") + 1
    assert "  note: `backend: trtllm` is chosen here: --set #1:1:16\n" in format_diagnostic(d)


def test_a_default_other_half_has_no_label():
    """G2-PREFIX-CACHING with prefix caching off by the user is labelled; the default is on, so no rule fires
    without it; GROUPS-BACKEND on the default backend (vLLM) cannot fire either: a label needs a written value."""
    text = CONFLICT.replace("backend: sglang", "backend: vllm").replace(
        "      kv_cache:\n", "      kv_cache:\n        prefix_caching: false\n")
    (d,) = compile_yaml(text).diagnostics
    assert d.code == "G2-PREFIX-CACHING"
    ((label, span),) = d.labels
    assert label == "prefix caching is turned off here" and (span.line, span.col) == _position(text, "false")
    tensor = compile_yaml(CONFLICT.replace("  backend: sglang\n", "")).diagnostics
    assert tensor == ()


def test_every_rule_diagnostic_names_its_section_and_nothing_else_does():
    for path in [*sorted(NEGATIVE_DIR.glob("*.yaml")), *sorted(NEGATIVE_DIR.glob("*.json"))]:
        rules = {rule.id: rule.section for rule in all_rules()}
        for d in compile_file(path).diagnostics:
            assert d.section == rules.get(d.code, ""), (path.name, d.code)


# their files leave the other half at its default (scope dp_rank_local, prefix caching on): nothing to point at
OTHER_HALF_DEFAULT = {"G2-SHARED-H2D-SCOPE", "GROUPS-PREFIX-CACHING"}


def test_labelled_rules_have_corpus_files():
    assert {p.stem for p in LABELLED} == RELATED


@pytest.mark.parametrize("path", LABELLED, ids=lambda p: p.name)
def test_labelled_diagnostic_text(path: Path, snapshot):
    text = text_report([compile_file(path)]).replace(f"{REPO_ROOT}/", "")
    assert ("  note: " in text) is (path.stem not in OTHER_HALF_DEFAULT) and "  spec: " in text
    assert text == snapshot.use_extension(_Text)


def test_the_readme_shows_the_diagnostic_as_it_is_printed(tmp_path, monkeypatch):
    readme = (REPO_ROOT / "README.md").read_text()
    shown = readme.split("A diagnostic looks like this:\n\n```\n", 1)[1].split("\n```", 1)[0]
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text(CONFLICT)
    (d,) = compile_file("bad.yaml").diagnostics
    assert format_diagnostic(d) == shown
