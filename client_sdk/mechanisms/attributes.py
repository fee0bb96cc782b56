"""The attributes of a record mechanism (``multi``, ``fourier``): one value object for both.

A config lists its attributes as ``[{"name", "k", "labels"?}, ...]`` (``fourier``'s are binary
and may omit ``k``). :meth:`Attributes.parse` validates them once, with errors naming the
field; :meth:`Attributes.encode` turns a device's records (mappings attribute -> label, or ->
index) into the ``(n, d)`` integer tuples the mechanisms perturb, and
:meth:`Attributes.to_config` writes them back. A leaf: it imports no mechanism, so a device
building ``fourier`` never imports ``multi``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, overload

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_int
from client_sdk.mechanisms._wire import is_plain_int

__all__ = ["MAX_ATTRIBUTES", "MAX_K", "Attribute", "Attributes"]

MAX_ATTRIBUTES = 64
MAX_K = 1 << 12
"""The largest k of one attribute (and, in ``multi``, the most cells of one table)."""


class Attribute(NamedTuple):
    """A parsed attribute: its name, k and optional labels."""

    name: str
    k: int
    labels: tuple[str, ...] | None


@dataclasses.dataclass(frozen=True)
class Attributes(Sequence[Attribute]):
    """A config's validated attributes, in their order (a sequence of :class:`Attribute`)."""

    items: tuple[Attribute, ...]

    @classmethod
    def parse(cls, attributes: Any, *, binary: bool = False) -> Attributes:
        """The config's ``attributes`` ({name, k, labels?} each; ``binary``: k is 2 and may be
        omitted), validated; errors name the field."""
        if isinstance(attributes, Attributes):
            entries: Any = attributes.to_config()
        else:
            entries = attributes
        if binary and isinstance(entries, (list, tuple)):
            entries = [
                {**entry, "k": entry.get("k", 2)} if isinstance(entry, Mapping) else entry
                for entry in entries
            ]
        parsed = cls(tuple(_parse(entries)))
        if binary:
            for index, attribute in enumerate(parsed):
                if attribute.k != 2:
                    raise ValueError(
                        f"attributes[{index}].k must be 2 (Fourier marginals are over binary "
                        f"attributes); got {attribute.k}"
                    )
        return parsed

    @overload
    def __getitem__(self, index: int) -> Attribute: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Attribute]: ...

    def __getitem__(self, index: int | slice) -> Attribute | Sequence[Attribute]:
        return self.items[index]

    def __len__(self) -> int:
        return len(self.items)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.items)

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(a.k for a in self.items)

    def to_config(self, *, with_k: bool = True) -> list[dict[str, Any]]:
        """The config's ``attributes`` list (``with_k=False``: binary ones, k implied)."""
        out: list[dict[str, Any]] = []
        for name, k, labels in self.items:
            entry: dict[str, Any] = {"name": name, "k": k} if with_k else {"name": name}
            if labels is not None:
                entry["labels"] = list(labels)
            out.append(entry)
        return out

    def encode(self, records: Sequence[Any]) -> npt.NDArray[np.int64]:
        """Records (mappings attribute -> label, or -> index when the attribute has no labels)
        as the (n, d) tuples ``perturb`` takes. A missing or unknown attribute, or a value that
        is not a label (index) of its attribute, is a ValueError naming the position and
        attribute, never the value (error messages end up in logs)."""
        out = np.empty((len(records), len(self.items)), dtype=np.int64)
        names = set(self.names)
        indices = [
            None if labels is None else {label: i for i, label in enumerate(labels)}
            for _, _, labels in self.items
        ]
        for position, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise ValueError(
                    f"the value at position {position} must be a mapping attribute -> value; "
                    f"got a {type(record).__name__}"
                )
            unknown = [str(key) for key in record if key not in names]
            if unknown:
                raise ValueError(
                    f"the value at position {position} has unknown attribute(s) "
                    f"{', '.join(map(repr, unknown[:3]))}; "
                    f"the attributes are {', '.join(self.names)}"
                )
            for j, (name, k, _) in enumerate(self.items):
                if name not in record:
                    raise ValueError(f"the value at position {position} misses attribute {name!r}")
                value, index = record[name], indices[j]
                if index is not None:
                    code = index.get(value) if isinstance(value, str) else None
                    what = f"one of its {k} labels"
                else:
                    ok = is_plain_int(value) and 0 <= int(value) < k
                    code = int(value) if ok else None
                    what = f"an integer in [0, {k})"
                if code is None:
                    raise ValueError(
                        f"the value at position {position}, attribute {name!r} "
                        f"(a {type(value).__name__}) must be {what}"
                    )
                out[position, j] = code
        return out


def _parse(attributes: Any) -> list[Attribute]:
    if isinstance(attributes, (str, bytes)) or not isinstance(attributes, Sequence):
        raise ValueError(f"attributes must be a list of {{name, k}}; got {attributes!r}")
    if not 1 <= len(attributes) <= MAX_ATTRIBUTES:
        raise ValueError(
            f"attributes must have 1 to {MAX_ATTRIBUTES} entries; got {len(attributes)}"
        )
    parsed: list[Attribute] = []
    for index, entry in enumerate(attributes):
        if not isinstance(entry, Mapping) or not {"name", "k"} <= set(entry) <= {
            "name",
            "k",
            "labels",
        }:
            raise ValueError(
                f"attributes[{index}] must be {{name, k}} and optionally labels; got "
                + (f"keys {sorted(map(str, entry))}" if isinstance(entry, Mapping) else repr(entry))
            )
        name, k = entry["name"], entry["k"]
        if not isinstance(name, str) or not name or len(name) > 64:
            raise ValueError(f"attributes[{index}].name must be a non-empty string; got {name!r}")
        k = check_int(k, f"attributes[{index}].k", minimum=2, maximum=MAX_K)
        labels = entry.get("labels")
        if labels is not None:
            if (
                not isinstance(labels, (list, tuple))
                or len(labels) != k
                or not all(isinstance(label, str) for label in labels)
                or len(set(labels)) != k
            ):
                raise ValueError(
                    f"attributes[{index}].labels must be {k} distinct strings (k={k}); "
                    f"got {len(labels) if isinstance(labels, (list, tuple)) else repr(labels)}"
                )
            labels = tuple(labels)
        parsed.append(Attribute(name, k, labels))
    names = [a.name for a in parsed]
    if len(set(names)) != len(names):
        raise ValueError(f"attribute names must be distinct; got {names}")
    return parsed
