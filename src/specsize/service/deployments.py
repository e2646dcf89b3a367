"""Named, versioned deployments: each version keeps the request, the plan it gave and who made it.

A version is never changed; a change is a new version. The plan stored is `PlanResult.to_dict()` (docs/json.md),
so a stored version reads exactly like `specsize plan --format json` did at the time.
"""

from __future__ import annotations

import json
import re

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from ..core.errors import SpecError
from . import db

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_name(name: str, field: str = "deployment_name", what: str = "deployment") -> str:
    """A deployment's name (`deployment_name` when it is created; the NAME of its URLs after), or with `field` and
    `what` another named thing of the service (a /metrics endpoint's `name`)."""
    if not NAME.match(name or ""):
        raise SpecError(field, f"invalid {what} name {name!r}", "1-128 letters, digits, '.', '_', '-'")
    return name


def _headroom(plan: dict) -> float | None:
    return plan.get("headroom_fraction")


def save_version(engine: Engine, name: str, request: dict, plan: dict, author: str, note: str | None = None,
                 create: bool = False) -> int:
    """Store a new version of `name` (creating the deployment when `create`); returns its number."""
    check_name(name)
    with engine.begin() as con:
        if con.dialect.name == "sqlite":
            con.exec_driver_sql("SELECT 1")
        row = con.execute(select(db.deployments.c.id).where(db.deployments.c.name == name)).first()
        if row is None:
            if not create:
                raise SpecError("name", f"no deployment {name!r}", "a name from GET /api/v1/deployments")
            inserted = con.execute(db.deployments.insert().values(name=name, created_at=db.now(), created_by=author))
            deployment_id = inserted.inserted_primary_key[0]  # type: ignore[index]
        elif create:
            raise SpecError("deployment_name", f"deployment {name!r} exists",
                            "a new name, or POST .../versions to change it")
        else:
            deployment_id = row[0]
        latest = con.execute(select(func.max(db.versions.c.version))
                             .where(db.versions.c.deployment_id == deployment_id)).scalar()
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
                    db.versions.c.headroom_fraction, db.versions.c.author, db.versions.c.created_at)
             .join(latest, latest.c.deployment_id == db.deployments.c.id)
             .join(db.versions, (db.versions.c.deployment_id == latest.c.deployment_id)
                   & (db.versions.c.version == latest.c.v))
             .order_by(db.deployments.c.name))
    with engine.connect() as con:
        return [{"name": r[0], "version": r[1], "verdict": r[2], "headroom_fraction": r[3], "author": r[4],
                 "updated_at": r[5]} for r in con.execute(query)]


def versions(engine: Engine, name: str) -> list[dict]:
    with engine.connect() as con:
        rows = con.execute(select(db.versions.c.version, db.versions.c.verdict, db.versions.c.headroom_fraction,
                                  db.versions.c.author, db.versions.c.created_at, db.versions.c.note)
                           .join(db.deployments, db.deployments.c.id == db.versions.c.deployment_id)
                           .where(db.deployments.c.name == name).order_by(db.versions.c.version)).all()
    if not rows:
        raise SpecError("name", f"no deployment {name!r}", "a name from GET /api/v1/deployments")
    return [{"version": r[0], "verdict": r[1], "headroom_fraction": r[2], "author": r[3], "created_at": r[4],
             "note": r[5]} for r in rows]


MAX_VERSION = 2**31 - 1  # a version number is a 32-bit integer column on SQLite and PostgreSQL alike


def version(engine: Engine, name: str, number: int | None = None) -> dict:
    """One version (the newest when `number` is None): request, plan, author, time."""
    if number is not None and not 1 <= number <= MAX_VERSION:  # beyond the database's integers: no such version
        raise SpecError("version", f"no version {str(number)[:24]} of {name!r}",
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
        raise SpecError("name", f"no deployment {name!r}", "a name from GET /api/v1/deployments")
    if row is None:
        raise SpecError("version", f"no version {number} of {name!r}",
                        "a version from GET /api/v1/deployments/NAME/versions")
    return {"name": name, "version": row[0], "request": json.loads(row[1]), "plan": json.loads(row[2]),
            "author": row[3], "created_at": row[4], "note": row[5]}


def _headline(plan: dict) -> dict:
    v = plan.get("envelope") or {}
    return {"verdict": plan["verdict"], "headroom_fraction": plan.get("headroom_fraction"),
            "breaks_first": plan.get("breaks_first"), "max_concurrency": plan.get("max_concurrency"),
            "kv_cache_tokens": plan.get("kv_cache_tokens"), "worst_case": v.get("worst_case", v) if v else None}


def diff(a: dict, b: dict) -> dict:
    """Two versions side by side: every input that differs, and the verdict and headroom of each."""
    keys = sorted(set(a["request"]) | set(b["request"]))
    inputs = [{"field": k, "a": a["request"].get(k), "b": b["request"].get(k)} for k in keys
              if a["request"].get(k) != b["request"].get(k)]
    ha, hb = _headline(a["plan"]), _headline(b["plan"])
    outcome = [{"field": k, "a": ha.get(k), "b": hb.get(k)} for k in ("verdict", "headroom_fraction", "breaks_first",
                                                                       "max_concurrency", "kv_cache_tokens")]
    return {"name": a["name"], "a": {"version": a["version"], "author": a["author"], "created_at": a["created_at"]},
            "b": {"version": b["version"], "author": b["author"], "created_at": b["created_at"]},
            "inputs": inputs, "outcome": outcome}


def to_yaml(request: dict) -> str:
    """The version's request as a deployment file `specsize plan FILE` reads back (workload nested)."""
    import yaml  # noqa: PLC0415

    from ..inputs.request import YAML_TOP_KEYS, YAML_WORKLOAD_KEYS  # noqa: PLC0415

    top = {k: v for k, v in request.items() if k in YAML_TOP_KEYS}
    workload = {k: v for k, v in request.items() if k in YAML_WORKLOAD_KEYS}
    if workload:
        top["workload"] = workload
    return yaml.safe_dump(top, sort_keys=False)
