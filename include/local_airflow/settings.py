"""Load ``airflow_settings.yaml`` (the astro CLI format) into Airflow's metadata database.

``astro dev start`` loads the file itself; ``bin/dev airflow-settings`` (``python -m
include.local_airflow.settings`` in the project) does the same for a plain Airflow (whatever
AIRFLOW_HOME / ``sql_alchemy_conn`` points at):

    airflow:
      connections: [{conn_id, conn_type, conn_host, conn_schema, conn_login, conn_password,
                     conn_port, conn_extra (a mapping), conn_uri}]
      pools: [{pool_name, pool_slot, pool_description, pool_include_deferred}]
      variables: [{variable_name, variable_value}]

``pool_include_deferred`` (Airflow's pool setting: deferred tasks hold their slots; default false,
as Airflow's) is this loader's, beside astro's keys.

Connections, pools and variables named in the file are created or updated; everything else in
the database is left alone. Where this differs from astro, it is stricter: astro skips or
silently converts what this loader reports as an error (a pool without slots, ``yes`` read as
a boolean login, a mapping as a variable value). A non-string ``variable_value`` is stored as
JSON, as ``airflow variables import`` does (astro turns numbers into strings, booleans into
"1"/"0", and refuses mappings and lists), so ``Variable.get(key, deserialize_json=True)``
reads it back.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import yaml
from airflow.utils.session import NEW_SESSION, provide_session


class AirflowSettingsError(ValueError):
    """The settings file is wrong, or the metadata database is not ready for it."""


@dataclass(frozen=True)
class ConnectionSetting:
    conn_id: str
    conn_type: Optional[str] = None
    host: Optional[str] = None
    schema: Optional[str] = None
    login: Optional[str] = None
    password: Optional[str] = None
    port: Optional[int] = None
    extra: Optional[Mapping[str, Any]] = None
    uri: Optional[str] = None       # instead of the fields above, as in astro's conn_uri


@dataclass(frozen=True)
class PoolSetting:
    name: str
    slots: int
    description: Optional[str] = None
    include_deferred: bool = False


@dataclass(frozen=True)
class VariableSetting:
    key: str
    value: str                      # as stored: non-string values already JSON-encoded


@dataclass(frozen=True)
class AirflowSettings:
    connections: tuple[ConnectionSetting, ...] = ()
    pools: tuple[PoolSetting, ...] = ()
    variables: tuple[VariableSetting, ...] = ()


@dataclass(frozen=True)
class Change:
    kind: str       # connection, pool, variable
    name: str
    action: str     # created, updated, unchanged


# section -> (the key naming an entry, every key an entry may have)
_SECTIONS = {
    "connections": ("conn_id", ("conn_id", "conn_type", "conn_host", "conn_schema", "conn_login",
                                "conn_password", "conn_port", "conn_extra", "conn_uri")),
    "pools": ("pool_name", ("pool_name", "pool_slot", "pool_description", "pool_include_deferred")),
    "variables": ("variable_name", ("variable_name", "variable_value")),
}

Problem = Callable[[str], None]


def read_airflow_settings(path: str) -> AirflowSettings:
    """Parse and validate the file; every problem is reported at once, naming the entry."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise AirflowSettingsError(f"{path}: cannot read the settings file: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise AirflowSettingsError(f"{path}: invalid YAML{where}: {getattr(e, 'problem', None) or e}; "
                                   "fix the syntax there") from None
    errors: list[str] = []
    airflow = _airflow_section(doc, errors.append)
    parsers = {"connections": _connection, "pools": _pool, "variables": _variable}
    parsed = {}
    for section, (name_key, keys) in _SECTIONS.items():
        entries = airflow.get(section) or []
        if not isinstance(entries, list):
            errors.append(f"airflow.{section} must be a list of entries, each starting with '- {name_key}:'")
            entries = []
        parsed[section] = tuple(_entries(section, entries, name_key, keys, parsers[section], errors.append))
    if errors:
        raise AirflowSettingsError("\n".join(f"{path}: {e}" for e in errors))
    return AirflowSettings(**parsed)


def _airflow_section(doc: Any, problem: Problem) -> dict:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        problem("the file must be a mapping with one key, 'airflow'")
        return {}
    for key in doc:
        if key != "airflow":
            problem(f"unknown top-level key '{key}'; the file has one key, 'airflow', "
                    "holding connections, pools and variables")
    airflow = doc.get("airflow") or {}
    if not isinstance(airflow, dict):
        problem("'airflow' must be a mapping of connections, pools and variables")
        return {}
    for key in airflow:
        if key not in _SECTIONS:
            problem(f"unknown key 'airflow.{key}'; expected connections, pools or variables")
    return airflow


