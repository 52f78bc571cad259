"""One row per validation branch: the call, the typed error it must raise, and the offending
value its message must name. Ids read like the call."""

from __future__ import annotations

import pytest

from attnws.spec import (
    Backend,
    InvalidArgument,
    RuntimeConfig,
    WorkspaceError,
    WorkspaceOverflow,
    build_pa_problem,
    build_pmha_problem,
    problem_from_fields,
    recipe,
    Op,
)
from attnws.spec.hints import parse_hint
from attnws.spec.options import KernelOptions
from attnws.spec.target import DimRange, target_from_dict

from .helpers import pa, pmha

I32 = 2**31 - 1


def pa_build(**changes):
    args = dict(input=[6, 6], weights=[6, 24], bias=[24], token_offset=[2, 4], cumulative_sequence_length=[3],
                element_size=2, num_heads=2)
    args.update(changes)
    return lambda: build_pa_problem(args.pop("input"), args.pop("weights"), args.pop("bias"), args.pop("token_offset"),
                                    args.pop("cumulative_sequence_length"), **args)


def pmha_build(**changes):
    args = dict(query=[6, 2, 3, 4], key=None, value=None, bias=None, token_offset=[2, 4],
                cumulative_sequence_length=[3], attention_bias=None, element_size=2, num_heads=2)
    args.update(changes)
    return lambda: build_pmha_problem(args.pop("query"), args.pop("key"), args.pop("value"), args.pop("bias"),
                                      args.pop("token_offset"), args.pop("cumulative_sequence_length"),
                                      args.pop("attention_bias"), **args)


SEPARATE = dict(query=[6, 8], key=[6, 8], value=[6, 8])

