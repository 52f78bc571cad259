"""The shapes document: concrete problems that `attnws counterexamples --json` writes and
`attnws validate --shapes` reads.

Format: {"shapes": [record, ...]} (a bare list of records is accepted too). A record holds the
geometry (op, dtype, tokens, batch, seq, heads, head_size, v_head_size, input_hidden,
qkv_hidden_sizes, format, qkv_bias, attn_bias, attn_bias_broadcast_batch,
attn_bias_broadcast_heads), the configuration (sm, sdpa_kernel, env, flash_build, mea_build,
trt_runner) and free labels (label, pair, role, expected_backend, ...), which are kept as given.
"""

from __future__ import annotations

from typing import Any, Mapping

from .errors import InvalidArgument
from .hints import Geometry
from .options import RuntimeConfig
from .problem import ELEMENT_SIZES, Op, QkvFormat, parse_enum

GEOMETRY_KEYS = ("op", "dtype", "tokens", "batch", "seq", "heads", "head_size", "v_head_size", "input_hidden",
                 "qkv_hidden_sizes", "format", "qkv_bias", "attn_bias", "attn_bias_broadcast_batch",
                 "attn_bias_broadcast_heads")
CONFIG_KEYS = ("sm", "sdpa_kernel", "env", "flash_build", "mea_build", "trt_runner")


def shape_record(g: Geometry, config: RuntimeConfig, env: Mapping[str, str] | None = None, **labels: Any) -> dict[str, Any]:
    """Return the JSON record of one concrete problem under one configuration."""
    return {
        "op": g.op.value, "dtype": "fp16" if g.element_size == 2 else "fp32", "tokens": g.t, "batch": g.batch,
        "seq": g.seq, "heads": g.heads, "head_size": g.head_size, "v_head_size": g.hv,
        "input_hidden": g.input_hidden, "qkv_hidden_sizes": list(g.qkv_hidden_sizes) if g.qkv_hidden_sizes else None,
        "format": g.pmha_format.value, "qkv_bias": g.qkv_bias, "attn_bias": g.attn_bias,
        "attn_bias_broadcast_batch": g.attn_bias_broadcast_batch,
        "attn_bias_broadcast_heads": g.attn_bias_broadcast_heads,
        "sm": config.device.sm, "sdpa_kernel": config.options.sdpa_kernel, "env": dict(env or {}),
        "flash_build": config.build.flash, "mea_build": config.build.mea, "trt_runner": config.trt_runner.value,
        **labels,
    }


def _int(record: Mapping[str, Any], key: str, required: bool = True) -> int | None:
    value = record.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"shape record field {key} = {value!r} must be an integer")
    return value


def read_shape_record(record: Mapping[str, Any]) -> tuple[Geometry, RuntimeConfig, dict[str, Any]]:
    """Return (geometry, configuration, labels) from one record, or raise InvalidArgument."""
    if not isinstance(record, Mapping):
        raise InvalidArgument(f"shape record {record!r} must be a JSON object")
    dtype = record.get("dtype", "fp16")
    if dtype not in ELEMENT_SIZES:
        raise InvalidArgument(f"shape record dtype = {dtype!r} must be fp16 or fp32")
    sizes = record.get("qkv_hidden_sizes")
    geometry = Geometry(
        op=parse_enum(Op, record.get("op"), "op"), element_size=ELEMENT_SIZES[dtype],
        batch=_int(record, "batch"), seq=_int(record, "seq"), heads=_int(record, "heads"),
        head_size=_int(record, "head_size"), v_head_size=_int(record, "v_head_size", False),
        tokens=_int(record, "tokens", False), input_hidden=_int(record, "input_hidden", False),
        qkv_hidden_sizes=tuple(sizes) if sizes else None,
        pmha_format=parse_enum(QkvFormat, record.get("format", "packed"), "format"),
        qkv_bias=bool(record.get("qkv_bias", False)), attn_bias=bool(record.get("attn_bias", False)),
        attn_bias_broadcast_batch=bool(record.get("attn_bias_broadcast_batch", False)),
        attn_bias_broadcast_heads=bool(record.get("attn_bias_broadcast_heads", False)),
    )
    config = RuntimeConfig.make(
        sm=record.get("sm", 80), sdpa_kernel=record.get("sdpa_kernel", 0), env=record.get("env") or {},
        flash_build=record.get("flash_build", True), mea_build=record.get("mea_build", True),
        trt_runner=record.get("trt_runner", "auto"),
    )
    labels = {k: v for k, v in record.items() if k not in GEOMETRY_KEYS + CONFIG_KEYS}
    return geometry, config, labels


def read_shapes_document(document: Any) -> list[tuple[Geometry, RuntimeConfig, dict[str, Any]]]:
    """Return every record of a shapes document."""
    records = document.get("shapes") if isinstance(document, Mapping) else document
    if not isinstance(records, list):
        raise InvalidArgument("a shapes document is {\"shapes\": [...]} or a list of shape records")
    return [read_shape_record(r) for r in records]
