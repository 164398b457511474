"""A published config.json read the way a transformers config class reads it.

A key that is absent takes the config class's default; a key present with the wrong type is
refused naming it (InvalidArchitecture, `field` the key's dotted path inside `architecture`,
e.g. ``text_config.hidden_size``). Keys a reader does not ask for are ignored, as transformers
keeps unknown keys as attributes no layer reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from service.core.cost_model_errors import InvalidArchitecture

_ABSENT = object()


class ConfigView:
    """Typed, defaulted reads of one config object (`path` is its place in the request).
    `defaulted` collects each key read from the class default (by dotted path), shared with
    the views of its sub-configs."""

    def __init__(
        self, raw: Mapping[str, Any], path: str = "", defaulted: dict[str, Any] | None = None
    ) -> None:
        self.raw = raw
        self.path = path
        self.defaulted: dict[str, Any] = {} if defaulted is None else defaulted

    def _default(self, name: str, value: Any) -> Any:
        self.defaulted[self.field(name)] = value
        return value

    def field(self, key: str) -> str:
        """The dotted path of `key` in the request's `architecture`."""
        return f"{self.path}{key}"

    def _find(self, keys: str | tuple[str, ...]) -> tuple[str, Any]:
        """The first of `keys` present (transformers' attribute_map aliases: `n_layer` for
        `num_hidden_layers`), and its value; `_ABSENT` when none is."""
        names = (keys,) if isinstance(keys, str) else keys
        for name in names:
            if name in self.raw:
                return name, self.raw[name]
        return names[0], _ABSENT

    def size(
        self, keys: str | tuple[str, ...], default: int | None, maximum: int | None = None
    ) -> int:
        """A positive integer, at most `maximum`; absent or null -> `default` (None: the key is
        required)."""
        name, value = self._find(keys)
        if value is _ABSENT or value is None:
            if default is None:
                raise InvalidArchitecture(f"{self.field(name)} is required", field=self.field(name))
            return int(self._default(name, default))
        found = self._positive(name, value)
        if maximum is not None and found > maximum:
            raise InvalidArchitecture(
                f"{self.field(name)} must be at most {maximum}, got {found}", field=self.field(name)
            )
        return found

    def optional_size(self, keys: str | tuple[str, ...], default: int | None) -> int | None:
        """A positive integer or None: absent -> `default`, an explicit null -> None (as
        `sliding_window: null` turns a window off where the class default has one)."""
        name, value = self._find(keys)
        if value is _ABSENT:
            return cast(int | None, self._default(name, default))
        if value is None:
            return None
        return self._positive(name, value)

    def count(self, keys: str | tuple[str, ...], default: int) -> int:
        """A non-negative integer (expert counts, layer indices); absent or null -> default."""
        name, value = self._find(keys)
        if value is _ABSENT or value is None:
            return int(self._default(name, default))
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArchitecture(
                f"{self.field(name)} must be a non-negative integer, got {value!r}",
                field=self.field(name),
            )
        return value

    def flag(self, keys: str | tuple[str, ...], default: bool) -> bool:
        name, value = self._find(keys)
        if value is _ABSENT or value is None:
            return bool(self._default(name, default))
        if not isinstance(value, bool):
            raise InvalidArchitecture(
                f"{self.field(name)} must be true or false, got {value!r}", field=self.field(name)
            )
        return value

    def text(self, keys: str | tuple[str, ...], default: str) -> str:
        name, value = self._find(keys)
        if value is _ABSENT or value is None:
            return str(self._default(name, default))
        if not isinstance(value, str):
            raise InvalidArchitecture(
                f"{self.field(name)} must be a string, got {value!r}", field=self.field(name)
            )
        return value

    def int_list(self, key: str) -> list[int] | None:
        """A list of non-negative integers (layer indices), or None when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
        ):
            raise InvalidArchitecture(
                f"{self.field(key)} must be a list of non-negative integers", field=self.field(key)
            )
        return list(value)

    def text_list(self, key: str) -> list[str] | None:
        """A list of strings (`layer_types`), or None when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidArchitecture(
                f"{self.field(key)} must be a list of strings", field=self.field(key)
            )
        return list(value)

    def sub(self, key: str) -> ConfigView | None:
        """The nested object at `key` (`text_config`), or None when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidArchitecture(f"{self.field(key)} must be an object", field=self.field(key))
        return ConfigView(value, f"{self.field(key)}.", self.defaulted)

    def _positive(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidArchitecture(
                f"{self.field(name)} must be a positive integer, got {value!r}",
                field=self.field(name),
            )
        return value