ROWS = [
    ("pa(element_size=3)", pa_build(element_size=3), InvalidArgument, "element_size = 3"),
    ("pa(num_heads=0)", pa_build(num_heads=0), InvalidArgument, "num_heads = 0"),
    ("pa(input rank 3)", pa_build(input=[6, 6, 1]), InvalidArgument, r"input must have rank 2.*\[6, 6, 1\]"),
    ("pa(input[0]=-1)", pa_build(input=[-1, 6]), InvalidArgument, r"input.shape\[0\] = -1"),
    ("pa(input[1]=2**31)", pa_build(input=[6, 2**31]), InvalidArgument, r"input.shape\[1\] = 2147483648 exceeds"),
    ("pa(weights rank 1)", pa_build(weights=[6]), InvalidArgument, "weights must have rank 2"),
    ("pa(bias rank 2)", pa_build(bias=[24, 1]), InvalidArgument, "bias must have rank 1"),
    ("pa(token_offset rank 1)", pa_build(token_offset=[8]), InvalidArgument, "token_offset must have rank 2"),
    ("pa(cumulative rank 2)", pa_build(cumulative_sequence_length=[3, 1]), InvalidArgument,
     "cumulative_sequence_length must have rank 1"),
    ("pa(weights[0]=5)", pa_build(weights=[5, 24]), InvalidArgument, r"weights.shape\[0\] = 5"),
    ("pa(bias=[23])", pa_build(bias=[23]), InvalidArgument, r"bias.shape\[0\] = 23"),
    ("pa(cumulative=[4])", pa_build(cumulative_sequence_length=[4]), InvalidArgument, r"= 4 must equal B \+ 1 = 3"),
    ("pa(qkv_hidden_sizes=[8,8])", pa_build(qkv_hidden_sizes=[8, 8]), InvalidArgument, r"\[8, 8\] must contain exactly three"),
    ("pa(qkv_hidden_sizes=[-8,...])", pa_build(qkv_hidden_sizes=[-8, 8, 8]), InvalidArgument, "q hidden size = -8"),
    ("pa(q != k)", pa_build(qkv_hidden_sizes=[8, 6, 10]), InvalidArgument, "q = 8, k = 6"),
    ("pa(q % N)", pa_build(num_heads=3, qkv_hidden_sizes=[8, 8, 8]), InvalidArgument, "num_heads = 3"),
    ("pa(sum != bias)", pa_build(qkv_hidden_sizes=[8, 8, 4]), InvalidArgument, "q \\+ k \\+ v = 20"),
    ("pa(attention_bias rank 3)", pa_build(attention_bias=[2, 2, 4]), InvalidArgument, "attention_bias must have rank 4"),
    ("pa(attention_bias [2,2,4,5])", pa_build(attention_bias=[2, 2, 4, 5]), InvalidArgument, r"\[2, 2, 4, 5\]"),
    ("pa(attention_bias [3,...])", pa_build(attention_bias=[3, 2, 4, 4]), InvalidArgument, r"\[3, 2, 4, 4\]"),
    ("pa(T > B*S)", pa_build(input=[9, 6]), InvalidArgument, "T = 9 exceeds B \\* S = 8"),
    ("pmha(query rank 3)", pmha_build(query=[6, 2, 12]), InvalidArgument, r"rank 2 or 4.*\[6, 2, 12\]"),
    ("pmha(packed with key)", pmha_build(key=[6, 8]), InvalidArgument, "key and value must be absent"),
    ("pmha(packed [6,2,2,4])", pmha_build(query=[6, 2, 2, 4]), InvalidArgument, r"\[6, 2, 2, 4\]"),
    ("pmha(packed N*H > int32)", pmha_build(query=[6, 2, 3, 2**30]), InvalidArgument, "N \\* H = 2147483648"),
    ("pmha(separate without value)", pmha_build(query=[6, 8], key=[6, 8]), InvalidArgument, "must all be present"),
    ("pmha(key != query)", pmha_build(**{**SEPARATE, "key": [6, 4]}), InvalidArgument, r"key shape \[6, 4\]"),
    ("pmha(value T mismatch)", pmha_build(**{**SEPARATE, "value": [5, 8]}), InvalidArgument, r"value.shape\[0\] = 5"),
    ("pmha(hidden % N)", pmha_build(**{**SEPARATE, "value": [6, 7]}), InvalidArgument, r"7 \(V\)"),
    ("pmha(qkv sum > int32)", pmha_build(query=[6, 2**30], key=[6, 2**30], value=[6, 8]), InvalidArgument,
     "sum 2147483656"),
    ("pmha(bias length)", pmha_build(bias=[23]), InvalidArgument, "QKV bias length 23"),
    ("pmha(bias rank 2)", pmha_build(bias=[24, 1]), InvalidArgument, r"QKV bias must have rank 1.*\[24, 1\]"),
    ("recipe(pa, flash)", lambda: recipe(pa(), Backend.FLASH), InvalidArgument, "no Flash route"),
    ("recipe(trt, runner unavailable)", lambda: recipe(pmha(), Backend.TRT, trt_runner_available=False),
     InvalidArgument, "runner unavailable"),
    ("recipe(trt, H != Hv)", lambda: recipe(pmha(fmt="separate", v_head_size=8), Backend.TRT), InvalidArgument,
     "H = 4, Hv = 8"),
    ("recipe(flash, attention bias)", lambda: recipe(pmha(attn_bias=True), Backend.FLASH), InvalidArgument,
     "attention bias present"),
    ("recipe(flash, B = 65536)", lambda: recipe(pmha(batch=65536, seq=1, tokens=1), Backend.FLASH),
     InvalidArgument, "B = 65536"),
    ("recipe(flash, S = 2**31-127)", lambda: recipe(pmha(batch=1, seq=I32 - 126, tokens=1, heads=1, head_size=8),
                                                    Backend.FLASH), InvalidArgument, "S = 2147483521"),
    ("recipe(mea, S + 63 > int32)", lambda: recipe(pmha(batch=1, seq=I32 - 62, tokens=1, heads=1, head_size=8),
                                                   Backend.MEA), InvalidArgument, "query-block rounding: S = 2147483585"),
    ("recipe(mea, bias batch stride > int64)", lambda: recipe(
        pmha(batch=1, seq=I32 - 100, tokens=1, heads=3, head_size=8, fmt="separate", attn_bias=True), Backend.MEA),
     InvalidArgument, "attention-bias batch stride"),
    ("recipe(mea, accumulator > size_t)", lambda: recipe(problem_from_fields(Op.PMHA, dict(
        element_size=2, token_count=1, batch_size=65535, sequence_length=65535, num_heads=65535,
        hidden_size=65535 * 32768, v_hidden_size=65535 * 32768, qk_head_size=32768, v_head_size=32768,
        qkv_format="separate", qkv_materialization_index_width=4)), Backend.MEA),
     WorkspaceOverflow, "mea accumulator"),
    ("recipe(unfused, B*N > int32)", lambda: recipe(pmha(batch=65535, seq=1, tokens=1, heads=32769, head_size=1),
                                                    Backend.UNFUSED), InvalidArgument, r"unfused B \* N = 65535 \* 32769"),
    ("recipe(unfused, B*N*S > int32)", lambda: recipe(pmha(batch=65535, seq=3, tokens=1, heads=16384, head_size=1),
                                                      Backend.UNFUSED), InvalidArgument, r"unfused B \* N \* S = "),
    ("recipe(unfused, S*H > int32)", lambda: recipe(pmha(batch=1, seq=4, tokens=1, heads=1, head_size=2**29,
                                                         v_head_size=8, fmt="separate"), Backend.UNFUSED),
     InvalidArgument, r"unfused S \* H = 4 \* 536870912"),
    ("recipe(unfused, S*Hv > int32)", lambda: recipe(pmha(batch=1, seq=2, tokens=1, heads=1, head_size=8,
                                                          v_head_size=2**30, fmt="separate"), Backend.UNFUSED),
     InvalidArgument, r"unfused S \* Hv = 2 \* 1073741824"),
    ("recipe(unfused, B*N*S*H/w > int32)", lambda: recipe(pmha(batch=64, seq=2**14, tokens=1, heads=1, head_size=2**15),
                                                          Backend.UNFUSED), InvalidArgument, r"B \* N \* S \* H / w"),
    ("recipe(unfused, B*S*N*(2H+Hv)/w > int32)", lambda: recipe(
        pmha(batch=64, seq=2**14, tokens=1, heads=1, head_size=4096), Backend.UNFUSED),
     InvalidArgument, r"B \* S \* N \* \(2H \+ Hv\) / w"),
    ("recipe(mea, bias extent > int64)", lambda: recipe(
        pmha(batch=3, seq=I32 - 100, tokens=1, heads=1, head_size=8, fmt="separate", attn_bias=True), Backend.MEA),
     InvalidArgument, "attention-bias extent"),
    ("recipe(mea fp32, bias bytes > size_t)", lambda: recipe(
        pmha(batch=2, seq=I32 - 100, tokens=1, heads=1, head_size=8, fmt="separate", attn_bias=True, dtype=4),
        Backend.MEA), WorkspaceOverflow, "mea attention-bias bytes"),
    ("recipe(unfused, B = 65536)", lambda: recipe(pmha(batch=65536, seq=1, tokens=1), Backend.UNFUSED),
     InvalidArgument, "B = 65536"),
    ("recipe(mea, T*N*(2H+Hv)/w > int32)", lambda: recipe(
        pmha(batch=1, seq=2796203, heads=1, head_size=1024, qkv_bias=True, fmt="separate"), Backend.MEA),
     InvalidArgument, r"T \* N \* \(2H \+ Hv\) / w = 2796203 \* 1 \* 768"),
    ("recipe(width 4 on H=2)", lambda: recipe(problem_from_fields(Op.PMHA, dict(
        element_size=2, token_count=1, batch_size=1, sequence_length=1, num_heads=1, hidden_size=2, v_hidden_size=2,
        qk_head_size=2, v_head_size=2, qkv_materialization_index_width="vector4")), Backend.UNFUSED),
     InvalidArgument, "index width 4"),
    ("env(ORT_DISABLE_FLASH_ATTENTION=yes)", lambda: KernelOptions.resolve(0, {"ORT_DISABLE_FLASH_ATTENTION": "yes"}),
     InvalidArgument, "ORT_DISABLE_FLASH_ATTENTION='yes'"),
    ("env(min seq = x)", lambda: KernelOptions.resolve(0, {"ORT_MIN_SEQ_LEN_FLASH_ATTENTION_PACKED_QKV": "x"}),
     InvalidArgument, "ORT_MIN_SEQ_LEN_FLASH_ATTENTION_PACKED_QKV='x': ORT 1.31.1 cannot parse it"),
    ("sdpa_kernel(128)", lambda: KernelOptions.resolve(128), InvalidArgument, "bit.s. 128 are not defined by ORT 1.31.1"),
    ("env(unknown ORT_..._ATTENTION)", lambda: KernelOptions.resolve(0, {"ORT_DISABLE_FLASH_ATTENTIONS": "1"}),
     InvalidArgument, "ORT_DISABLE_FLASH_ATTENTIONS"),
    ("sdpa_kernel(-1)", lambda: KernelOptions.resolve(-1), InvalidArgument, "sdpa_kernel = -1"),
    ("device(sm=5)", lambda: RuntimeConfig.make(sm=5), InvalidArgument, "sm = 5"),
    ("trt_runner(maybe)", lambda: RuntimeConfig.make(trt_runner="maybe"), InvalidArgument, "'maybe'"),
    ("range(5..3)", lambda: DimRange.parse("5..3", "--seq"), InvalidArgument, "5..3"),
    ("range(abc)", lambda: DimRange.parse("abc", "--seq"), InvalidArgument, "--seq = 'abc'"),
    ("target(unknown key)", lambda: target_from_dict({"op": "pmha", "bogus": 1}), InvalidArgument, "bogus"),
    ("target(packed Hv != H)", lambda: target_from_dict(
        {"op": "pmha", "batch": 1, "seq": 8, "heads": 1, "head_size": 8, "v_head_size": 16}), InvalidArgument,
     "one head size"),
    ("hint(3.5)", lambda: parse_hint([3.5], 2), InvalidArgument, r"hint 2 = \[3.5\]"),
    ("geometry(pa Hv != H, no qkv_hidden_sizes)", lambda: pa(v_head_size=8), InvalidArgument, "v_head_size = 8"),
]


@pytest.mark.parametrize("call,error,message", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_invalid_input_raises_typed_error_naming_the_value(call, error, message):
    with pytest.raises(error, match=message) as raised:
        call()
    assert isinstance(raised.value, WorkspaceError)


def test_error_tree_inherits_builtins():
    assert issubclass(InvalidArgument, ValueError)
    assert issubclass(WorkspaceOverflow, OverflowError)