def _entries(section: str, entries: list, name_key: str, keys: tuple, parse: Callable,
             problem: Problem) -> list:
    settings, seen = [], {}
    for i, entry in enumerate(entries):
        name = entry.get(name_key) if isinstance(entry, dict) else None
        where = f"{section}[{i}]" + (f" ({name})" if isinstance(name, str) and name else "")

        def entry_problem(message: str, where: str = where) -> None:
            problem(f"{where}: {message}")

        if not isinstance(entry, dict):
            entry_problem(f"must be a mapping of keys ({', '.join(keys)})")
            continue
        if all(v is None for v in entry.values()):
            continue        # a placeholder such as the empty entries `astro dev init` writes
        for key in entry:
            if key not in keys:
                entry_problem(f"unknown key '{key}'; expected {', '.join(keys)}")
        if not isinstance(name, str) or not name:
            entry_problem(f"missing {name_key}: give it a non-empty name")
            continue
        if name in seen:
            entry_problem(f"duplicate {name_key}, already given by {seen[name]}; remove one of them")
            continue
        seen[name] = where
        setting = parse(entry, entry_problem)
        if setting is not None:
            settings.append(setting)
    return settings


def _connection(entry: dict, problem: Problem) -> Optional[ConnectionSetting]:
    fields = dict(conn_type=_text(entry, "conn_type", problem), host=_text(entry, "conn_host", problem),
                  schema=_text(entry, "conn_schema", problem), login=_text(entry, "conn_login", problem),
                  password=_text(entry, "conn_password", problem), port=_port(entry, problem),
                  extra=_extra(entry, problem))
    uri = _text(entry, "conn_uri", problem)
    if uri and any(v is not None for v in fields.values()):
        problem("give either conn_uri or the conn_* fields, not both (Airflow refuses the mix)")
    elif not uri and not fields["conn_type"]:
        problem("missing conn_type (e.g. conn_type: spark), or give a conn_uri")
    else:
        return ConnectionSetting(entry["conn_id"], uri=uri, **fields)
    return None


def _pool(entry: dict, problem: Problem) -> Optional[PoolSetting]:
    slots = entry.get("pool_slot")
    if slots is None:
        problem("missing pool_slot: the number of task slots, e.g. pool_slot: 4")
    elif isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
        problem(f"pool_slot must be a non-negative integer, got {slots!r}; e.g. pool_slot: 4")
    else:
        deferred = entry.get("pool_include_deferred", False)
        if not isinstance(deferred, bool):
            problem(f"pool_include_deferred must be true or false, got {deferred!r}")
            return None
        return PoolSetting(entry["pool_name"], slots, _text(entry, "pool_description", problem), deferred)
    return None


def _variable(entry: dict, problem: Problem) -> Optional[VariableSetting]:
    value = entry.get("variable_value")
    if value is None:
        problem("missing variable_value; use variable_value: '' for an empty string")
        return None
    if not isinstance(value, str):
        # As `airflow variables import`: Variable.set(serialize_json=True) writes json.dumps(indent=2).
        value = _json(value, "variable_value", problem, indent=2)
    return None if value is None else VariableSetting(entry["variable_name"], value)


def _text(entry: dict, key: str, problem: Problem) -> Optional[str]:
    """A string field; empty means unset (astro passes no empty field to Airflow)."""
    value = entry.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        # YAML turns 0123, 1.10 and yes into numbers and booleans: only quoting keeps what was typed.
        problem(f"{key} must be a string, got {value!r}; quote it")
        return None
    return value


