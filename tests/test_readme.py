"""The README's Tour runs as written, in order, from the repository root (issue 19, item 8)."""
from __future__ import annotations

import re
import shlex
import shutil

from kvreplay.cli import main

from .support import ROOT


def tour_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("## Tour"):]
    block = block[block.index("```bash\n") + len("```bash\n"):block.index("```", block.index("```bash\n") + 7)]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def test_the_tour_runs_in_order(tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    commands = tour_commands()
    assert len(commands) >= 8
    for command in commands:
        words = shlex.split(command)
        redirect = None
        if ">" in words:
            at = words.index(">")
            words, redirect = words[:at], words[at + 1]
        assert words[0] == "kvreplay"
        files = [str(p.relative_to(tmp_path)) for p in sorted((tmp_path / "examples").glob("*.yaml"))]
        words = [w for word in words[1:] for w in (files if word == "examples/*.yaml" else [word])]
        assert main(words) == 0, command
        out = capsys.readouterr().out
        if redirect:
            (tmp_path / redirect).write_text(out)
    assert (tmp_path / "kvreplay-output" / "requests.jsonl").exists() and (tmp_path / "out" / "replay").is_dir()
    assert (tmp_path / "plan.json").exists() and (tmp_path / "predict.schema.json").stat().st_size > 1000


def test_every_option_and_argument_has_help():
    """(Issue 19, item 8) `kvreplay COMMAND --help` explains every option and argument."""
    import argparse

    from kvreplay.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    missing = [f"{name} {action.option_strings or action.dest}" for name, command in commands.items()
               for action in command._actions if not action.help and not isinstance(action, argparse._HelpAction)]
    assert missing == []


def test_every_option_is_in_the_readme_and_there_are_two_set_up_commands():
    """(Issue 19, item 8) the options table names every option of every command, and `--version`."""
    from kvreplay.cli import build_parser

    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("### Commands and options"):readme.index("### Tiers, routing")]
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    options = {o for command in commands.values() for a in command._actions for o in a.option_strings} - {"-h",
                                                                                                           "--help"}
    assert sorted(o for o in options if f"`{o}" not in table and f", `{o}" not in table) == []
    assert "`kvreplay --version`" in table and "`1e9`" in table
    set_up = readme[readme.index("## Set up"):readme.index("## Tour")]
    assert set_up.count("```bash\n") == 2 and len([line for line in set_up.splitlines() if line.startswith("pip ")]) == 2


def _bash_blocks(text: str) -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [[re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()] for block in blocks]


def test_every_other_readme_command_runs_as_written(tmp_path, monkeypatch, capsys):
    """(Issue 19, item 8) the opal, agentic and other-tool commands after the Tour, in order, as a newcomer
    types them into a fresh folder beside the examples; each exits 0."""
    readme = (ROOT / "README.md").read_text()
    after_tour = readme[readme.index("### Commands and options"):]
    commands = [line for block in _bash_blocks(after_tour) for line in block]
    assert len(commands) >= 10
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "kvreplay" and ">" not in words, command
        assert main(words[1:]) == 0, command
        capsys.readouterr()
    assert len(list((tmp_path / "simulation-runs").iterdir())) == 1  # opal's own output folder, as the README says
    assert (tmp_path / "back.yaml").exists() and (tmp_path / "out" / "tiers" / "requests.jsonl").exists()


def test_version_and_defaults_as_the_readme_says(capsys):
    """`kvreplay --version` prints the version; every option that takes a value says its default or that it is
    required (a flag's default is off)."""
    import argparse

    import pytest

    from kvreplay import __version__
    from kvreplay.cli import build_parser

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"kvreplay {__version__}\n"
    commands = build_parser()._subparsers._group_actions[0].choices
    silent = [f"{name} {'/'.join(action.option_strings)}" for name, command in commands.items()
              for action in command._actions
              if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._StoreTrueAction,
                                                                   argparse._AppendAction))
              and "default" not in action.help and "required" not in action.help]
    assert silent == []
