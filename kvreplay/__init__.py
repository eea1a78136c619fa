"""kvreplay: compile LLM-serving KV-cache configurations into resolved plans (and replay them).

Public API::

    from kvreplay import compile_file, compile_bytes
    result = compile_file("examples/host-offload-prediction.yaml")
    result.ok, result.diagnostics, result.plan.canonical_json()
"""
from pathlib import Path as _Path

# In a source checkout the subpackages live in top-level folders (compiler/, runtime/, grammar/, schema/,
# examples/) that the installed distribution maps into `kvreplay.*`; let imports from the checkout find them too.
_ROOT = _Path(__file__).resolve().parent.parent
if (_ROOT / "compiler" / "pipeline.py").is_file() and str(_ROOT) not in __path__:
    __path__.append(str(_ROOT))

from .compiler.pipeline import CompileResult, compile_bytes, compile_file  # noqa: E402

__all__ = ["CompileResult", "compile_bytes", "compile_file"]
__version__ = "0.1.0"
