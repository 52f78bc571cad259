"""Errors for model files: each names the file, and the node or tensor when there is one.

Both root at `WorkspaceError` through `InvalidArgument` (so also `ValueError`): a bad model is the
user's input, never an attnws bug.
"""

from __future__ import annotations

from ..spec.errors import InvalidArgument


class BadModel(InvalidArgument):
    """A model file that is not a readable ONNX model, or one ONNX Runtime would refuse to load."""

    status = "bad_model"


class ModelTooLarge(BadModel):
    """A model file over the configured size limit, refused before it is parsed."""

    status = "model_too_large"
