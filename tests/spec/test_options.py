"""Kernel options as ORT 1.31.1 resolves them (attention_kernel_options.cc, AttentionKernelOptions::
Initialize) and environment values as ORT parses them (core/platform/env_var_utils.h
ParseEnvironmentVariable; include/onnxruntime/core/common/parse_string.h @ ebcce422e: a boolean is
exactly 0 1 false true False True, an integer is std::from_chars of the whole text, an empty value
is unset)."""

from __future__ import annotations

import pytest

from attnws.spec.errors import InvalidArgument
from attnws.spec.options import KernelOptions, env_bool, env_int

FLASH = "ORT_DISABLE_FLASH_ATTENTION"
MIN_SEQ = "ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32"


@pytest.mark.parametrize("raw, value", [("1", True), ("true", True), ("True", True), ("0", False), ("false", False),
                                        ("False", False), ("", None)])
def test_booleans_ort_reads(raw, value):
    assert env_bool({FLASH: raw}, FLASH, None) is value


@pytest.mark.parametrize("raw", ["TRUE", "yes", " 1", "1 ", "01", "on", "\u0661"])
def test_booleans_ort_cannot_parse_are_its_error(raw):
    with pytest.raises(InvalidArgument, match="cannot parse it and fails to create the session"):
        env_bool({FLASH: raw}, FLASH, False)


@pytest.mark.parametrize("raw, value", [("256", 256), ("-5", -5), ("0", 0), ("007", 7), ("2147483647", 2**31 - 1),
                                        ("-2147483648", -(2**31)), ("", 99)])
def test_integers_ort_reads(raw, value):
    assert env_int({MIN_SEQ: raw}, MIN_SEQ, 99) == value


@pytest.mark.parametrize("raw", ["+5", " 5", "5 ", "1_6", "0x10", "5.0", "2147483648", "-2147483649", "\u0668", "-"])
def test_integers_ort_cannot_parse_are_its_error(raw):
    with pytest.raises(InvalidArgument, match="cannot parse it"):
        env_int({MIN_SEQ: raw}, MIN_SEQ, 0)


def test_variables_ort_never_reads_are_accepted_unparsed():
    plain = KernelOptions.resolve(0)
    for name in ("ORT_ENABLE_LEAN_ATTENTION", "ORT_ENABLE_FUSED_CAUSAL_ATTENTION"):
        assert KernelOptions.resolve(0, {name: "not a boolean"}) == plain


def test_the_debug_variable_is_parsed_without_effect_and_the_decoder_one_turns_paged_decode_off():
    plain = KernelOptions.resolve(0)
    assert KernelOptions.resolve(0, {"ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO": "1"}) == plain
    off = KernelOptions.resolve(0, {"ORT_DISABLE_DECODER_ATTENTION": "1"})
    assert plain.use_decoder and not off.use_decoder
    assert not KernelOptions.resolve(1).use_decoder and KernelOptions.resolve(512).use_decoder
    with pytest.raises(InvalidArgument, match="ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO"):
        KernelOptions.resolve(5, {"ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO": "maybe"})


def test_with_a_mask_the_backend_variables_are_not_read():
    with pytest.raises(InvalidArgument, match="ORT reads the backend variables only when sdpa_kernel is 0"):
        KernelOptions.resolve(2, {FLASH: "1"})
    assert KernelOptions.resolve(2, {MIN_SEQ: "7"}).min_seq_mea_fp32 == 7


@pytest.mark.parametrize("bit", [128, 1024, 1 << 30])
def test_bits_ort_does_not_define_are_refused(bit):
    with pytest.raises(InvalidArgument, match=f"bit.s. {bit} are not defined by ORT 1.31.1"):
        KernelOptions.resolve(bit | 1)


def test_lean_and_decoder_bits_turn_every_backend_off_but_change_nothing_else():
    for mask in (256, 512, 768):
        options = KernelOptions.resolve(mask)
        assert not any((options.use_flash, options.use_efficient, options.use_trt_fused, options.use_trt_flash,
                        options.use_trt_cross, options.use_cudnn))
        assert options.min_seq_mea_fp32 == 0 and options.min_seq_flash_packed_qkv == 0
