"""kvreplay: compile LLM-serving KV-cache configurations into resolved plans (and replay them).

Public API::

    from kvreplay import compile_file, compile_bytes
    result = compile_file("examples/host-offload-prediction.yaml")
    result.ok, result.diagnostics, result.plan.canonical_json()
"""
from .compiler.pipeline import CompileResult, compile_bytes, compile_file

__all__ = ["CompileResult", "compile_bytes", "compile_file"]
__version__ = "0.1.0"
