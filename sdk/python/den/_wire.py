"""Converting between JSON and the dataclasses of :mod:`den.models`.

A model's fields carry their JSON names in their metadata (``"json"``)
when the name is not a valid Python identifier (``from``); fields whose
metadata says ``wire=False`` are the SDK's own and never travel. Decoding
follows the type hints, ignores fields it does not know (dend may add
some) and fills absent ones with their defaults.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
import typing
from typing import Any, Callable, Optional

_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")

_hints_cache: dict = {}


def json_name(f: dataclasses.Field) -> str:
    """The JSON name of a model field."""
    return f.metadata.get("json", f.name)


def wire_fields(cls) -> list:
    """The fields of a model that travel on the wire."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("wire", True)]


def type_hints(cls) -> dict:
    """The evaluated type hints of a model, cached."""
    h = _hints_cache.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _hints_cache[cls] = h
    return h


def parse_time(s: Any) -> Optional[_dt.datetime]:
    """Parse an RFC 3339 time as Go writes it (up to nanoseconds, Z or an
    offset); anything else gives None rather than an exception, as a
    model must not fail on a field it only displays."""
    if not isinstance(s, str):
        return None
    m = _RFC3339.match(s)
    if not m:
        return None
    base, frac, zone = m.groups()
    text = base + ("." + (frac + "000000")[:6] if frac else "") + ("+00:00" if zone == "Z" else zone)
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def format_time(t: _dt.datetime) -> str:
    s = t.isoformat()
    return s[:-6] + "Z" if s.endswith("+00:00") else s


def unwrap_optional(tp):
    """X for Optional[X], else tp."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def decoder(tp) -> Callable[[Any], Any]:
    """A function converting a JSON value to the type tp (None stays None)."""
    tp = unwrap_optional(tp)
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        each = decoder(item)
        return lambda v: [each(x) for x in v] if isinstance(v, list) else []
    if origin is dict:
        args = typing.get_args(tp)
        each = decoder(args[1] if len(args) == 2 else Any)
        return lambda v: {k: each(x) for k, x in v.items()} if isinstance(v, dict) else {}
    if dataclasses.is_dataclass(tp):
        return lambda v: from_dict(tp, v) if isinstance(v, dict) else None
    if tp is _dt.datetime:
        return parse_time
    if tp is float:
        return lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    return lambda v: v


def _plan(cls) -> list:
    """How to decode cls: (attribute, JSON name, decoder) per wire field."""
    plan = _plans.get(cls)
    if plan is None:
        hints = type_hints(cls)
        plan = [(f.name, json_name(f), decoder(hints[f.name])) for f in wire_fields(cls)]
        _plans[cls] = plan
    return plan


_plans: dict = {}


def from_dict(cls, data: dict):
    """Build the model cls from a decoded JSON object."""
    kwargs = {}
    for attr, name, dec in _plan(cls):
        v = data.get(name)
        if v is not None:
            kwargs[attr] = dec(v)
    return cls(**kwargs)


def to_wire(value: Any) -> Any:
    """Convert a model (or a structure holding models) to JSON values,
    leaving out fields that are None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in wire_fields(type(value)):
            v = getattr(value, f.name)
            if v is not None:
                out[json_name(f)] = to_wire(v)
        return out
    if isinstance(value, dict):
        return {k: to_wire(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, _dt.datetime):
        return format_time(value)
    return value
