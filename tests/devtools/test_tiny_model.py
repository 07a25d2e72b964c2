"""``devtools.tiny_model`` without torch: its command line (checked arguments handed to ``build``), and the
tokenizer corpus and chat template it writes. ``build`` itself needs torch/transformers (the vLLM venv);
the live tests exercise it through ``generate_tiny_model``."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.devtools import tiny_model


def test_main_hands_the_parsed_arguments_to_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[Path, int, int]] = []
    monkeypatch.setattr(tiny_model, "build", lambda out_dir, layers, seed: calls.append((out_dir, layers, seed)))
    assert tiny_model.main([str(tmp_path / "m")]) == 0
    assert tiny_model.main([str(tmp_path / "n"), "--layers", "8", "--seed", "3"]) == 0
    assert calls == [(tmp_path / "m", 4, 0), (tmp_path / "n", 8, 3)]


@pytest.mark.parametrize("argv", [["out", "--layers", "0"], ["out", "--layers", "two"], []])
def test_bad_arguments_exit_with_usage(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tiny_model, "build", lambda *args: pytest.fail("build must not run"))
    with pytest.raises(SystemExit) as exit_info:
        tiny_model.main(argv)
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_the_corpus_covers_what_prompts_contain() -> None:
    text = " ".join(tiny_model._CORPUS)
    for needed in ("SELECT", "0 1 2 3 4 5 6 7 8 9", "{ }", "assistant", "deadline"):
        assert needed in text


def test_the_chat_template_renders_roles_and_the_generation_prompt() -> None:
    template = tiny_model._CHAT_TEMPLATE
    assert "{% for message in messages %}" in template and "{% endfor %}" in template
    assert "message['role']" in template and "message['content']" in template
    assert "{% if add_generation_prompt %}<s>assistant: {% endif %}" in template
    assert template.count("{%") == template.count("%}")
