"""Key/value configuration, as ``pyflink.common.Configuration``."""
from __future__ import annotations


class Configuration:
    def __init__(self, other: "Configuration | None" = None):
        self._data: dict[str, str] = dict(other._data) if other else {}

    def set_string(self, key: str, value: str) -> "Configuration":
        self._data[key] = str(value)
        return self

    def get_string(self, key: str, default_value: str | None = None) -> str | None:
        return self._data.get(key, default_value)

    def set_integer(self, key: str, value: int) -> "Configuration":
        return self.set_string(key, str(int(value)))

    def get_integer(self, key: str, default_value: int = 0) -> int:
        v = self._data.get(key)
        return default_value if v is None else int(v)

    def set_boolean(self, key: str, value: bool) -> "Configuration":
        return self.set_string(key, "true" if value else "false")

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        v = self._data.get(key)
        return default_value if v is None else v.lower() == "true"

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def key_set(self) -> set[str]:
        return set(self._data)

    def to_dict(self) -> dict[str, str]:
        return dict(self._data)

    def __repr__(self) -> str:
        return f"Configuration({self._data})"
