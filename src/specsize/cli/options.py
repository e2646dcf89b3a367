"""Click options derived from the request's field table (specsize.inputs.request), and flags -> a Request.

No option here declares an input: each is generated from the field's declaration (flag, type, doc, unit,
default), so the CLI, the deployment file and the API take the same names and the same checks.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from ..inputs.fields import FieldInfo, flag_of
from ..inputs.request import FIELDS, info

# the -k flag takes a list for `speedup`, one value elsewhere; read as text and split by `request_from`
_TEXT_KINDS = ("str", "path", "lengths", "int_list")


def finite(name: str, value: float | None) -> float | None:
    """A float flag outside the field table (click's FloatRange), refused when NaN or infinite: FloatRange lets NaN
    through (every comparison with it is false), and `sweep --cell-timeout nan` had ended in an internal error."""
    import math  # noqa: PLC0415

    if value is not None and not math.isfinite(value):
        from ..core.errors import SpecError  # noqa: PLC0415

        raise SpecError(name, f"must be a finite number, got {value}", "a finite number in the flag's range")
    return value


def _help(name: str, fi: FieldInfo, default: Any) -> str:
    text = fi.doc
    if fi.unit:
        text += f" [{fi.unit}]"
    if fi.default_doc:
        text += f" [default: {fi.default_doc}]"
    elif default not in (None, (), False):
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        text += f" [default: {shown}]"
    return text


def option_for(name: str) -> Callable:
    fi = info(name)
    flag = flag_of(name, fi)
    assert flag is not None, name
    default = FIELDS[name].default
    names = [n for n in (fi.short, flag, *fi.aliases) if n]
    help_text = _help(name, fi, default)
    if fi.kind == "bool":
        negative = "--no-" + flag[2:]
        return click.option(f"{flag}/{negative}", name, default=None, help=help_text)
    if fi.kind == "str_list":
        return click.option(*names, name, multiple=True, help=help_text)
    if fi.kind == "choice":  # validated by the field table, so the error names the field like every other
        assert fi.choices
        return click.option(*names, name, type=str, metavar="[" + "|".join(fi.choices) + "]", help=help_text)
    if name == "num_speculative_tokens" or fi.kind in _TEXT_KINDS:
        return click.option(*names, name, type=str, help=help_text)
    # read by the field table (ASCII digits; its words and bounds), not by click's int() / float(), which take
    # "١٢" and "1_000"
    return click.option(*names, name, type=str, metavar={"int": "INTEGER", "float": "FLOAT"}[fi.kind], help=help_text)


def request_options(*groups: str, include: tuple[str, ...] = (), exclude: tuple[str, ...] = (),
                    file_argument: bool = True) -> Callable:
    """Options for every flagged field of `groups` (plus `include`, minus `exclude`), in declaration order."""
    names = [name for name, f in FIELDS.items()
             if (f.metadata["specsize"].group in groups or name in include) and name not in exclude
             and flag_of(name, f.metadata["specsize"]) is not None]

    def decorate(func: Callable) -> Callable:
        for name in reversed(names):
            func = option_for(name)(func)
        if file_argument:
            func = click.argument("deployment_file", required=False, type=click.Path(dir_okay=False))(func)
        return func

    return decorate


def command_options(command: str) -> Callable:
    """The options of `command`: the fields inputs.fields.COMMAND_FIELDS says it reads (the service's route for the
    command refuses the others by the same table)."""
    from ..inputs.fields import COMMAND_FIELDS  # noqa: PLC0415

    groups, include = COMMAND_FIELDS[command]
    return request_options(*groups, include=include)


def request_from(kw: dict, *, k_list: bool = False):
    """Pop the request fields out of a command's keyword arguments and load the request (file < flags)."""
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..inputs.load import load_request  # noqa: PLC0415

    path = kw.pop("deployment_file", None)
    overrides = {}
    for name in list(kw):
        if name in FIELDS:
            value = kw.pop(name)
            if value is not None and value != ():
                overrides[name] = value
    k = overrides.get("num_speculative_tokens")
    if k is not None and k_list:
        from ..inputs.fields import coerce  # noqa: PLC0415
        from ..inputs.request import info  # noqa: PLC0415

        try:  # the -k list checked under the flag's own name
            coerce("num_speculative_tokens", info("speedup_ks"), k)
        except SpecError as err:
            raise SpecError("num_speculative_tokens", err.problem, err.accepted) from None
    if k is not None and "," in str(k):
        if not k_list:
            raise SpecError("num_speculative_tokens", f"this command takes one k, got {k!r}", "a single integer")
        overrides["speedup_ks"] = k
        overrides["num_speculative_tokens"] = str(k).split(",")[0]
    elif k is not None and k_list:
        overrides["speedup_ks"] = k
    from ..inputs.load import MODEL_FIELDS, PATH_FIELDS, count_reads, will_read  # noqa: PLC0415

    count_reads(True)  # the files this command reads (not an earlier one's in this process): no output replaces one
    request = load_request(path, **overrides)
    # the calibration store too: `plan --store s.sqlite --acceptance-from-store chat -o s.sqlite --force` had replaced
    # the store with the plan's text (a URL names no file: will_read skips nothing it cannot find)
    store = request.store
    if store is None and request.acceptance_from_store:  # the one $SPECSIZE_STORE (or the default) names
        from ..adapters.store import default_path  # noqa: PLC0415

        store = str(default_path())
    will_read({"deployment_file": path, "store": store,
               **{name: getattr(request, name, None) for name in (*PATH_FIELDS, *MODEL_FIELDS)}})
    return request