def _port(entry: dict, problem: Problem) -> Optional[int]:
    port = entry.get("conn_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        problem(f"conn_port must be a port number (1-65535), got {port!r}")
        return None
    return port


def _extra(entry: dict, problem: Problem) -> Optional[Mapping[str, Any]]:
    extra = entry.get("conn_extra")
    if isinstance(extra, str) and extra:
        try:        # astro passes a string through as JSON-encoded extra
            extra = json.loads(extra)
        except ValueError:
            pass
    if extra in (None, "", {}):
        return None
    if not isinstance(extra, dict):
        problem(f"conn_extra must be a mapping (e.g. conn_extra: {{deploy-mode: client}}), got {extra!r}")
        return None
    return extra if _json(extra, "conn_extra", problem) is not None else None


def _json(value: Any, key: str, problem: Problem, indent: Optional[int] = None) -> Optional[str]:
    try:
        return json.dumps(value, indent=indent)
    except (TypeError, ValueError):
        problem(f"{key} holds a value JSON cannot store ({value!r}); quote dates and other special values")
        return None


def check_metadata_database() -> None:
    """Fail unless the metadata database has this Airflow's schema.

    We do not migrate it ourselves: ``sql_alchemy_conn`` may point at a shared database, where a
    schema change is a deliberate step; and whoever has no migrated database has no running
    Airflow either (``airflow standalone`` and ``astro dev start`` migrate on start).
    """
    from sqlalchemy.exc import SQLAlchemyError

    from airflow import __version__, settings
    from airflow.utils.db import check_migrations

    url = settings.get_engine().url.render_as_string(hide_password=True)
    try:
        check_migrations(timeout=0)
    except TimeoutError:
        raise AirflowSettingsError(f"the Airflow metadata database {url} is not initialised for Airflow "
                                   f"{__version__}: run `airflow db migrate` first") from None
    except SQLAlchemyError as e:
        raise AirflowSettingsError(f"cannot reach the Airflow metadata database {url}: "
                                   f"{getattr(e, 'orig', None) or e}") from None


@provide_session
def apply_airflow_settings(settings: AirflowSettings, *, dry_run: bool = False,
                           session=NEW_SESSION) -> list[Change]:
    """Create or update what the file names, in one transaction; with dry_run, write nothing."""
    return ([_apply_connection(c, dry_run, session) for c in settings.connections]
            + [_apply_pool(p, dry_run, session) for p in settings.pools]
            + [_apply_variable(v, dry_run, session) for v in settings.variables])


_CONNECTION_FIELDS = ("conn_type", "host", "schema", "login", "password", "port", "extra")


def _apply_connection(setting: ConnectionSetting, dry_run: bool, session) -> Change:
    from sqlalchemy import select

    from airflow.models import Connection

    if setting.uri:
        wanted = Connection(conn_id=setting.conn_id, uri=setting.uri)
    else:
        wanted = Connection(conn_id=setting.conn_id, conn_type=setting.conn_type, host=setting.host,
                            schema=setting.schema, login=setting.login, password=setting.password,
                            port=setting.port, extra=dict(setting.extra) if setting.extra else None)
    if wanted.conn_id != setting.conn_id:       # Airflow's sanitize_conn_id refused it
        raise AirflowSettingsError(f"connection '{setting.conn_id}': a conn_id may only hold letters, "
                                   "digits and _#!()-.:/\\")
    existing = session.scalar(select(Connection).where(Connection.conn_id == setting.conn_id))
    if existing is None:
        if not dry_run:
            session.add(wanted)
        return Change("connection", setting.conn_id, "created")
    same = all(getattr(existing, f) == getattr(wanted, f) for f in _CONNECTION_FIELDS if f != "extra")
    if same and existing.extra_dejson == wanted.extra_dejson:
        return Change("connection", setting.conn_id, "unchanged")
    if not dry_run:
        for f in _CONNECTION_FIELDS:
            setattr(existing, f, getattr(wanted, f))
    return Change("connection", setting.conn_id, "updated")


def _apply_pool(setting: PoolSetting, dry_run: bool, session) -> Change:
    from airflow.models import Pool

    existing = Pool.get_pool(setting.name, session=session)
    if existing is None:
        if not dry_run:
            session.add(Pool(pool=setting.name, slots=setting.slots, description=setting.description,
                             include_deferred=setting.include_deferred))
        return Change("pool", setting.name, "created")
    wanted = (setting.slots, setting.description, setting.include_deferred)
    if (existing.slots, existing.description or None, bool(existing.include_deferred)) == wanted:
        return Change("pool", setting.name, "unchanged")
    if not dry_run:     # its team stays as it is
        existing.slots, existing.description, existing.include_deferred = wanted
    return Change("pool", setting.name, "updated")


def _apply_variable(setting: VariableSetting, dry_run: bool, session) -> Change:
    from sqlalchemy import select

    from airflow.models import Variable

    existing = session.scalar(select(Variable).where(Variable.key == setting.key))
    if existing is not None and existing.val == setting.value:
        return Change("variable", setting.key, "unchanged")
    if not dry_run:     # keeps a description set in the UI (the file has none)
        Variable.set(setting.key, setting.value, description=existing.description if existing else None,
                     session=session)
    return Change("variable", setting.key, "created" if existing is None else "updated")


def load_airflow_settings(path: str, *, dry_run: bool = False) -> list[Change]:
    """Read the file, check the database, apply."""
    settings = read_airflow_settings(path)
    check_metadata_database()
    return apply_airflow_settings(settings, dry_run=dry_run)


PROJECT_FILE = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "airflow_settings.yaml")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-settings", description="load airflow_settings.yaml (astro "
                                     "format) into Airflow's metadata database, as `astro dev start` does")
    parser.add_argument("--file", help="the settings file (default: the project's airflow_settings.yaml)")
    parser.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")
    args = parser.parse_args(argv)
    try:
        changes = load_airflow_settings(args.file or os.path.normpath(PROJECT_FILE), dry_run=args.dry_run)
    except AirflowSettingsError as e:
        print(f"airflow-settings: {e}", file=sys.stderr)
        return 1
    for c in changes:
        would = "would be " if args.dry_run and c.action != "unchanged" else ""
        print(f"{c.kind} {c.name}: {would}{c.action}")
    counts = {a: sum(c.action == a for c in changes) for a in ("created", "updated", "unchanged")}
    print(", ".join(f"{n} {a}" for a, n in counts.items()) + (" (dry run: nothing written)" if args.dry_run else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
