"""Command-line shell: parse, call the library, render."""
