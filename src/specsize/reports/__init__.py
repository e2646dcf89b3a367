"""Renderers: text (rich), JSON, Markdown. They format result objects; they compute nothing."""
