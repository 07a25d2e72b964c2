"""The docs test's own parts on small made-up pages: what it refuses, what it classifies how, and that its
checks fail on a drifted command, option, extra or config key."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from tests.docs.blocks import BlockError, blocks_of, classify, logical_lines, parse_annotation
from tests.docs.commands import check_pip, check_usage, cli_path, make_dry_run, parse_module_args, plan
from tests.docs.data_blocks import check_toml, check_yaml
from tests.docs.live import PageServer, documented_ports, needs_bash


def _one(markdown: str) -> str:
    (block,) = blocks_of("page.md", markdown)
    return classify(block)


def test_a_skip_needs_a_reason_and_an_annotation_a_known_kind() -> None:
    assert parse_annotation(" skip (needs a GPU) ", "x").argument == "needs a GPU"
    for body in ("skip", "skip ()", "skipped (why)", "file", "output now"):
        with pytest.raises(BlockError):
            parse_annotation(body, "page.md:L1")


def test_an_annotation_belongs_to_the_block_right_after_it() -> None:
    (block,) = blocks_of("page.md", "<!-- docs-test: output -->\n```\nwrote 3 files\n```\n")
    assert block.annotation is not None and block.annotation.kind == "output" and block.line == 2
    with pytest.raises(BlockError, match="without a block"):
        blocks_of("page.md", "<!-- docs-test: output -->\n\nprose, not a block\n")


def test_a_block_nobody_placed_fails_and_commands_are_recognised() -> None:
    with pytest.raises(BlockError, match="cannot tell"):
        _one("```\nsome listing\n  of things\n```\n")
    with pytest.raises(BlockError, match="cannot tell"):
        _one("```text\nslosched policies\n```\n")
    assert _one("```\nslosched policies   # all of them\nmake lint\n```\n") == "shell"
    assert _one("<!-- docs-test: usage -->\n```\nslosched sweep SCENARIO [--quick]\n```\n") == "usage"
    with pytest.raises(BlockError, match="for ```yaml"):
        _one("<!-- docs-test: gateway -->\n```bash\nslosched policies\n```\n")


def test_command_lines_join_continuations_and_drop_comments() -> None:
    (block,) = blocks_of("page.md", "```console\n$ slosched a \\\n   --b c\nprinted\n# note\n```\n")
    assert logical_lines(block) == ["slosched a --b c"]


def test_the_shell_is_used_only_for_what_needs_it() -> None:
    assert not needs_bash(["slosched hardware --hardware hw.yaml   # `a` $(b) | c"])
    assert not needs_bash(["pip install -e . && pip install 'scipy>=1.11'"])
    assert needs_bash(["curl -s localhost:8080/health"])
    assert needs_bash(['slosched relquery --table "$DB:omdb"'])
    assert needs_bash(["DB=x slosched policies"])
    assert needs_bash(["slosched policies | head"])


def test_steps_run_parse_or_shrink_and_a_renamed_option_fails() -> None:
    steps = plan(["slosched sweep examples/demo.yaml --quick", "slosched compare examples/demo.yaml", "make lint"])
    assert [step.treatment.split(" (")[0] for step in steps] == ["parse only", "run on 60 jobs", "make -n"]
    assert steps[1].argv[-2:] == ("--set", "workload.num_jobs=60")
    assert cli_path(["trace", "examples/demo.yaml", "--out", "x.jsonl"]) == ("trace", "dump")
    with pytest.raises(Exception, match="No such option"):
        plan(["slosched sweep examples/demo.yaml --quik"])
    with pytest.raises(Exception, match="No such command"):
        plan(["slosched simulat examples/demo.yaml"])
    with pytest.raises(BlockError, match="no treatment"):
        plan(["rm -rf build"])
    after_install = plan(["pip install -e examples/third_party_policy", "slosched policies"])
    assert after_install[1].treatment.startswith("parse only")


def test_usage_options_must_exist() -> None:
    assert check_usage("slosched native build [--force] [--json]") == ["--force", "--json"]
    with pytest.raises(AssertionError, match="--fast"):
        check_usage("slosched sweep SCENARIO [--fast]")
    with pytest.raises(AssertionError, match="no command"):
        check_usage("slosched native compile")


def test_pip_arguments_are_held_to_pyproject() -> None:
    check_pip(["-q", "slosched[picker,kube]", "-e", "examples/third_party_policy", "scipy>=1.11"])
    for arguments in (["slosched[gpu]"], ["scipy>=1.9"], ["left-pad"], ["-e", "examples"]):
        with pytest.raises(AssertionError):
            check_pip(arguments)


def test_make_targets_and_module_arguments_are_dry_run() -> None:
    assert make_dry_run(["demo"]) == [("native", "build"), ("demo",)]  # the recipes' slosched commands parse
    with pytest.raises(AssertionError, match="No rule"):
        make_dry_run(["no-such-target"])
    parse_module_args("slosched.perf.gpu_profile", ["--out", "x", "--device", "cuda"])
    with pytest.raises(AssertionError, match="exited 2"):
        parse_module_args("slosched.perf.gpu_profile", ["--out", "x", "--devices", "cuda"])


def test_yaml_blocks_are_checked_as_what_their_keys_say(tmp_path: Path) -> None:
    folder = tmp_path
    (ok,) = blocks_of("p.md", "```yaml\ntenants:\n  acme: {api_keys: [k1], priority: 0}\n```\n")
    assert check_yaml(ok, folder) == "gateway fragment"
    (typo,) = blocks_of("p.md", "```yaml\ntenants:\n  acme: {api_keys: [k1], priorty: 0}\n```\n")
    with pytest.raises(ConfigError, match="priorty"):
        check_yaml(typo, folder)
    (ambiguous,) = blocks_of("p.md", "```yaml\npolicies: {stack: slosched}\n```\n")
    with pytest.raises(BlockError, match="could be any of"):
        check_yaml(ambiguous, folder)
    (named,) = blocks_of("p.md", "<!-- docs-test: picker -->\n```yaml\npolicies: {stack: slosched}\n```\n")
    assert check_yaml(named, folder) == "picker"
    (unknown_policy,) = blocks_of("p.md", "```yaml\npolicies: [least-token+fcfs]\npolicy_params: {}\n```\n")
    with pytest.raises(ConfigError, match="least-token"):
        check_yaml(unknown_policy, folder)


def test_an_entry_point_group_slosched_does_not_load_fails() -> None:
    (block,) = blocks_of("p.md", '```toml\n[project.entry-points."slosched.policy"]\nx = "m"\n```\n')
    with pytest.raises(AssertionError, match=r"slosched\.policies"):
        check_toml(block)


def test_server_ports_move_everywhere_they_are_written() -> None:
    (server,) = blocks_of(
        "p.md", "<!-- docs-test: server -->\n```bash\nstub --port 8001 &\nslosched serve g.yaml\n```\n"
    )
    files = {"g.yaml": "port: 8080\nbackends: [{url: 'http://127.0.0.1:8001'}]\n", "other.yaml": "port: 9999\n"}
    assert documented_ports(server, files) == ["8001", "8080"]
    running = PageServer({"8001": "41001", "8080": "41080"})
    text = "curl -s localhost:8080/v1/models -d '{\"max_tokens\": 8080}'\nstub --port 8001"
    assert (
        running.substitute(text) == "curl -s localhost:41080/v1/models -d '{\"max_tokens\": 8080}'\nstub --port 41001"
    )
