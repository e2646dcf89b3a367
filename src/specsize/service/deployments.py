"""Named, versioned deployments: each version keeps the request, the plan it gave and who made it.

A version is never changed; a change is a new version. The plan stored is `PlanResult.to_dict()` (docs/json.md),
so a stored version reads exactly like `specsize plan --format json` did at the time.
"""

from __future__ import annotations

import json
import random
import re
import time

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from ..core.errors import SpecError
from . import db

# matched whole (fullmatch): with `$`, a name ending in a newline had passed
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SAVE_TRIES = 40  # a version number taken by a concurrent save is re-read and tried again, up to this many times


class NotFound(SpecError):
    """No such deployment or version: 404, as an unknown job (docs/service.md)."""

    http_status = 404


def shown(value: object, limit: int = 80) -> str:
    """`value` as an error message quotes it: repr, cut at `limit` characters (a 5,000-character name stays short)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(value)):,} characters)"


def check_name(name: str, field: str = "deployment_name", what: str = "deployment") -> str:
    """A deployment's name (`deployment_name` when it is created; the NAME of its URLs after), or with `field` and
    `what` another named thing of the service (a /metrics endpoint's `name`)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise SpecError(field, f"invalid {what} name {shown(name)}", "1-128 letters, digits, '.', '_', '-'")
    return name


class ConflictError(SpecError):
    """A save that kept losing the race for a version number: 409, the request may be sent again as it is."""

    http_status = 409


def _no_deployment(name: str) -> NotFound:
    return NotFound("name", f"no deployment {shown(name)}", "a name from GET /api/v1/deployments")


def _headroom(plan: dict) -> float | None:
    return plan.get("headroom_fraction")


def headroom_text_of(plan: dict) -> str:
    """A plan's headroom (its JSON) as the CLI prints it, reading as its verdict (a list's "%.1f" had shown 0.19979
    under a 20% policy as "20.0%" beside THIN); "-" where the plan has none. The pages' one reading of it."""
    from ..core.envelope import headroom_text  # noqa: PLC0415

    headroom, policy = plan.get("headroom_fraction"), plan.get("headroom_policy")
    return headroom_text(headroom, policy) if headroom is not None and policy is not None else "-"


def save_version(engine: Engine, name: str, request: dict, plan: dict, author: str, note: str | None = None,
                 create: bool = False, newest: int | None = None) -> int:
    """Store a new version of `name` (creating the deployment when `create`); returns its number. Concurrent saves
    each land as their own version: the next number is the newest + 1, and when another save took it first (the
    unique (deployment, version) key refuses the insert) the number is read again and the insert retried; a create
    that loses the race for the name is told the deployment exists. `newest`: the newest version the caller's page
    showed; a save that another version overtook since is refused (ConflictError), in the transaction that stores it."""
    from sqlalchemy.exc import IntegrityError  # noqa: PLC0415

    check_name(name)
    for attempt in range(SAVE_TRIES):
        try:
            return _insert_version(engine, name, request, plan, author, note, create, newest)
        except IntegrityError:
            if create:  # another request created the name first
                raise SpecError("deployment_name", f"deployment {name!r} exists",
                                "a new name, or POST .../versions to change it") from None
            time.sleep(random.uniform(0, 0.01 * (attempt + 1)))  # let the save that took the number finish
    raise ConflictError("version", f"{SAVE_TRIES} concurrent saves of {name!r} took each version number this one "
                        "tried", "the same request again")


def overtaken(name: str, latest: int, author: str, seen: int) -> ConflictError:
    """The refusal of a save from a page drawn when v`seen` was the newest, which v`latest` by `author` overtook."""
    return ConflictError("newest", f"v{latest} of {name} was saved by {author} after this page was drawn (the newest "
                         f"was v{seen}); this save would have been made without it",
                         "reload the page (its what-if and fixes then start from what is stored), and save again")


def _insert_version(engine: Engine, name: str, request: dict, plan: dict, author: str, note: str | None,
                    create: bool, newest: int | None = None) -> int:
    with engine.begin() as con:
        # PostgreSQL: the deployment's row locked (FOR UPDATE) until this version is in, so concurrent saves of one
        # deployment queue there and each reads the newest number after the one before; SQLite ignores it (its
        # writes are serial, and save_version retries a number another save took between the read and the insert)
        row = con.execute(select(db.deployments.c.id).where(db.deployments.c.name == name).with_for_update()).first()
        if row is None:
            if not create:
                raise _no_deployment(name)
            inserted = con.execute(db.deployments.insert().values(name=name, created_at=db.now(), created_by=author))
            deployment_id = inserted.inserted_primary_key[0]  # type: ignore[index]
        elif create:
            raise SpecError("deployment_name", f"deployment {name!r} exists",
                            "a new name, or POST .../versions to change it")
        else:
            deployment_id = row[0]
        latest = con.execute(select(func.max(db.versions.c.version))
                             .where(db.versions.c.deployment_id == deployment_id)).scalar()
        if newest is not None and (latest or 0) > newest:
            # checked here, where the number is taken, not only before the plan is computed: two pages drawn at v1 had
            # both passed that check while the other planned, and the second save (v3) had dropped the first's v2. A
            # save that read `latest` before another stored its version loses the insert (the unique key) and reads
            # again, so the check holds on SQLite too, where FOR UPDATE is ignored
            who = con.execute(select(db.versions.c.author).where(db.versions.c.deployment_id == deployment_id,
                                                                 db.versions.c.version == latest)).scalar()
            raise overtaken(name, latest or 0, str(who), newest)
        number = (latest or 0) + 1
        con.execute(db.versions.insert().values(
            deployment_id=deployment_id, version=number, request=json.dumps(request, sort_keys=True),
            plan=json.dumps(plan, sort_keys=True), verdict=plan["verdict"], headroom_fraction=_headroom(plan),
            note=note, author=author, created_at=db.now()))
        db.write_audit(con, author, "deployment.create" if create else "deployment.version", f"{name} v{number}",
                       {"note": note} if note else None)
    return number


def list_deployments(engine: Engine) -> list[dict]:
    latest = (select(db.versions.c.deployment_id, func.max(db.versions.c.version).label("v"))
              .group_by(db.versions.c.deployment_id).subquery())
    query = (select(db.deployments.c.name, db.versions.c.version, db.versions.c.verdict,
                    db.versions.c.headroom_fraction, db.versions.c.author, db.versions.c.created_at,
                    db.versions.c.plan)
             .join(latest, latest.c.deployment_id == db.deployments.c.id)
             .join(db.versions, (db.versions.c.deployment_id == latest.c.deployment_id)
                   & (db.versions.c.version == latest.c.v))
             .order_by(db.deployments.c.name))
    with engine.connect() as con:
        return [{"name": r[0], "version": r[1], "verdict": r[2], "headroom_fraction": r[3],
                 "headroom_text": headroom_text_of(json.loads(r[6])), "author": r[4], "updated_at": r[5]} for r in con.execute(query)]


def _exists(engine: Engine, name: str) -> bool:
    with engine.connect() as con:
        return con.execute(select(db.deployments.c.id).where(db.deployments.c.name == name)).first() is not None


def versions(engine: Engine, name: str) -> list[dict]:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _no_deployment(name)
    with engine.connect() as con:
        rows = con.execute(select(db.versions.c.version, db.versions.c.verdict, db.versions.c.headroom_fraction,
                                  db.versions.c.author, db.versions.c.created_at, db.versions.c.note,
                                  db.versions.c.plan)
                           .join(db.deployments, db.deployments.c.id == db.versions.c.deployment_id)
                           .where(db.deployments.c.name == name).order_by(db.versions.c.version)).all()
    if not rows:
        raise _no_deployment(name)
    return [{"version": r[0], "verdict": r[1], "headroom_fraction": r[2], "headroom_text": headroom_text_of(json.loads(r[6])),
             "author": r[3], "created_at": r[4], "note": r[5]} for r in rows]


MAX_VERSION = 2**31 - 1  # a version number is a 32-bit integer column on SQLite and PostgreSQL alike


def version(engine: Engine, name: str, number: int | None = None) -> dict:
    """One version (the newest when `number` is None): request, plan, author, time."""
    if not isinstance(name, str) or not NAME.fullmatch(name):  # no deployment has it (nor may a NUL reach SQL)
        raise _no_deployment(name)
    if number is not None and not 1 <= number <= MAX_VERSION:  # beyond the database's integers: no such version
        raise NotFound("version", f"no version {str(number)[:24]} of {name!r}",
                       "a version from GET /api/v1/deployments/NAME/versions")
    query = (select(db.versions.c.version, db.versions.c.request, db.versions.c.plan, db.versions.c.author,
                    db.versions.c.created_at, db.versions.c.note)
             .join(db.deployments, db.deployments.c.id == db.versions.c.deployment_id)
             .where(db.deployments.c.name == name))
    query = query.where(db.versions.c.version == number) if number is not None else \
        query.order_by(db.versions.c.version.desc()).limit(1)
    with engine.connect() as con:
        row = con.execute(query).first()
    if row is None and number is None:
        raise _no_deployment(name)
    if row is None:
        if not _exists(engine, name):
            raise _no_deployment(name)
        raise NotFound("version", f"no version {number} of {name!r}",
                       "a version from GET /api/v1/deployments/NAME/versions")
    return {"name": name, "version": row[0], "request": json.loads(row[1]), "plan": json.loads(row[2]),
            "author": row[3], "created_at": row[4], "note": row[5]}


def _headline(plan: dict) -> dict:
    v = plan.get("envelope") or {}
    return {"verdict": plan["verdict"], "headroom_fraction": plan.get("headroom_fraction"),
            "headroom_text": headroom_text_of(plan),
            "breaks_first": plan.get("breaks_first"), "max_concurrency": plan.get("max_concurrency"),
            "kv_cache_tokens": plan.get("kv_cache_tokens"), "worst_case": v.get("worst_case", v) if v else None}


def diff(a: dict, b: dict) -> dict:
    """Two versions side by side: every input that differs, and the verdict and headroom of each."""
    keys = sorted(set(a["request"]) | set(b["request"]))
    inputs = [{"field": k, "a": a["request"].get(k), "b": b["request"].get(k)} for k in keys
              if a["request"].get(k) != b["request"].get(k)]
    ha, hb = _headline(a["plan"]), _headline(b["plan"])
    outcome = [{"field": k, "a": ha.get(k), "b": hb.get(k)} for k in ("verdict", "headroom_fraction", "headroom_text",
                                                                       "breaks_first",
                                                                       "max_concurrency", "kv_cache_tokens")]
    return {"name": a["name"], "a": {"version": a["version"], "author": a["author"], "created_at": a["created_at"]},
            "b": {"version": b["version"], "author": b["author"], "created_at": b["created_at"]},
            "inputs": inputs, "outcome": outcome}


ACCEPTANCE_KEYS = ("acceptance_rate", "mean_accepted_length", "measured_at_k", "acceptance_source")


def stored_acceptance(request: dict, plan: dict, store: str | None) -> dict:
    """The acceptance a version's plan used when its request took it from the calibration store
    (`acceptance_from_store`): the observation the plan names (`store #ID 'tag'`, rows are never changed), in the form
    the plan read it (a rate, or a mean accepted length with the k it was measured at), with that provenance as its
    `acceptance_source`; else the plan's per-token rate. Empty when the request names no store tag."""
    tag = request.get("acceptance_from_store")
    inputs = plan.get("inputs") or {}
    source = inputs.get("acceptance_source")
    if not tag:
        return {}
    found = re.match(r"store #(\d+) ", source or "")
    if found and store:
        from ..adapters.store import Store  # noqa: PLC0415

        try:
            with Store(store, create=False) as opened:  # an export reads: a store that is gone is not made again
                rows = [o for o in opened.list(tag=tag) if o.id == int(found.group(1))]
        except SpecError:
            rows = []
        form = rows[0].acceptance_fields() if rows else {}  # as the plan read it (inputs.resolve.acceptance_of)
        if form:
            return form | {"acceptance_source": source}
    if inputs.get("acceptance_rate") is not None:
        return {"acceptance_rate": inputs["acceptance_rate"], "acceptance_source": source or f"store tag {tag!r}"}
    return {}


# the settings of a stored request that change what `specsize plan` prints but that a deployment file cannot hold (their
# field's `yaml` is None): `plan --simulate` folds the burst simulation into the verdict (planner.scenario.
# fold_simulation), over `duration` seconds from `seed`
PLAN_ONLY = ("simulate", "duration", "seed")


def plan_flags_comment(request: dict) -> str:
    """The comment an export opens with when its version's plan simulated the burst: the command-line flags that plan
    the file to the stored plan. Without them `specsize plan FILE` printed the envelope's verdict alone (a version
    stored THIN by its simulated queue growth read back as FITS); "" when the plan did not simulate."""
    if request.get("simulate") is not True:
        return ""
    from ..inputs.fields import flag_of  # noqa: PLC0415
    from ..inputs.request import info  # noqa: PLC0415

    flags = []
    for key in PLAN_ONLY:
        if key in request:
            flag = flag_of(key, info(key)) or f"--{key}"  # each of PLAN_ONLY has its flag
            flags.append(flag if isinstance(request[key], bool) else f"{flag} {request[key]}")
    return (f"# this version's plan also simulated the burst, which a deployment file does not hold: "
            f"`specsize plan FILE {' '.join(flags)}` plans this file to it\n")


def as_planned(request: dict, plan: dict, store: str | None) -> dict:
    """A version's request with the acceptance its plan used in place of its calibration-store tag
    (`stored_acceptance`): what re-plans to the version's own figures after more observations are recorded under the
    tag (the newest of which the tag reads). The request itself where it names no tag."""
    resolved = stored_acceptance(request, plan, store)
    if not resolved:
        return request
    return {k: v for k, v in request.items() if k not in ACCEPTANCE_KEYS and k != "acceptance_from_store"} | resolved


def to_yaml(request: dict, plan: dict | None = None, store: str | None = None) -> str:
    """The version's request as a deployment file `specsize plan FILE` reads back (workload nested). An acceptance
    the version took from the calibration store (`acceptance_from_store`, which a deployment file does not carry) is
    written as the figure its plan used, with a comment naming the tag, so the file plans to the same numbers."""
    import yaml  # noqa: PLC0415

    from ..inputs.request import YAML_TOP_KEYS, YAML_WORKLOAD_KEYS  # noqa: PLC0415

    top = {k: v for k, v in request.items() if k in YAML_TOP_KEYS}
    resolved = stored_acceptance(request, plan or {}, store)
    if resolved:
        top = {k: v for k, v in top.items() if k not in ACCEPTANCE_KEYS} | resolved
    workload = {k: v for k, v in request.items() if k in YAML_WORKLOAD_KEYS}
    if workload:
        top["workload"] = workload
    text = plan_flags_comment(request) + yaml.safe_dump(top, sort_keys=False)
    if not resolved:
        return text
    tag = " ".join(shown(request["acceptance_from_store"]).split())  # one comment line, whatever the tag holds
    comment = (f"# acceptance: from the calibration store, tag {tag} (acceptance_from_store), as this version's "
               "plan read it\n")
    first = next(k for k in ACCEPTANCE_KEYS if k in resolved)
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.startswith(f"{first}:")), 0)
    return "".join(lines[:at] + [comment] + lines[at:])
