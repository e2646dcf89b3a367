"""`specsize serve`: the HTTP API and web UI over `specsize.api` (FastAPI, SQLAlchemy, argon2: the `service`
extra). Nothing here is imported by the CLI until `serve` or `users` runs."""
