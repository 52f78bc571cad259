"""Files and documents a user names: the one place attnws opens them, and the schema checks on
what they hold.

`open_user_file` is the only function that opens a user's file (target files, shapes documents,
model files), and `resolve_inside` the only one that looks at the files a model references
(external data), never outside the model's folder. Every file-system call of attnws goes through
this module's `os`, which the fuzz suites patch to see each path examined. The rules:

- regular files only: a FIFO, a device (`/dev/zero`), a directory or a socket is refused before a
  byte is read. The path is stat-ed first, so a device is never opened, then opened non-blocking
  (so a FIFO swapped in meanwhile cannot block) and checked again on the open descriptor;
- a size limit enforced while reading, never taken from `stat` alone (a file that grows, or a
  `/proc` file whose size reads 0, stops at the limit);
- text is UTF-8 (a leading byte-order mark is dropped);
- JSON: nesting at most MAX_JSON_DEPTH deep, integers of at most MAX_JSON_INT_DIGITS digits, no
  NaN / Infinity, no key given twice in one object, no lone surrogate in a string.

`Fields` reads one JSON object against its schema: each accessor names the document, the field and
the type it expects (booleans are JSON `true` / `false`, never a string's truthiness). Every
failure is a `DocumentError` (an `InvalidArgument`); standard library only.
"""

from __future__ import annotations

import difflib
import errno
import functools
import json
import math
import os
import re
import stat
import sys
from typing import Any, BinaryIO, Collection, Iterable, Mapping

from .errors import InvalidArgument

STDIN = "-"
DEFAULT_MAX_DOCUMENT_BYTES = 16 * 2**20  # 16 MiB: a shapes document of some 30,000 records
MAX_JSON_DEPTH = 32  # the documents attnws reads nest 4 deep
MAX_JSON_INT_DIGITS = 24  # int64 has 19 digits; anything longer is rejected later anyway
READ_CHUNK_BYTES = 2**20
MAX_SYMLINK_HOPS = 40  # Linux's own limit (ELOOP)
_PATH_SHOWN_CHARS = 160

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
)


class DocumentError(InvalidArgument):
    """A file or document a user gave that cannot be read, or whose contents break its schema."""

    status = "bad_document"


class DocumentTooLarge(DocumentError):
    """A file or document over its size limit, refused before or while it is read."""

    status = "document_too_large"


def display_path(path: Any) -> str:
    """Return the path as messages show it: quoted, and shortened in the middle when very long."""
    text = repr(os.fspath(path)) if isinstance(path, (str, bytes, os.PathLike)) else repr(path)
    if len(text) <= _PATH_SHOWN_CHARS:
        return text
    half = _PATH_SHOWN_CHARS // 2
    return f"{text[:half]}...{text[-half:]} ({len(text)} characters)"


def _os_reason(error: OSError) -> str:
    if error.errno == errno.ENOENT:
        return "no such file"
    return error.strerror or type(error).__name__


def _file_kind(mode: int) -> str:
    for test, kind in _FILE_KINDS:
        if test(mode):
            return kind
    return "not a regular file"


