"""Engine accounting profiles (vLLM versions; SGLang slots in as another module), readers and emitters."""

from .registry import ENGINES, resolve_profile

__all__ = ["ENGINES", "resolve_profile"]
