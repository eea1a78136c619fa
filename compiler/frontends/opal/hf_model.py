"""Find and read the Hugging Face `config.json` an opal config names, and derive opal's model numbers from it.

The model is `<config_dir>/<name>/config.json`, relative to the config file's folder, else to the working
directory (an absolute `config_dir` is taken as it is).  The file is read bounded (`read_bounded`) and must
be a JSON object with the fields `formulas` needs.  The result is one plain record: opal's numbers
(`params`, `bytes_per_param`, `kv_bytes_per_token`, `model_bytes`, `max_position_embeddings`) and the
inline model record of the canonical Spec (`catalog_record`), or `problem` saying what went wrong.
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath

import orjson

from ...load import MAX_BYTES, read_bounded
from .formulas import (bytes_per_param, dtype_name, head_dim, kv_bytes_per_element, kv_bytes_per_token, kv_heads,
                       missing_fields, mla, model_bytes, params)

# the predict schema's inline model takes these weight dtypes; fp16 has bf16's width, which is all the roofline reads
WEIGHT_DTYPES = {0.5: "fp4", 1.0: "fp8", 2.0: "bfloat16"}
KV_DTYPES = {1.0: "fp8", 2.0: "bfloat16"}


def written_path(config_dir: str, name: str) -> str:
    """The path as the config spells it: `<config_dir>/<name>/config.json`."""
    return str(PurePosixPath(config_dir) / name / "config.json")


def locate(config_dir: str, name: str, base_dir: Path) -> tuple[Path | None, list[Path]]:
    """(the config.json found, or None; every path tried, in order)."""
    relative = Path(config_dir) / name / "config.json"
    tried = [relative] if relative.is_absolute() else [base_dir / relative, Path.cwd() / relative]
    tried = list(dict.fromkeys(p.resolve() if p.is_absolute() else p for p in tried))
    return next((p for p in tried if p.is_file()), None), tried


def _shown(path: Path) -> str:
    """A path tried, relative to the working directory when it is under it (as a user would type it)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read(config_dir: str, name: str, base_dir: Path) -> dict:
    """The model record (see the module docstring); `problem` set when there is no usable config.json."""
    shown = written_path(config_dir, name)
    found, tried = locate(config_dir, name, base_dir)
    if found is None:
        return {"problem": f"no model config `{shown}` (tried " + ", ".join(map(_shown, tried)) + ")",
                "config": shown}
    try:
        data = read_bounded(found, MAX_BYTES)
        config = orjson.loads(data) if len(data) <= MAX_BYTES else None
    except (OSError, orjson.JSONDecodeError) as error:
        return {"problem": f"cannot read the model config `{shown}`: {getattr(error, 'strerror', None) or error}",
                "config": shown}
    if not isinstance(config, dict):
        return {"problem": f"the model config `{shown}` is not a JSON object", "config": shown}
    missing = missing_fields(config)
    if missing:
        return {"problem": f"the model config `{shown}` lacks " + ", ".join(f"`{m}`" for m in missing)
                + " (positive integers)", "config": shown}
    return facts(config, shown)


def facts(config: dict, shown: str) -> dict:
    """opal's numbers and the inline catalog record of a checked Hugging Face config."""
    per_param = bytes_per_param(config)
    kv_width = float(kv_bytes_per_element(config))
    max_position = config.get("max_position_embeddings")
    return {
        "config": shown, "params": params(config), "bytes_per_param": float(per_param),
        "kv_bytes_per_token": kv_bytes_per_token(config), "model_bytes": model_bytes(config),
        "max_position_embeddings": max_position if isinstance(max_position, int) and max_position > 0 else None,
        "dtype": dtype_name(config), "catalog_record": catalog_record(config, shown, float(per_param), kv_width),
    }


def catalog_record(config: dict, shown: str, per_param: float, kv_width: float) -> dict:
    """The canonical Spec's inline `engine.model` (predict schema `$defs/model`), for the roofline timing."""
    record = {
        "name": PurePosixPath(shown).parent.name or "model", "num_layers": config["num_hidden_layers"],
        "hidden_size": config["hidden_size"], "num_attention_heads": config["num_attention_heads"],
        "num_kv_heads": kv_heads(config), "head_dim": head_dim(config),
        "intermediate_size": config["intermediate_size"], "vocab_size": config["vocab_size"],
        "params": params(config), "tie_word_embeddings": bool(config.get("tie_word_embeddings")),
        "weight_dtype": WEIGHT_DTYPES.get(per_param, "bfloat16"),
        # the roofline prices KV by its width; a width it has no dtype for (fp4 KV) counts as fp8
        "kv_dtype": KV_DTYPES.get(kv_width, "fp8" if kv_width < 1 else "bfloat16"),
    }
    if isinstance(config.get("max_position_embeddings"), int) and config["max_position_embeddings"] > 0:
        record["max_context"] = min(config["max_position_embeddings"], 2 ** 31 - 1)
    if mla(config):
        record.update(attention="mla", kv_lora_rank=config["kv_lora_rank"],
                      qk_rope_head_dim=config["qk_rope_head_dim"])
    return record
