"""What an import batch may show of where its file was: the file's name, never server folders.

ImportBatch.file_name is the path the worker reads (for a local file, an absolute path on the
server: /tmp/..., the data folder). Pages and the API show `public_file_name` instead; bucket
URIs (s3://, gs://, az://, https://) and labels such as "Kubernetes API (...)" name the
source, not the server, and are kept whole. Error texts may quote the path: `public_text`
strips the folders of every absolute path in them.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# The folders of an absolute path: a "/" not following a word character, ":", "/" or "." (so
# not inside a URI or a relative path), then folder names each ending in "/".
_POSIX_FOLDERS = re.compile(r"(?<![\w:/.~-])/(?:[^\s/:'\"]+/)+")
_WINDOWS_FOLDERS = re.compile(r"\b[A-Za-z]:\\(?:[^\s\\:'\"]+\\)*")


def public_file_name(file_name: str) -> str:
    """The name to show for a batch's file_name: a URI or label whole, a path's last part."""
    if _URI.match(file_name):
        return file_name
    if file_name.startswith("/"):
        return PurePosixPath(file_name).name or file_name
    if re.match(r"^[A-Za-z]:\\", file_name):
        return PureWindowsPath(file_name).name or file_name
    return file_name


def public_text(text: str) -> str:
    """text with the folders of every absolute server path taken out (the file names stay)."""
    return _WINDOWS_FOLDERS.sub("", _POSIX_FOLDERS.sub("", text))
