"""Example packed encoders: every layer resolves and equals the spec's estimate for the same shapes."""

from __future__ import annotations

import pytest

from attnws.model import ShapeBounds, analyze_model, node_target
from attnws.model.examples import (
    DIM_BATCH, DIM_BATCH_PLUS_ONE, DIM_SEQ, DIM_TOKENS, EncoderSpec, packed_encoder,
)
from attnws.spec.estimate import estimate_geometry
from attnws.spec.hints import Geometry
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import ELEMENT_SIZES, Op
from attnws.spec.packed.problem import QkvFormat

T, B, S, N, H = 24, 4, 8, 4, 16
BOUNDS = ShapeBounds({DIM_TOKENS: T, DIM_BATCH: B, DIM_SEQ: S, DIM_BATCH_PLUS_ONE: B + 1})
SMALL = dict(layers=3, hidden=N * H, heads=N, ffn=2 * N * H)

SPECS = {
    "pmha-packed-fp16": EncoderSpec(**SMALL),
    "pmha-packed-fp32": EncoderSpec(**SMALL, dtype="fp32"),
    "pmha-packed-qkv-bias": EncoderSpec(**SMALL, qkv_bias=True),
    "pmha-separate-fp16": EncoderSpec(**SMALL, pmha_format=QkvFormat.SEPARATE),
    "pmha-separate-bias-broadcast-batch": EncoderSpec(**SMALL, pmha_format=QkvFormat.SEPARATE, qkv_bias=True,
                                                      attention_bias=(True, False)),
    "pmha-packed-bias-full-fp32": EncoderSpec(**SMALL, dtype="fp32", attention_bias=(False, False)),
    "pa-fp16": EncoderSpec(**SMALL, op=Op.PA),
    "pa-qkv-hidden-sizes-fp16": EncoderSpec(**SMALL, op=Op.PA, qkv_hidden_sizes=True),
    "pa-qkv-hidden-sizes-fp32": EncoderSpec(**SMALL, op=Op.PA, qkv_hidden_sizes=True, dtype="fp32"),
    "pa-bias-broadcast-heads": EncoderSpec(**SMALL, op=Op.PA, attention_bias=(False, True)),
    "pa-bias-broadcast-both": EncoderSpec(**SMALL, op=Op.PA, attention_bias=(True, True)),
}


def geometry(spec: EncoderSpec) -> Geometry:
    """Return the geometry one layer of the encoder has at BOUNDS."""
    bias = spec.attention_bias
    return Geometry(
        op=spec.op, element_size=ELEMENT_SIZES[spec.dtype], batch=B, seq=S, heads=N, head_size=H, tokens=T,
        qkv_hidden_sizes=(N * H,) * 3 if spec.qkv_hidden_sizes else None, pmha_format=spec.pmha_format,
        qkv_bias=spec.qkv_bias, attn_bias=bias is not None,
        attn_bias_broadcast_batch=bool(bias and bias[0]), attn_bias_broadcast_heads=bool(bias and bias[1]),
    )


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_layer_equals_the_spec_estimate(name):
    spec = SPECS[name]
    report = analyze_model(packed_encoder(spec), BOUNDS)
    expected = estimate_geometry(geometry(spec))
    assert expected.ok
    assert [n.name for n in report.nodes] == [f"attention_{i}" for i in range(spec.layers)]
    assert all(n.estimate == expected for n in report.nodes)
    assert report.complete
    assert report.sum_total_bytes == spec.layers * expected.total_workspace_bytes
    assert report.peak_total_bytes == expected.total_workspace_bytes
    assert report.nodes[-1].estimate.requirements() == expected.requirements()


@pytest.mark.parametrize("name", sorted(SPECS))
def test_node_target_reads_back_the_same_estimate(name):
    report = analyze_model(packed_encoder(SPECS[name]), BOUNDS)
    target = node_target(report.nodes[0])
    assert target.batch.hi == B and target.seq.hi == S and target.tokens.hi == T and target.heads.exact
    assert estimate_geometry(target.max_geometry(), target.config) == report.nodes[0].estimate


def test_device_flags_reach_every_node():
    config = RuntimeConfig.make(sm=75, sdpa_kernel=2)
    report = analyze_model(packed_encoder(SPECS["pmha-separate-fp16"]), BOUNDS, config)
    expected = estimate_geometry(geometry(SPECS["pmha-separate-fp16"]), config)
    assert all(n.estimate == expected for n in report.nodes)
    assert expected != estimate_geometry(geometry(SPECS["pmha-separate-fp16"]))


def test_bert_base_default_resolves_twelve_layers():
    report = analyze_model(packed_encoder(), ShapeBounds({DIM_TOKENS: 4096, DIM_BATCH: 32, DIM_SEQ: 128,
                                                          DIM_BATCH_PLUS_ONE: 33}))
    expected = estimate_geometry(Geometry(op=Op.PMHA, element_size=2, batch=32, seq=128, heads=12, head_size=64,
                                          tokens=4096))
    assert len(report.nodes) == 12 and all(n.estimate == expected for n in report.nodes)
