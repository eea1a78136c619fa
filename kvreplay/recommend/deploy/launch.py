"""One generated launch: the argument vector of one role, the files it reads, and how many copies to start.

Rendering is deterministic: shell words are quoted the POSIX way, JSON and YAML keys are sorted.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Launch:
    role: str
    argv: list[str]
    files: dict[str, str] = field(default_factory=dict)  # file name -> text, written beside the script
    replicas: int = 1

    def shell(self) -> str:
        """The command as one shell line, each option on its own continuation line."""
        words = [shlex.quote(word) for word in self.argv]
        lines, current = [], []
        for word in words:
            if word.startswith("--") and current:
                lines.append(" ".join(current))
                current = []
            current.append(word)
        lines.append(" ".join(current))
        return " \\\n  ".join(lines) + "\n"

    def record(self) -> dict:
        return {"role": self.role, "argv": self.argv, "files": self.files, "replicas": self.replicas}


def yaml_text(data: dict, indent: int = 0) -> str:
    """A small block-style YAML writer for nested mappings of scalars (keys sorted, so bytes are stable)."""
    out = []
    for key in sorted(data):
        value = data[key]
        pad = " " * indent
        if isinstance(value, dict):
            out.append(f"{pad}{key}:\n{yaml_text(value, indent + 2)}")
        else:
            out.append(f"{pad}{key}: {_scalar(value)}\n")
    return "".join(out)


def _scalar(value) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    text = str(value)
    return text if text.replace("_", "").replace("-", "").isalnum() else '"' + text.replace('"', '\\"') + '"'


def text(launches: list[Launch], engine: str) -> str:
    """What `kvreplay deploy` prints: per role a comment, its files, then its command."""
    parts = []
    for launch in launches:
        copies = f", {launch.replicas} replicas" if launch.replicas > 1 else ""
        parts.append(f"# {launch.role} ({engine}{copies})\n")
        for name in sorted(launch.files):
            parts.append(f"cat > {name} <<'EOF'\n{launch.files[name]}EOF\n")
        parts.append(launch.shell())
    return "".join(parts)