def open_user_file(path: str | os.PathLike, what: str) -> BinaryIO:
    """Return the regular file at `path` opened for binary reading, or raise DocumentError without
    opening anything else (see the module docstring)."""
    shown = f"{what} {display_path(path)}"
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise DocumentError(f"cannot read {shown}: {_os_reason(error)}") from None
    except ValueError as error:  # an embedded NUL, or a path the file system cannot encode
        raise DocumentError(f"cannot read {shown}: {error}") from None
    if not stat.S_ISREG(mode):
        raise DocumentError(f"{shown} is {_file_kind(mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise DocumentError(f"cannot read {shown}: {_os_reason(error)}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise DocumentError(f"{shown} is {_file_kind(mode)}, not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def resolve_inside(folder: str | os.PathLike, location: str, what: str,
                   missing_ok: bool = False) -> tuple[str, os.stat_result | None]:
    """Return the real path and `lstat` of the file that the relative path `location` names below
    `folder`, following symbolic links only while each step stays below the folder's real path.
    With `missing_ok`, a name that does not exist (at any step, the path so far inside the
    folder) gives that path and None instead of an error.

    Nothing outside the folder is examined: a link whose target leaves it is refused without a
    look at the target, and the refusal says nothing about what lies outside. `location` itself
    must be relative, without `..` components. Raise DocumentError (`what` names the reference).
    """
    if "\0" in location:
        raise DocumentError(f"{what} {display_path(location)} holds a NUL character")
    if not location or location.startswith("/"):
        raise DocumentError(f"{what} {display_path(location)} must be a relative path inside the model's folder")
    if ".." in location.split("/"):
        raise DocumentError(f"{what} {display_path(location)} must be a relative path inside the model's folder "
                            f"(without '..')")
    root = os.path.realpath(folder)
    prefixes = {root, os.path.normpath(os.path.abspath(folder))}
    outside = DocumentError(f"{what} {display_path(location)} leads outside the model's folder through a symbolic link")
    parts = list(reversed(location.split("/")))
    current, info, hops = root, None, 0
    while parts:
        part = parts.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if current == root:
                raise outside
            current, info = os.path.dirname(current), None
            continue
        candidate = os.path.join(current, part)
        try:
            info = os.lstat(candidate)
            if not stat.S_ISLNK(info.st_mode):
                current = candidate
                continue
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise DocumentError(f"{what} {display_path(location)} goes through more than {MAX_SYMLINK_HOPS} symbolic links")
            target = os.readlink(candidate)
        except FileNotFoundError as error:
            if missing_ok and ".." not in parts:  # what stays to walk cannot climb back out
                return os.path.join(candidate, *reversed(parts)), None
            raise DocumentError(f"{what} {display_path(location)} cannot be read in the model's folder: "
                                f"{_os_reason(error)}") from None
        except OSError as error:
            raise DocumentError(f"{what} {display_path(location)} cannot be read in the model's folder: "
                                f"{_os_reason(error)}") from None
        if target.startswith("/"):
            base = next((p for p in prefixes if target == p or target.startswith(p.rstrip("/") + "/")), None)
            if base is None:
                raise outside
            target, current = target[len(base):], root
        parts.extend(reversed(target.split("/")))
        info = None
    if info is None:  # the walk ended on a directory reached through '..' or a link
        try:
            info = os.lstat(current)
        except OSError as error:
            raise DocumentError(f"{what} {display_path(location)} cannot be read in the model's folder: "
                                f"{_os_reason(error)}") from None
    return current, info


def is_readable(path: str) -> bool:
    """Return whether this process may read `path` (a path `resolve_inside` returned), without
    following a symbolic link or opening it."""
    follow = os.access not in os.supports_follow_symlinks
    try:
        return os.access(path, os.R_OK, follow_symlinks=follow)
    except (OSError, ValueError):
        return False


def _read_limited(stream: BinaryIO, shown: str, max_bytes: int, limit_name: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(min(READ_CHUNK_BYTES, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise DocumentTooLarge(f"{shown} is over the limit of {max_bytes:,} bytes{limit_name}")


def read_user_bytes(source: str | os.PathLike, what: str, max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
                    limit_name: str = "") -> bytes:
    """Return the bytes of the regular file `source` ('-': standard input), at most `max_bytes`.

    `what` names the file in messages ("target file"); `limit_name` names the flag that sets the
    limit (" (--max-bytes)")."""
    if not isinstance(max_bytes, int) or max_bytes < 0:
        raise InvalidArgument(f"max_bytes = {max_bytes!r} must be a non-negative integer")
    if isinstance(source, str) and source == STDIN:
        shown = f"{what} on standard input"
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise DocumentError(f"cannot read {shown}: standard input is closed")
        try:
            return _read_limited(stream, shown, max_bytes, limit_name)
        except OSError as error:
            raise DocumentError(f"cannot read {shown}: {_os_reason(error)}") from None
    shown = f"{what} {display_path(source)}"
    with open_user_file(source, what) as stream:
        try:
            size = os.fstat(stream.fileno()).st_size
            if size > max_bytes:
                raise DocumentTooLarge(f"{shown} is {size:,} bytes, over the limit of {max_bytes:,} bytes{limit_name}")
            return _read_limited(stream, shown, max_bytes, limit_name)
        except OSError as error:
            raise DocumentError(f"cannot read {shown}: {_os_reason(error)}") from None


def decode_text(data: bytes, shown: str) -> str:
    """Return `data` decoded as UTF-8 (without a leading byte-order mark), or raise DocumentError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DocumentError(f"{shown} is not UTF-8 text: byte {error.start} is {data[error.start:error.start + 1]!r}") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_user_text(source: str | os.PathLike, what: str, max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> str:
    """Return the UTF-8 text of the regular file `source` ('-': standard input)."""
    shown = f"{what} on standard input" if source == STDIN else f"{what} {display_path(source)}"
    return decode_text(read_user_bytes(source, what, max_bytes), shown)


def read_user_json(source: str | os.PathLike, what: str, max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Any:
    """Return the JSON value in the regular file `source` ('-': standard input), checked as
    `parse_json_text` checks it."""
    shown = f"{what} on standard input" if source == STDIN else f"{what} {display_path(source)}"
    return parse_json_text(read_user_text(source, what, max_bytes), shown)


# A string literal or a bracket: enough to measure nesting without parsing.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def _check_depth(text: str, shown: str) -> None:
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise DocumentError(f"{shown} nests deeper than {MAX_JSON_DEPTH} levels")
        elif token in "]}":
            depth -= 1


def _check_strings(value: Any, shown: str) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise DocumentError(f"{shown} holds a string with a lone surrogate ({short(item)})") from None
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_json_text(text: str, what: str) -> Any:
    """Return the JSON value of `text`, or raise DocumentError (`what` names the source): bounded
    nesting and integer length, no NaN / Infinity, no duplicate keys, no lone surrogates."""

    def parse_int(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_JSON_INT_DIGITS:
            raise DocumentError(f"{what} has an integer of {len(digits.lstrip('-'))} digits; "
                                f"at most {MAX_JSON_INT_DIGITS} are read")
        return int(digits)

    def parse_constant(name: str) -> Any:
        raise DocumentError(f"{what} holds {name}, which is not JSON")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise DocumentError(f"{what} gives key {short(key)} twice in one object")
            out[key] = value
        return out

    if not isinstance(text, str):
        raise DocumentError(f"{what} is {json_type(text)}, not JSON text")
    _check_depth(text, what)
    try:
        value = json.loads(text, parse_int=parse_int, parse_constant=parse_constant, object_pairs_hook=pairs)
    except json.JSONDecodeError as error:
        raise DocumentError(f"{what} is not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise DocumentError(f"{what} nests too deeply") from None
    _check_strings(value, what)
    return value


def json_type(value: Any) -> str:
    """Return the JSON name of a value's type, with an article ("a string", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def short(value: Any, limit: int = 60) -> str:
    """Return the value as JSON text (Python's repr where JSON has none), cut to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _with_suggestion(key: str, candidates: tuple[str, ...]) -> str:
    """Return the key as JSON text, with the closest candidate when one is close."""
    close = _near_miss(key, candidates, 0.6)
    return f"{short(key)} (did you mean {short(close)}?)" if close else short(key)


@functools.lru_cache(maxsize=1024)
def _near_miss(key: str, candidates: tuple[str, ...], cutoff: float = 0.8) -> str | None:
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=cutoff)
    return close[0] if close else None


class Fields:
    """One JSON object read against a schema. Each accessor returns a field's value (the default
    when the field is absent) or raises DocumentError naming the document, the field, what it
    holds and the type expected."""

    def __init__(self, data: Any, what: str, known: Collection[str] | None = None,
                 near_misses_of: Collection[str] = ()) -> None:
        """`known`: the only keys allowed (None: any). `near_misses_of`: keys whose misspellings
        are refused even where other free keys are allowed (a label "atn_bias" is a typo)."""
        if not isinstance(data, Mapping):
            raise DocumentError(f"{what} is {json_type(data)} ({short(data)}); expected a JSON object")
        self.data = data
        self.what = what
        for key in data:
            if not isinstance(key, str):
                raise DocumentError(f"{what}: key {short(key)} is {json_type(key)}; keys are strings")
        if known is not None:
            unknown = sorted(set(data) - set(known))
            if unknown:
                raise DocumentError(f"{what}: unknown key{'s' if len(unknown) > 1 else ''} "
                                    f"{', '.join(_with_suggestion(key, tuple(sorted(known))) for key in unknown)}; "
                                    f"known: {', '.join(sorted(known))}")
        if near_misses_of:
            candidates = tuple(near_misses_of)
            for key in data:
                if key not in near_misses_of:
                    close = _near_miss(key, candidates)
                    if close is not None:
                        raise DocumentError(f"{what}: unknown key {key!r}; did you mean {close!r}?")

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def wrong(self, key: str, expected: str) -> DocumentError:
        """Return the error for field `key`, which does not hold `expected`."""
        value = self.data[key]
        return DocumentError(f"{self.what}: field {key} = {short(value)} is {json_type(value)}; expected {expected}")

    def raw(self, key: str, default: Any = None) -> Any:
        """Return the field as given (the caller checks it)."""
        return self.data.get(key, default)

    def boolean(self, key: str, default: bool = False) -> bool:
        """Return a JSON boolean field."""
        if key not in self.data:
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            raise self.wrong(key, "a JSON boolean (true or false)")
        return value

    def number(self, key: str, *, optional: bool = False) -> float | None:
        """Return a non-negative finite JSON number field (None when absent, or null when `optional`)."""
        if key not in self.data or (optional and self.data[key] is None):
            return None
        value = self.data[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < math.inf:
            raise self.wrong(key, "a non-negative number" + ("" if not optional else " or null"))
        return float(value)

    def integer(self, key: str, default: int | None = None, *, required: bool = False, optional: bool = False,
                lo: int | None = None, hi: int | None = None) -> int | None:
        """Return an integer field; `required`: absent is an error; `optional`: null reads as None."""
        if key not in self.data or (optional and self.data[key] is None):
            if required:
                raise DocumentError(f"{self.what}: field {key} is required (an integer)")
            return default
        value = self.data[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.wrong(key, "an integer" + ("" if not optional else " or null"))
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = f"[{'' if lo is None else lo}, {'' if hi is None else hi}]"
            raise DocumentError(f"{self.what}: field {key} = {value} is outside {bounds}")
        return value

    def string(self, key: str, default: str | None = None, choices: Iterable[str] | None = None, *,
               required: bool = False) -> str | None:
        """Return a string field; with `choices`, one of them; `required`: absent is an error."""
        allowed = None if choices is None else list(choices)
        expected = "a string" if allowed is None else f"one of the strings {allowed}"
        if key not in self.data:
            if required:
                raise DocumentError(f"{self.what}: field {key} is required ({expected})")
            return default
        value = self.data[key]
        if not isinstance(value, str):
            raise self.wrong(key, expected)
        if allowed is not None and value not in allowed:
            raise DocumentError(f"{self.what}: field {key} = {short(value)}; expected {expected}")
        return value

    def string_map(self, key: str) -> dict[str, str]:
        """Return an object of string values (null or absent: empty)."""
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.wrong(key, "an object of string values")
        for name, item in value.items():
            if not isinstance(item, str):
                raise DocumentError(f"{self.what}: field {key}.{name} = {short(item)} is {json_type(item)}; "
                                    f"expected a string")
        return dict(value)

    def int_list(self, key: str, length: int, lo: int = 0) -> tuple[int, ...] | None:
        """Return a list of exactly `length` integers, each >= lo (null or absent: None)."""
        value = self.data.get(key)
        if value is None:
            return None
        expected = f"null or a list of {length} integers >= {lo}"
        if not isinstance(value, list) or len(value) != length:
            raise self.wrong(key, expected)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= lo for v in value):
            raise self.wrong(key, expected)
        return tuple(value)
