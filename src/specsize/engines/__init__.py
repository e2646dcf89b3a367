"""Engine accounting profiles (vLLM versions; SGLang slots in as another module), readers and emitters."""

from .registry import DEFAULT_ENGINE, ENGINES, resolve_profile

__all__ = ["DEFAULT_ENGINE", "ENGINES", "resolve_profile"]
