"""attnws.spec: the executable specification of ONNX Runtime's attention workspaces.

Pure Python, standard library only. Import from here; the submodules are the implementation.
"""

from .aggregate import Aggregate, aggregate, backends_from_mask
from .containment import overlapping_views, validate_recipe
from .dispatch import Dispatch, dispatch
from .domain import CONCRETE
from .errors import (
    EncodingMismatch,
    InternalError,
    InvalidArgument,
    UsageError,
    WorkspaceError,
    WorkspaceOverflow,
)
from .estimate import (
    Classification,
    Estimate,
    Requirement,
    estimate_exact,
    estimate_from_hints,
    estimate_geometry,
    runtime_problem,
)
from .hints import MISSING, NO_SHAPE, Geometry
from .inputs import geometry_hints
from .layout import Recipe, View, views
from .options import BuildFlags, Device, KernelOptions, RuntimeConfig, TrtRunner
from .problem import Backend, Op, QkvLayout
from .packed.builder import build_pa_problem, build_pmha_problem
from .packed.problem import Problem, QkvFormat, problem_from_fields
from .reachability import HeadDomain, reachability, reachable_backends
from .recipe import recipe

__all__ = [
    "Aggregate", "Backend", "BuildFlags", "CONCRETE", "Classification", "Device", "Dispatch",
    "EncodingMismatch", "Estimate", "Geometry", "HeadDomain", "InternalError", "InvalidArgument",
    "KernelOptions", "MISSING", "NO_SHAPE", "Op", "Problem", "QkvFormat", "QkvLayout", "Recipe",
    "Requirement", "RuntimeConfig", "TrtRunner", "UsageError", "View", "WorkspaceError",
    "WorkspaceOverflow", "aggregate", "backends_from_mask", "build_pa_problem", "build_pmha_problem",
    "dispatch", "estimate_exact", "estimate_from_hints", "estimate_geometry", "geometry_hints",
    "overlapping_views", "problem_from_fields", "reachability", "reachable_backends", "recipe",
    "runtime_problem", "validate_recipe", "views",
]
