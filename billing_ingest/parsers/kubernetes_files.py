"""Kubernetes pod lists: reading the file (JSON, or YAML up to YAML_MAX_BYTES, anchors and aliases
refused) into its pod items, each failure an ImportFormatError naming the file. The pods are read
by billing_ingest/parsers/kubernetes.py."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover (PyYAML built without libyaml)
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

from billing_ingest.parsers.bounds import json_loads
from finops.core.errors import ImportFormatError


def load_json(path: Path, file_label: str) -> Any:
    """The whole file as JSON (numbers with a fraction as Decimal), or ImportFormatError naming
    line and column."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            # Nesting bounded (FINOPS_MAX_JSON_DEPTH) before json.loads recurses through it.
            return json_loads(handle.read(), file_label=file_label, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            file=file_label,
            row=exc.lineno,
        ) from None
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=file_label) from None


# YAML (`kubectl get pods -o yaml`): PyYAML's safe loader (the C one where PyYAML was built with
# libyaml), with times kept as the strings kubectl writes (the pod reader parses them), `<<` read
# as a plain key, and anchors/aliases refused: kubectl never writes them, and a few nested
# aliases or merges expand to billions of nodes ("billion laughs").
_NOT_RESOLVED = frozenset({"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:merge"})


class YamlAliasError(Exception):
    """An alias in a YAML pod list: refused before it is expanded."""

    def __init__(self, mark: Any) -> None:
        super().__init__("alias")
        self.line = int(getattr(mark, "line", 0)) + 1
        self.column = int(getattr(mark, "column", 0)) + 1


class PodYamlLoader(_SafeLoader):
    """Safe loader for pod lists (see above)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _NOT_RESOLVED]
        for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        # An alias is the node it names, met again: refused the first time it is met, before
        # anything is built from it twice.
        if node in self.constructed_objects or node in self.recursive_objects:
            raise YamlAliasError(node.start_mark)
        return super().construct_object(node, deep=deep)


def load_yaml(path: Path, file_label: str) -> list[Any]:
    """The file's YAML documents (one for `kubectl get pods -o yaml`), or ImportFormatError
    naming line and column."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            loader = PodYamlLoader(handle)
            try:
                documents = []
                while loader.check_data():
                    documents.append(loader.get_data())
                return documents
            finally:
                loader.dispose()
    except YamlAliasError as exc:
        raise ImportFormatError(
            "YAML anchors and aliases are not read (kubectl never writes them): the node "
            f"anchored at line {exc.line}, column {exc.column} is used again by an alias",
            file=file_label,
            row=exc.line,
        ) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file_label) from None
    except RecursionError:
        raise ImportFormatError(
            "YAML nested too deeply to be a pod list", file=file_label
        ) from None
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=file_label) from None


def _yaml_error(exc: yaml.YAMLError, file_label: str) -> ImportFormatError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return ImportFormatError(
        f"not valid YAML: {problem}{where}; export pods with `kubectl get pods -A -o json` "
        "(or `-o yaml`)",
        file=file_label,
        row=mark.line + 1 if mark is not None else None,
    )


def is_json_text(path: Path) -> bool:
    """Whether the file is JSON (its first character, past a BOM and blanks, opens an object or
    array) rather than YAML."""
    with path.open("rb") as handle:
        text = handle.read(_SNIFF).removeprefix(b"\xef\xbb\xbf").lstrip(_BLANKS)
        while not text:
            more = handle.read(_SNIFF)
            if not more:
                return False
            text = more.lstrip(_BLANKS)
    return text[:1] in (b"{", b"[")


_SNIFF = 4096
_BLANKS = b" \t\r\n"


# YAML takes some 20 times JSON's time and 30 times its size in memory while it is read (the
# whole node graph is built first): past this size, JSON is asked for (about 9,000 pods as kubectl
# writes them, some 1 GB while read).
YAML_MAX_BYTES = 32 * 2**20


def load_pods(path: Path, file_label: str) -> list[Any]:
    """The pods of a `kubectl get pods` file, JSON or YAML (a YAML stream's documents, each a
    Pod or a List, one after the other; at most YAML_MAX_BYTES)."""
    if is_json_text(path):
        return pod_items(load_json(path, file_label), file_label)
    size = path.stat().st_size
    if size > YAML_MAX_BYTES:
        raise ImportFormatError(
            f"a YAML pod list of {size / 2**20:.1f} MiB is more than the "
            f"{YAML_MAX_BYTES / 2**20:g} MiB read as YAML; export it with `kubectl get pods -A "
            "-o json`, which reads many times faster in a fraction of the memory",
            file=file_label,
        )
    documents = load_yaml(path, file_label)
    if not documents:
        raise ImportFormatError(_NOT_A_LIST.format(found="an empty file"), file=file_label)
    return [item for document in documents for item in pod_items(document, file_label)]


_NOT_A_LIST = (
    "expected a pod List as `kubectl get pods -A -o json` (or `-o yaml`) prints it, found {found}"
)


def pod_items(document: Any, file_label: str) -> list[Any]:
    if not isinstance(document, dict):
        found = "text" if isinstance(document, str) else f"a {type(document).__name__}"
        raise ImportFormatError(_NOT_A_LIST.format(found=found), file=file_label)
    kind = document.get("kind")
    if kind == "Pod":
        return [document]
    items = document.get("items")
    if kind not in ("List", "PodList") or not isinstance(items, list):
        raise ImportFormatError(
            f"expected kind List or PodList with an `items` array, found kind {kind!r}",
            file=file_label,
            column="kind",
        )
    return items
