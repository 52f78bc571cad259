"""The shapes document: concrete problems that `attnws counterexamples --json` writes and
`attnws validate --shapes` reads.

Format: {"shapes": [record, ...]} (a bare list of records is accepted too; next to "shapes" only the
keys counterexamples writes, `DOCUMENT_KEYS`). A record holds the
geometry (op, dtype, tokens, batch, seq, heads, head_size, v_head_size, input_hidden,
qkv_hidden_sizes, format, qkv_bias, attn_bias, attn_bias_broadcast_batch,
attn_bias_broadcast_heads; MultiHeadAttention's records add kv_seq, past, mask, with_past,
with_present and unidirectional, and take its own formats), the configuration (sm, sdpa_kernel, env, flash_build, mea_build,
trt_runner) and free labels (label, pair, role, expected_backend, ...), which are kept as given.

Types are checked field by field (`documents.Fields`): dimensions are integers (tokens,
v_head_size and input_hidden may be null), qkv_hidden_sizes null or three non-negative integers,
flags JSON booleans, env an object of strings, op / dtype / format / trt_runner strings from their
sets. A label named like a misspelled field ("atn_bias") is refused rather than kept.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from .documents import DEFAULT_MAX_DOCUMENT_BYTES, DocumentError, Fields, json_type, read_user_json, short
from .devices import MAX_SM_COUNT
from .families import FAMILIES, dtype_problem, op_fields
from .hints import Geometry
from .options import RuntimeConfig, TrtRunner
from .problem import ELEMENT_SIZES, Op

# A record's geometry keys: the common ones, and every family's flags but those only the command line has.
GEOMETRY_KEYS = ("op", "dtype", "batch", "seq", "heads", "head_size", "v_head_size", "attn_bias",
                 "attn_bias_broadcast_batch", "attn_bias_broadcast_heads",
                 *dict.fromkeys(name for family in FAMILIES for names in family.fields.FLAGS.values() for name in names
                                if name not in family.fields.COMMAND_LINE_ONLY))
CONFIG_KEYS = ("sm", "sm_count", "sdpa_kernel", "env", "flash_build", "mea_build", "trt_build", "trt_runner")


def shape_record(g: Geometry, config: RuntimeConfig, env: Mapping[str, str] | None = None, **labels: Any) -> dict[str, Any]:
    """Return the JSON record of one concrete problem under one configuration."""
    return {
        "op": g.op.value, "dtype": "fp16" if g.element_size == 2 else "fp32", "batch": g.batch,
        "seq": g.seq, "heads": g.heads, "head_size": g.head_size, "v_head_size": g.hv,
        "qkv_bias": g.qkv_bias, "attn_bias": g.attn_bias,
        "attn_bias_broadcast_batch": g.attn_bias_broadcast_batch,
        "attn_bias_broadcast_heads": g.attn_bias_broadcast_heads,
        "sm": config.device.sm, "sm_count": config.device.sm_count, "sdpa_kernel": config.options.sdpa_kernel,
        "env": dict(env or {}),
        "flash_build": config.build.flash, "mea_build": config.build.mea, "trt_build": config.build.trt,
        "trt_runner": config.trt_runner.value,
        **op_fields(g.op).record_fields(g), **labels,
    }


def _foreign_key(op: Op, record: dict[str, Any]) -> str:
    """Return "KEY is OWNER's (op X)" for the first key the record sets that only another family's
    operators have ('' when none)."""
    own = op_fields(op).OWN_FIELDS[op]
    for family in FAMILIES:
        if op in family.ops:
            continue
        for owner, keys in family.fields.OWN_FIELDS.items():
            for key in keys:
                if key not in own and record.get(key) not in (None, False, 0, "none"):
                    return f"{key} is {owner.onnx_name}'s (op {owner.value})"
    return ""


def read_shape_record(record: Any, what: str = "shape record") -> tuple[Geometry, RuntimeConfig, dict[str, Any]]:
    """Return (geometry, configuration, labels) from one record. A field of the wrong type, or a
    label named like a misspelled field ("atn_bias"), raises DocumentError naming it; values the
    specification rejects are left to it."""
    f = Fields(record, what, near_misses_of=GEOMETRY_KEYS + CONFIG_KEYS)
    op = Op(f.string("op", choices=[o.value for o in Op], required=True))
    foreign = _foreign_key(op, record)
    if foreign:
        raise DocumentError(f"{what}: field {foreign}, not op {op.value}'s")
    dtype = f.string("dtype", "fp16", ELEMENT_SIZES)
    if dtype_problem(op, dtype):
        raise DocumentError(f"{what}: field {dtype_problem(op, dtype)}")
    geometry = Geometry(
        op=op,
        element_size=ELEMENT_SIZES[dtype], batch=f.integer("batch", required=True), seq=f.integer("seq", required=True),
        heads=f.integer("heads", required=True), head_size=f.integer("head_size", required=True),
        v_head_size=f.integer("v_head_size", optional=True), **op_fields(op).read_record_fields(op, f), qkv_bias=f.boolean("qkv_bias"), attn_bias=f.boolean("attn_bias"),
        attn_bias_broadcast_batch=f.boolean("attn_bias_broadcast_batch"),
        attn_bias_broadcast_heads=f.boolean("attn_bias_broadcast_heads"),
    )
    config = RuntimeConfig.make(
        sm=f.integer("sm", 80), sdpa_kernel=f.integer("sdpa_kernel", 0), env=f.string_map("env"),
        sm_count=f.integer("sm_count", None, optional=True, lo=1, hi=MAX_SM_COUNT), flash_build=f.boolean("flash_build", True), mea_build=f.boolean("mea_build", True),
        trt_build=f.boolean("trt_build", True),
        trt_runner=f.string("trt_runner", "auto", [r.value for r in TrtRunner]),
    )
    labels = {k: v for k, v in record.items() if k not in GEOMETRY_KEYS + CONFIG_KEYS}
    return geometry, config, labels


# The keys of the object form: what `attnws counterexamples --json` writes around the shapes.
DOCUMENT_KEYS = ("shapes", "op", "target", "searches", "max_elements", "schema_version", "ort_version")


def read_shapes_document(document: Any, what: str = "shapes document") -> list[tuple[Geometry, RuntimeConfig, dict[str, Any]]]:
    """Return every record of a shapes document: {"shapes": [record, ...]} (next to "shapes", only
    the keys `DOCUMENT_KEYS` names: another one, "sm" or "shapez", would be silently ignored) or a
    bare list. An empty list is a document without shapes, which `attnws validate` reports."""
    records = document.get("shapes") if isinstance(document, Mapping) else document
    if not isinstance(records, list):
        raise DocumentError(f"{what} is {json_type(document)} ({short(document)}); expected "
                            f"{{\"shapes\": [...]}} or a list of shape records")
    if isinstance(document, Mapping):
        Fields(document, what, known=DOCUMENT_KEYS)
    return [read_shape_record(r, f"{what}, record {i}") for i, r in enumerate(records, 1)]


def load_shapes_document(source: str | os.PathLike, max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Any:
    """Return the JSON document in the regular file `source` ('-': standard input), read through
    `documents` (size limit, UTF-8, bounded JSON); `read_shapes_document` checks its records."""
    return read_user_json(source, "shapes document", max_bytes)
