"""What ``FieldsDecoder`` (plugins/module_utils/_kubernetes/client.py) returns when msgspec is installed, for tests
that play a reader of the API or check the decoder against it."""
from __future__ import annotations


def select_fields(value, fields):
    """``value`` (decoded JSON) reduced to ``fields``.

    ``fields`` is None for a whole value, a dict ``{key: fields of that key}`` for an object (other keys are
    dropped, absent ones stay absent), or a one-element list ``[fields of each item]`` for an array.
    A value of another shape than ``fields`` says (null included) is kept as it is.
    """
    if isinstance(fields, dict) and isinstance(value, dict):
        return {key: select_fields(value[key], sub_fields) for key, sub_fields in fields.items() if key in value}
    if isinstance(fields, list) and isinstance(value, list):
        return [select_fields(item, fields[0]) for item in value]
    return value
