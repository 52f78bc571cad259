"""One exception tree for every error attnws raises.

`WorkspaceError` is the root. User-facing errors also inherit the matching builtin so that callers
who only know Python's exceptions still catch them. `InternalError` and `EncodingMismatch` are our
own bugs, never the user's input.
"""

from __future__ import annotations


class WorkspaceError(Exception):
    """Root of every error raised by attnws."""

    status = "error"


class InvalidArgument(WorkspaceError, ValueError):
    """A shape, attribute, option or route that ONNX Runtime rejects with INVALID_ARGUMENT."""

    status = "invalid_argument"


class NodeRejected(InvalidArgument):
    """A target (problem flags or a target file) whose node ONNX Runtime rejects: at the target's
    maxima, or in an attribute every shape shares. The problem, not the command line: every
    command says ORT's check, with the check's own `status`, and exits as `dispatch` does on the
    same node (`EXIT_REJECTED`), never as a usage error."""

    def __init__(self, message: str, status: str = InvalidArgument.status) -> None:
        super().__init__(message)
        self.status = status


class WorkspaceOverflow(WorkspaceError, OverflowError):
    """A size computation that overflows 64-bit size_t (ONNX Runtime's Overflow status)."""

    status = "overflow"


class Unavailable(WorkspaceError, ValueError):
    """A route or estimate ONNX Runtime itself reports as unavailable (its Unavailable status):
    valid, but not sized by its graph-free recipes (a cuDNN route, an XQA head geometry)."""

    status = "unavailable"


class Unsupported(WorkspaceError, ValueError):
    """A valid ONNX Runtime input that attnws does not model (named in the message): an estimate
    for it is unavailable, never a guess."""

    status = "unsupported"


class UsageError(WorkspaceError, ValueError):
    """A request attnws cannot interpret (unknown backend name, malformed option string)."""

    status = "usage"


class InternalError(WorkspaceError):
    """An attnws bug: an invariant of our own code does not hold."""

    status = "internal"


class EncodingMismatch(InternalError):
    """The solver's encoding disagrees with the concrete specification on a replayed model."""

    status = "encoding_mismatch"
