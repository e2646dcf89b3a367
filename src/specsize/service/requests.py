"""HTTP bodies -> a validated `Request`, and the OpenAPI schema of those bodies, both derived from the one
field table (`inputs.request`): no field is declared here.

A body is a JSON object of request fields (the names of a deployment file, flattened: `concurrency`, not
`workload.concurrency`), optionally with `deployment_yaml`, the text of a deployment file, as the base layer
(file < fields, as on the command line). Over HTTP the server must not become a file reader or a fetcher for
its callers, so fields that name files on the server (samples, traces, the calibration store path) are refused,
and target/draft must be catalog ids (`GET /api/v1/models`) or published variants of them read from their names
(catalog.variants), not paths or hub ids.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal, Optional, Union

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, StringConstraints,
                      create_model)

from ..core.errors import SpecError
from ..inputs.candidates import candidate_fields
from ..inputs.request import FIELDS, Request, fields, info

SERVER_SIDE = tuple(name for name in FIELDS if info(name).kind == "path")  # samples_file, store, trace, ...
LENGTHS = tuple(name for name in FIELDS if info(name).kind == "lengths")  # "@FILE" reads samples from a file
CATALOG_ONLY = ("target", "draft")
ROUTE_OF = {"simulation": "simulate", "speedup": "speedup", "analysis": "plan"}  # where a group's fields are read
EXTRA = "deployment_yaml"

# strict JSON types: a boolean is not a number nor a number a boolean (lax parsing had planned "acceptance_rate": true
# at 1.0 and "tp": true as 1, which the CLI and the library refuse); a number is an int or a float either way (8.0 is
# a count as the library reads it; the field table refuses 8.5)
_NUMBER = Union[StrictInt, StrictFloat]
_JSON_TYPES: dict[str, Any] = {
    "int": _NUMBER, "float": _NUMBER, "bool": StrictBool, "str": StrictStr, "mapping": dict,
    "lengths": Union[dict, StrictStr, list[_NUMBER]], "int_list": Union[list[_NUMBER], StrictStr],
    "str_list": list[StrictStr],
}


# the longest text a request field takes over HTTP: free text a few KB, ids, names and tags 200 characters (a
# 900 KB note or tag had been stored, and echoed back in full by every error that quoted it)
TEXT_LIMIT, LONG_TEXT_LIMIT = 200, 4096
LONG_TEXT = ("description", "acceptance_source")


def text(limit: int = TEXT_LIMIT) -> Any:
    """A JSON string of at most `limit` characters."""
    return Annotated[StrictStr, StringConstraints(max_length=limit)]


def _annotation(name: str) -> Any:
    fi = info(name)
    if fi.kind == "choice":
        assert fi.choices
        return Literal[fi.choices]  # type: ignore[valid-type]
    if name == "num_speculative_tokens":
        return _NUMBER
    if fi.kind == "str":
        return text(LONG_TEXT_LIMIT if name in LONG_TEXT else TEXT_LIMIT)
    return _JSON_TYPES[fi.kind]


def _field(name: str) -> tuple[Any, Any]:
    fi = info(name)
    extra: dict[str, Any] = {}
    if fi.minimum is not None:
        extra["exclusiveMinimum" if fi.exclusive_minimum else "minimum"] = fi.minimum
    if fi.maximum is not None:
        extra["exclusiveMaximum" if fi.exclusive_maximum else "maximum"] = fi.maximum
    if fi.unit:
        extra["x-unit"] = fi.unit
    doc = fi.doc + (f" Default: {fi.default_doc}." if fi.default_doc else "")
    return Optional[_annotation(name)], Field(None, description=doc, json_schema_extra=extra or None)


def request_model() -> type[BaseModel]:
    """The pydantic model of a request body: documentation (OpenAPI) and JSON types; the field table's own
    reader then validates every value, so the API and the CLI refuse the same inputs with the same words."""
    spec = {f.name: _field(f.name) for f in fields() if f.name not in SERVER_SIDE}
    spec[EXTRA] = (Optional[str], Field(None, description="The text of a deployment file (YAML) as the base "
                                        "layer; the other fields override it."))
    return create_model("PlanRequest", __config__=ConfigDict(extra="forbid"), **spec)  # type: ignore[call-overload]


def refuse_server_files(node: object, field: Callable[[tuple[str, ...]], str] = lambda path: path[-1],
                        path: tuple[str, ...] = ()) -> None:
    """A body, deployment file or search spec that would make the server read a file for its caller (and tell the
    caller which files exist), refused wherever it says so: a file field (SERVER_SIDE: samples_file, trace, ...) or
    lengths given as "@FILE" (LENGTHS). `field` names the error's field from the keys' path (default: the last)."""
    if isinstance(node, list):
        for index, value in enumerate(node):
            refuse_server_files(value, field, (*path, str(index)))
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = (*path, str(key))
        if key in SERVER_SIDE:
            raise SpecError(field(here), "names a file on the server, which the service does not read for callers",
                            "lengths given inline (prompt_tokens, output_tokens)")
        if key in LENGTHS and isinstance(value, str) and value.strip().startswith("@"):
            raise SpecError(field(here), "@FILE names a file on the server, which the service does not read for "
                            "callers", "lengths given inline: p50=N,p99=N, a list of samples, or a mapping")
        refuse_server_files(value, field, here)


def search_spec_text(text: str) -> str:
    """A search spec sent over HTTP, refused where it would make the server read a file (refuse_server_files, at any
    depth). Its models are read by name only (the server process's SPECSIZE_MODELS_BY_NAME_ONLY), so a path among
    them names no file either."""
    from ..inputs.load import parse_yaml_mapping  # noqa: PLC0415

    refuse_server_files(parse_yaml_mapping(text, "the search spec", "spec"), lambda path: "spec." + ".".join(path))
    return text


def build(body: dict, catalog: frozenset[str] | None, store: str | None = None, command: str | None = None) -> Request:
    """A Request from a JSON body (already shaped by `request_model`); `catalog` None: already checked. `store`:
    the calibration store that `acceptance_from_store` reads (the service's own database on SQLite). `command`: the
    command the route runs (inputs.fields.COMMAND_FIELDS), whose unread fields the body may not set."""
    from ..inputs.fields import command_reads  # noqa: PLC0415
    from ..inputs.load import build_request, load_request, parse_yaml_mapping  # noqa: PLC0415

    values = {k: v for k, v in body.items() if v is not None}
    text = values.pop(EXTRA, None)
    for name in values:
        if name not in FIELDS:
            raise SpecError(name, "unknown field", "the fields of GET /api/v1/openapi.json (PlanRequest)")
        if command is not None and not command_reads(command, name, info(name).group):
            # as `specsize plan --rate 5` is refused: {"rate": 50} to /api/v1/plan had planned as if not sent
            where = ROUTE_OF.get(info(name).group)
            raise SpecError(name, f"is not read by POST /api/v1/{command} (`specsize {command}` has no such setting)",
                            f"the fields `specsize {command}` reads" + (f"; POST /api/v1/{where} reads this one"
                                                                        if where else ""))
    refuse_server_files(values)
    if text is None:
        request = load_request(**values)
    else:
        data = parse_yaml_mapping(text, "the deployment", "deployment_yaml")
        bad = first_bad_text(data)  # a YAML "\0" escape: refused as the body's own strings are, before any reader
        if bad is not None:
            raise BadText(bad, BAD_TEXT, "text without NUL characters or lone surrogates")
        refuse_server_files(data)
        request = build_request(data, values, "file", None, "the deployment")
    bad = first_bad_text(request.settings())  # a deployment file's "\x00" escape: the body's own strings are checked
    if bad is not None:
        raise BadText(bad, BAD_TEXT, "text without NUL characters or lone surrogates")
    models = [(name, getattr(request, name)) for name in CATALOG_ONLY]
    # a speedup candidate's draft is a model too (it would load a folder or a file on the server, or go to the hub)
    models += [("candidates", candidate_fields(text).get("draft")) for text in request.candidates]
    from ..api import published_variant  # noqa: PLC0415 - a variant is read from its name alone: no file, no hub

    for name, value in models:
        if catalog is not None and value is not None and value not in catalog \
                and published_variant(str(value)) not in catalog:
            raise SpecError(name, f"{value!r} is not a catalog model; the service reads no files or hubs",
                            "a model id from GET /api/v1/models, or a published variant of one (-FP8, -AWQ, ...)")
    if store is not None and request.acceptance_from_store:
        request = request.replace(store=store)
    return request


BAD_TEXT = "must be valid UTF-8 text without NUL characters"


def bad_text(value: str) -> bool:
    """A string no column stores and no response can carry: a lone surrogate ("\\ud800", which UTF-8 cannot encode) or a
    NUL (which PostgreSQL's text refuses)."""
    if "\x00" in value:
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class BadText(SpecError):
    """Text no column can keep (a NUL, a lone surrogate): 422 naming the field, as the body guard answers."""

    http_status = 422


def first_bad_text(node: object, path: tuple[str, ...] = ()) -> str | None:
    """The dotted path (keys and list indexes) of the first string in a parsed JSON value, key or value, that
    `bad_text` refuses; "body" for the value itself; None when there is none."""
    if isinstance(node, str):
        return ".".join(path) or "body" if bad_text(node) else None
    if isinstance(node, list):
        for index, item in enumerate(node):
            found = first_bad_text(item, (*path, str(index)))
            if found:
                return found
    if isinstance(node, dict):
        for key, item in node.items():
            here = (*path, key if not bad_text(str(key)) else "(a key)")
            if bad_text(str(key)):
                return ".".join(here)
            found = first_bad_text(item, here)
            if found:
                return found
    return None
