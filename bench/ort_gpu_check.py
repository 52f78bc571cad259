"""Check attnws against the real ONNX Runtime 1.31.1 CUDA provider: backend picked and Level-1 bytes.

On a machine with an NVIDIA GPU, from the repository root (the CPU wheel `onnxruntime` must not be
installed beside it: the preflight then finds no CUDA provider):
    pip install onnxruntime-gpu==1.31.1 && python bench/ort_gpu_check.py --out "$OUT"
(the CUDA 13 wheel; without a system CUDA 13 runtime and cuDNN 9, install
`onnxruntime-gpu[cuda,cudnn]==1.31.1`, whose libraries `onnxruntime.preload_dlls()` finds). The
script installs nothing. Flags: --out DIR (default $OUT, else ort_gpu_out), --cases N (the first N
cases), --sm SM (take this compute capability instead of the device's), --list (print the cases
and attnws's expectations for --sm, default 90, and exit: no GPU needed), --budget-s (default 420:
the whole run stays under 8 minutes), --case-timeout-s (default 60).

Steps:
0. preflight, in a fresh process: the ORT version must be 1.31.1, one MatMul session on
   CUDAExecutionProvider must have the node placed on that provider and compute the right values;
   the device's compute capability comes from ORT's device metadata, else `nvidia-smi
   --query-gpu=compute_cap`, else numba.cuda. The preflight also checks that ORT accepts
   RESOURCE_SETTING (below; when refused, the cases run without it and the preflight line says
   so). Any failure stops the run with exit code 2;
1. `prepare_cases(sm)` (CPU only, deterministic, importable): one one-node com.microsoft model per
   case, the node named by the case id (PA, PMHA packed [T, N, 3, H] and separate, MHA separate /
   cross BNSH / packed KV / packed QKV / key padding mask / past and present; head sizes 32, 64,
   128 (and 36, where only TRT cross attention serves fp16 on sm80); fp16 and fp32; sequence
   lengths either side of each dispatch threshold), its input feeds (small random arrays, fixed
   seed) and attnws's expectations for the device under the default kernel options: the backend
   `attnws.spec.dispatch` picks and, for PA and PMHA, the Level-1 estimate
   `attnws.spec.estimate_geometry` computes (ORT 1.31.1 has no MultiHeadAttention estimator: MHA
   cases compare the backend only);
2. each case runs in a fresh process (the environment and ORT's once-initialised kernel options
   start fresh, and a crash fails that case only) on CUDAExecutionProvider, with every ORT_*
   variable removed from its environment but DEBUG_ENV=1 (so ORT prints the kernel it picks and
   attnws's expectation is for the default options), ORT's logging at VERBOSE (the session's
   log_severity_level and the default logger's severity both 0) and the session option
   RESOURCE_SETTING = "<1 TiB in KiB>," (a budget no case reaches; it makes the CUDA provider's
   GetCapability run its resource accounting, where it logs the Level-1 estimate);
3. from that process's output: the Level-1 line (LEVEL1_PREFIXES) and the kernel line
   (KERNEL_LINE), compared with the expectations: one line per case as it finishes (case id,
   shape, expected vs ORT backend, expected vs ORT bytes, ok / DISAGREE / ERROR), also appended to
   results.txt; ort_gpu_check.json (rewritten after each case) holds every case's record (its
   attnws shape record, expectations, observation, verdict and the log lines they came from);
   logs/CASE.log holds each process's output (its head and tail when longer than LOG_LIMIT). The
   models and feeds the case processes read live in a temporary directory (`prepare_cases`
   rebuilds them byte for byte).
Exit code: 0 when every case agrees, 1 when any case disagrees or could not be compared, 2 on a
setup error (no GPU, no CUDA provider, wrong ORT version, unknown compute capability).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attnws.spec import Backend, Geometry, Op, QkvFormat, RuntimeConfig, dispatch, estimate_geometry  # noqa: E402
from attnws.spec import WorkspaceError, geometry_hints, runtime_problem  # noqa: E402
from attnws.spec.inputs import input_names  # noqa: E402
from attnws.spec.hints import shape_of  # noqa: E402
from attnws.spec.mha.problem import MaskType, MhaFormat  # noqa: E402
from attnws.spec.ort_version import ORT_VERSION  # noqa: E402
from attnws.spec.shapes_file import shape_record  # noqa: E402

CUDA_EP = "CUDAExecutionProvider"
MS_DOMAIN = "com.microsoft"
DEBUG_ENV = "ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO"
CASE_ENV = {DEBUG_ENV: "1"}  # attnws accepts it and ignores it: it changes no dispatch
RESOURCE_SETTING = "session.resource_cuda_partitioning_settings"
RESOURCE_LIMIT_KIB = 1 << 30  # 1 TiB, in KiB: no case comes near it, so no node is ever refused
ASSIGNMENT_SETTING = "session.record_ep_graph_assignment_info"
IR_VERSION = 10  # ORT 1.31.1 reads IR <= 13; onnx's default is newer
OPSETS = (("", 17), (MS_DOMAIN, 1))
SEED = 20250531
RESULT_TAG = "ORT_GPU_CHECK_RESULT "  # the worker's last stdout line: this tag, then one JSON object
# "Level-1 workspace estimate for " is the text in the 1.31.1 CUDA provider library (cuda_strings.txt,
# next to " bytes, initialization scratch="); MatMulNBits-style estimates use the second form.
LEVEL1_PREFIXES = (("Level-1 workspace estimate for ", re.compile(r"(\d+) bytes")),
                   ("Level-1 memory estimate for ", re.compile(r"runtime workspace=(\d+) bytes")))
# AttentionKernelDebugInfo::Print (contrib_ops/cuda/bert/attention_kernel_options.cc), printed to
# stdout in cyan: "Operator=OP Node=NAME DataType=fp16|fp32|bf16 SdpaKernel=KERNEL", in 1.31.1
# possibly followed by " NumSplits=..." and other fields.
KERNEL_LINE = re.compile(r"Operator=(?P<op>\S+)(?: Node=(?P<node>\S+))? DataType=(?P<dtype>\w+) "
                         r"SdpaKernel=(?P<kernel>\w+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# ORT's kernel names to attnws's backends. Names missing here (LEAN_ATTENTION, LATENT_ATTENTION,
# TRT_CAUSAL_ATTENTION, DECODER_ATTENTION) are kernels attnws does not model: a disagreement.
ORT_KERNEL_BACKENDS = {
    "FLASH_ATTENTION": Backend.FLASH, "EFFICIENT_ATTENTION": Backend.MEA, "TRT_FUSED_ATTENTION": Backend.TRT,
    "TRT_FLASH_ATTENTION": Backend.TRT, "TRT_CROSS_ATTENTION": Backend.TRT_CROSS,
    "CUDNN_FLASH_ATTENTION": Backend.CUDNN, "MATH": Backend.UNFUSED,
}
RELEVANT = ("Level-1", "Level-2", "SdpaKernel=", "AttentionKernelOptions:", "placed on [", "Resource estimation")
LOG_LIMIT = 128 * 1024  # characters kept of each case's output
PREFLIGHT_S = 180
OK, DISAGREE, ERROR = "ok", "DISAGREE", "ERROR"
EXIT_DISAGREE, EXIT_SETUP = 1, 2


# ---------------------------------------------------------------- the cases (CPU only) ----------

def packed(op: Op, dtype: str, seq: int, head_size: int, fmt: QkvFormat = QkvFormat.PACKED) -> Geometry:
    """Return a PA / PMHA geometry of 2 sequences (S and S // 2 tokens), 2 heads."""
    return Geometry(op, 2 if dtype == "fp16" else 4, 2, seq, 2, head_size, tokens=seq + max(1, seq // 2),
                    pmha_format=fmt)


def mha(dtype: str, seq: int, head_size: int, kv_seq: int | None = None, fmt: MhaFormat = MhaFormat.SEPARATE,
        mask: MaskType = MaskType.NONE, past: int | None = None) -> Geometry:
    """Return an MHA geometry of batch 2, 2 heads; `past` adds past_key / past_value of that length
    and the present outputs."""
    cache = {} if past is None else {"past": past, "with_past": True, "with_present": True}
    return Geometry(Op.MHA, 2 if dtype == "fp16" else 4, 2, seq, 2, head_size, kv_seq=kv_seq, mha_format=fmt,
                    mask=mask, **cache)


PA, PMHA = Op.PA, Op.PMHA
SEP = QkvFormat.SEPARATE
CASE_SPECS: tuple[tuple[str, Geometry, str], ...] = (
    ("pa_fp16_h64_s384", packed(PA, "fp16", 384, 64), "TRT XMMA side (S <= 384)"),
    ("pa_fp16_h64_s385", packed(PA, "fp16", 385, 64), "TRT-flash side (S >= 385)"),
    ("pa_fp16_h32_s128", packed(PA, "fp16", 128, 32), "TRT XMMA, head size 32"),
    ("pa_fp16_h128_s384", packed(PA, "fp16", 384, 128), "head size 128: no XMMA kernel"),
    ("pa_fp32_h64_s255", packed(PA, "fp32", 255, 64), "fp32 below the MEA threshold (PA runs MEA in fp16 only)"),
    ("pa_fp32_h64_s256", packed(PA, "fp32", 256, 64), "fp32 at the MEA threshold (still no MEA for PA)"),
    ("pmha_packed_fp16_h64_s384", packed(PMHA, "fp16", 384, 64), "packed QKV, TRT XMMA side"),
    ("pmha_packed_fp16_h64_s385", packed(PMHA, "fp16", 385, 64), "packed QKV, TRT-flash side"),
    ("pmha_packed_fp16_h64_s512", packed(PMHA, "fp16", 512, 64), "packed QKV below the Flash threshold (513)"),
    ("pmha_packed_fp16_h64_s513", packed(PMHA, "fp16", 513, 64), "packed QKV at the Flash threshold"),
    ("pmha_packed_fp16_h32_s64", packed(PMHA, "fp16", 64, 32), "packed QKV, head size 32"),
    ("pmha_packed_fp16_h128_s513", packed(PMHA, "fp16", 513, 128), "packed QKV, head size 128, Flash threshold"),
    ("pmha_packed_fp32_h64_s255", packed(PMHA, "fp32", 255, 64), "fp32 below the MEA threshold (256)"),
    ("pmha_packed_fp32_h64_s256", packed(PMHA, "fp32", 256, 64), "fp32 at the MEA threshold"),
    ("pmha_separate_fp16_h64_s128", packed(PMHA, "fp16", 128, 64, SEP), "separate Q, K, V: Flash first"),
    ("pmha_separate_fp16_h128_s385", packed(PMHA, "fp16", 385, 128, SEP), "separate, head size 128, S >= 385"),
    ("pmha_separate_fp32_h32_s255", packed(PMHA, "fp32", 255, 32, SEP), "separate fp32 below the MEA threshold"),
    ("pmha_separate_fp32_h32_s256", packed(PMHA, "fp32", 256, 32, SEP), "separate fp32 at the MEA threshold"),
    ("mha_separate_fp16_h64_s128", mha("fp16", 128, 64), "BSNH self attention: Flash first"),
    ("mha_mask1d_fp16_h64_s384", mha("fp16", 384, 64, mask=MaskType.KEY_SEQ_LEN),
     "[B] key lengths keep Flash and MEA away: TRT XMMA side"),
    ("mha_mask1d_fp16_h64_s385", mha("fp16", 385, 64, mask=MaskType.KEY_SEQ_LEN), "[B] key lengths, TRT-flash side"),
    ("mha_mask1d_fp16_h32_s128", mha("fp16", 128, 32, mask=MaskType.KEY_SEQ_LEN), "[B] key lengths, head size 32"),
    ("mha_separate_fp32_h64_s255", mha("fp32", 255, 64), "fp32 below the MEA threshold"),
    ("mha_separate_fp32_h64_s256", mha("fp32", 256, 64), "fp32 at the MEA threshold"),
    ("mha_separate_fp16_h36_s64_l128", mha("fp16", 64, 36, kv_seq=128), "TRT cross attention side (L <= 128)"),
    ("mha_separate_fp16_h36_s64_l129", mha("fp16", 64, 36, kv_seq=129), "past the TRT cross limit (L >= 129)"),
    ("mha_cross_fp16_h64_s64_l128", mha("fp16", 64, 64, kv_seq=128, fmt=MhaFormat.CROSS), "cross BNSH key/value"),
    ("mha_cross_fp32_h128_s32_l256", mha("fp32", 32, 128, kv_seq=256, fmt=MhaFormat.CROSS),
     "cross BNSH fp32, L at the MEA threshold"),
    ("mha_packed_kv_fp16_h32_s64_l128", mha("fp16", 64, 32, kv_seq=128, fmt=MhaFormat.PACKED_KV), "packed KV"),
    ("mha_packed_qkv_fp16_h64_s384", mha("fp16", 384, 64, fmt=MhaFormat.PACKED_QKV), "packed QKV"),
    ("mha_mask2d_fp32_h32_s64", mha("fp32", 64, 32, mask=MaskType.KEY_PADDING), "[B, T] key padding mask"),
    ("mha_past_fp16_h64_s1_p127", mha("fp16", 1, 64, past=127), "decoding step with past and present"),
    ("mha_past_fp32_h64_s1_p255", mha("fp32", 1, 64, past=255), "fp32 decoding step, L below the MEA threshold"),
)


@dataclass(frozen=True)
class Case:
    """One prepared case: its one-node model, input feeds and attnws's expectations on device `sm`.

    `expected_backend` is the attnws Backend value dispatch picks; `expected_failure` is why ORT
    then fails at run time ('' when it runs); `expected_bytes` is attnws's Level-1 estimate in
    bytes for PA / PMHA (None for MHA, which ORT 1.31.1 does not estimate, or when attnws has no
    estimate: `estimate_message` says why)."""

    case_id: str
    why: str
    geometry: Geometry
    sm: int
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    expected_backend: str | None
    expected_failure: str
    expected_bytes: int | None
    estimate_message: str

    @property
    def has_estimator(self) -> bool:
        """Whether ORT 1.31.1 computes a Level-1 estimate for the node (PA and PMHA only)."""
        return self.geometry.op is not Op.MHA

    @property
    def shape(self) -> str:
        """The case's shape in one short phrase, e.g. 'PMHA fp16 packed B=2 S=385 T=577 N=2 H=64'."""
        g = self.geometry
        parts = [g.op.value.upper(), "fp16" if g.element_size == 2 else "fp32",
                 (g.mha_format if g.op is Op.MHA else g.pmha_format).value if g.op is not Op.PA else "",
                 f"B={g.batch} S={g.seq}", "" if g.op is Op.MHA else f"T={g.t}",
                 f"L={g.l}" if g.op is Op.MHA else "", f"P={g.past}" if g.with_past else "",
                 f"N={g.heads} H={g.head_size}", "" if g.mask is MaskType.NONE else f"mask={g.mask.value}"]
        return " ".join(p for p in parts if p)

    def record(self) -> dict[str, Any]:
        """Return the case as JSON: attnws's shape record, the model's inputs and the expectations."""
        config = RuntimeConfig.make(sm=self.sm, env=CASE_ENV)
        return {"case_id": self.case_id, "why": self.why, "shape": self.shape,
                "attnws_shape": shape_record(self.geometry, config, CASE_ENV, label=self.case_id),
                "inputs": {name: list(array.shape) for name, array in self.feeds.items()},
                "expected_backend": self.expected_backend, "expected_failure": self.expected_failure,
                "expected_bytes": self.expected_bytes, "estimate_message": self.estimate_message}


def token_lengths(tokens: int, batch: int, seq: int) -> list[int]:
    """Return per-sequence token counts summing to `tokens`: the first sequence full (S tokens),
    the others as even as possible (each 1..S)."""
    rest, others = tokens - seq, batch - 1
    return [seq] + [rest // others + (i < rest % others) for i in range(others)]


def token_offset(lengths: list[int], seq: int) -> np.ndarray:
    """Return RemovePadding's token_offset [B, S] (int32): each token's padded position b*S + s,
    the packed tokens first, then the padding positions."""
    tokens = [b * seq + s for b, n in enumerate(lengths) for s in range(n)]
    padding = [b * seq + s for b, n in enumerate(lengths) for s in range(n, seq)]
    return np.array(tokens + padding, np.int32).reshape(len(lengths), seq)


def key_padding_mask(g: Geometry, shape: list[int]) -> np.ndarray:
    """Return an int32 mask: [B] key lengths (L, then L - 1), or [B, T] ones with the last batch's
    final key masked out."""
    if len(shape) == 1:
        return np.array([max(1, g.l - b) for b in range(g.batch)], np.int32)
    mask = np.ones(shape, np.int32)
    mask[-1, -1] = 0
    return mask


def input_array(g: Geometry, name: str, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    """Return the feed for one input: the packing indices and masks consistent with the geometry,
    every other input random normal (scaled by 0.5) in the case's float type."""
    if name in ("token_offset", "cumulative_sequence_length"):
        lengths = token_lengths(g.t, g.batch, g.seq)
        if name == "token_offset":
            return token_offset(lengths, g.seq)
        return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    if name == "key_padding_mask":
        return key_padding_mask(g, shape)
    dtype = np.float16 if g.element_size == 2 else np.float32
    return (0.5 * rng.standard_normal(shape)).astype(dtype)


def output_infos(g: Geometry) -> list[onnx.ValueInfoProto]:
    """Return the node's outputs: [T, N*Hv] (PA, PMHA) or [B, S, N*Hv] plus, with the present
    outputs, present_key and present_value [B, N, P + L, H]."""
    dtype = TensorProto.FLOAT16 if g.element_size == 2 else TensorProto.FLOAT
    if g.op is not Op.MHA:
        return [helper.make_tensor_value_info("output", dtype, [g.t, g.heads * g.hv])]
    outputs = [helper.make_tensor_value_info("output", dtype, [g.batch, g.seq, g.heads * g.hv])]
    if g.with_present:
        cache = [g.batch, g.heads, g.past + g.l, g.head_size]
        outputs += [helper.make_tensor_value_info(name, dtype, cache) for name in ("present_key", "present_value")]
    return outputs


def build_model(g: Geometry, node_name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Return the one-node com.microsoft model of the geometry (its inputs are attnws's positional
    shapes, `geometry_hints`) and its feeds, random with a seed fixed per node name."""
    rng = np.random.default_rng([SEED, zlib.crc32(node_name.encode())])
    graph_inputs, feeds, node_inputs = [], {}, []
    for name, hint in zip(input_names(g.op), geometry_hints(g)):
        shape = shape_of(hint)
        node_inputs.append("" if shape is None else name)
        if shape is not None:
            feeds[name] = input_array(g, name, shape, rng)
            graph_inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(feeds[name].dtype), shape))
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    outputs = output_infos(g)
    node = helper.make_node(g.op.onnx_name, node_inputs, [o.name for o in outputs], name=node_name,
                            domain=MS_DOMAIN, num_heads=g.heads)
    graph = helper.make_graph([node], node_name, graph_inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in OPSETS],
                              ir_version=IR_VERSION, producer_name="attnws bench/ort_gpu_check.py")
    return model, feeds


def prepare_case(case_id: str, g: Geometry, why: str, sm: int) -> Case:
    """Return one case with attnws's expectations for device `sm` and the default kernel options."""
    config = RuntimeConfig.make(sm=sm, env=CASE_ENV)
    outcome = dispatch(runtime_problem(g), config)
    expected_bytes, message = None, "ORT 1.31.1 has no MultiHeadAttention estimator"
    if g.op is not Op.MHA:
        estimate = estimate_geometry(g, config)
        expected_bytes = estimate.total_workspace_bytes if estimate.ok else None
        message = estimate.message
    model, feeds = build_model(g, case_id)
    return Case(case_id, why, g, sm, model, feeds, outcome.backend.value if outcome.backend else None,
                outcome.failure, expected_bytes, message)


def prepare_cases(sm: int, limit: int | None = None) -> list[Case]:
    """Return the first `limit` cases (all when None), prepared for compute capability `sm`
    (10 * major + minor, e.g. 90 for an H200)."""
    return [prepare_case(case_id, g, why, sm) for case_id, g, why in CASE_SPECS[:limit]]


# ---------------------------------------------------------------- reading ORT's output ----------

@dataclass(frozen=True)
class Observation:
    """What one case's process showed: the kernel ORT printed (None: no kernel line for the node),
    whether it logged a Level-1 line for the node and its bytes (None when it had no number), the
    error the session or run raised ('' when it ran), the provider ORT placed the node on ('' when
    unknown) and the log lines read."""

    kernel: str | None
    level1_found: bool
    level1_bytes: int | None
    error: str
    placed_on: str
    lines: tuple[str, ...] = field(default=())

    @property
    def backend(self) -> str | None:
        """The attnws backend value of ORT's kernel, the raw kernel name when attnws has none for
        it, None without a kernel line."""
        if self.kernel is None:
            return None
        mapped = ORT_KERNEL_BACKENDS.get(self.kernel)
        return mapped.value if mapped else self.kernel

    def as_dict(self) -> dict[str, Any]:
        """Return the observation as JSON, with the attnws backend ORT's kernel maps to."""
        return {"kernel": self.kernel, "backend": self.backend, "level1_found": self.level1_found,
                "level1_bytes": self.level1_bytes, "error": self.error, "placed_on": self.placed_on,
                "lines": list(self.lines)}


def names_node(text: str, node: str) -> bool:
    """Return whether `text` names the node: its name at the start of a word, quoted or not, and
    perhaps suffixed (ORT's unique node names append a hash). No case id starts another."""
    return re.search(rf"(?<![\w.-]){re.escape(node)}", text) is not None


def parse_level1(log: str, node: str) -> tuple[bool, int | None, list[str]]:
    """Return (found, bytes, lines) of ORT's Level-1 estimate for the node: found when a line
    starting with one of LEVEL1_PREFIXES names it; bytes from the first matching line that has
    the number (None: every such line had none, e.g. an unavailable estimate)."""
    lines, value = [], None
    for line in log.splitlines():
        for prefix, number in LEVEL1_PREFIXES:
            at = line.find(prefix)
            if at < 0 or not names_node(line[at + len(prefix):], node):
                continue
            lines.append(line)
            tail = line[at + len(prefix):]
            found = number.search(tail, tail.find(node))
            if value is None and found:
                value = int(found.group(1))
    return bool(lines), value, lines


def parse_kernel(log: str, node: str) -> tuple[str | None, list[str]]:
    """Return (kernel, lines): the SdpaKernel of the last debug-info line for the node (ANSI colour
    codes removed), or None when there is none."""
    kernel, lines = None, []
    for line in log.splitlines():
        plain = ANSI.sub("", line)
        match = KERNEL_LINE.search(plain)
        if match and match.group("node") == node:
            kernel = match.group("kernel")
            lines.append(plain)
    return kernel, lines


def worker_result(log: str) -> dict[str, Any] | None:
    """Return the worker's tagged JSON result (its last such line), or None when it never printed
    one (it crashed or timed out)."""
    results = [line[len(RESULT_TAG):] for line in log.splitlines() if line.startswith(RESULT_TAG)]
    return json.loads(results[-1]) if results else None


def observe(log: str, node: str, failure: str = "") -> Observation:
    """Return what a case process's combined output says about the node; `failure` is the
    supervisor's own reason when the process did not finish (timeout, crash)."""
    kernel, kernel_lines = parse_kernel(log, node)
    found, value, level1_lines = parse_level1(log, node)
    result = worker_result(log)
    if result is None:
        error = failure or "the case process ended without a result"
    else:
        error = result["error"]
    relevant = [ANSI.sub("", line) for line in log.splitlines() if any(key in line for key in RELEVANT)]
    return Observation(kernel, found, value, error, (result or {}).get("placed_on", ""),
                       tuple(dict.fromkeys(kernel_lines + level1_lines + relevant)))


def judge(case: Case, seen: Observation) -> tuple[str, list[str]]:
    """Return (verdict, reasons): DISAGREE when ORT's backend or Level-1 bytes differ from
    attnws's, or ORT ran where attnws says it fails at run time; ERROR when some comparison could
    not be made (no kernel or Level-1 line for the node, the node on another provider, an error
    attnws does not expect); ok otherwise. The reasons list the disagreements, then the errors."""
    disagreements, errors = [], []
    if seen.placed_on and seen.placed_on != CUDA_EP:
        errors.append(f"ORT placed the node on {seen.placed_on}")
    if case.expected_failure and not seen.error:
        disagreements.append(f"ORT ran; attnws says: {case.expected_failure}")
    elif seen.error and not case.expected_failure:
        errors.append(f"the run did not complete: {seen.error}")
    if seen.kernel is None:
        errors.append("ORT printed no SdpaKernel line for the node")
    elif seen.backend != case.expected_backend:
        disagreements.append(f"backend: attnws {case.expected_backend}, ORT {seen.backend} ({seen.kernel})")
    if case.has_estimator:
        if not seen.level1_found:
            errors.append("ORT logged no Level-1 workspace estimate for the node")
        elif seen.level1_bytes != case.expected_bytes:
            disagreements.append(f"Level-1 bytes: attnws {case.expected_bytes}, ORT {seen.level1_bytes}")
    verdict = DISAGREE if disagreements else ERROR if errors else OK
    return verdict, disagreements + errors


def result_line(index: int, total: int, case: Case, seen: Observation, verdict: str, reasons: list[str],
                seconds: float) -> str:
    """Return the one line a finished case gets: position, verdict, case id, shape, attnws's vs
    ORT's backend and Level-1 bytes ('-' where there is none), the reasons and the seconds."""
    expected = f"{case.expected_backend}{' (then fails)' if case.expected_failure else ''}"
    observed = f"{seen.backend} ({seen.kernel})" if seen.kernel else "-"
    expected_bytes = case.expected_bytes if case.has_estimator else "-"
    observed_bytes = "-" if seen.level1_bytes is None else seen.level1_bytes
    line = (f"{index}/{total} {verdict:<8} {case.case_id} [{case.shape}]: backend {expected} vs ORT {observed}; "
            f"bytes {expected_bytes} vs ORT {observed_bytes}")
    return line + "".join(f"; {reason}" for reason in reasons) + f" ({seconds:.1f} s)"


# ---------------------------------------------------------------- on the GPU ----------

def clean_environment() -> dict[str, str]:
    """Return this process's environment without any ORT_* variable, plus CASE_ENV."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("ORT_")}, **CASE_ENV}


def session_options(ort: Any, resource_accounting: bool) -> Any:
    """Return VERBOSE session options that record node placement and, when asked, set
    RESOURCE_SETTING so that the CUDA provider computes and logs Level-1 estimates."""
    options = ort.SessionOptions()
    options.log_severity_level = 0
    options.add_session_config_entry(ASSIGNMENT_SETTING, "1")
    if resource_accounting:
        options.add_session_config_entry(RESOURCE_SETTING, f"{RESOURCE_LIMIT_KIB},")
    return options


def placement(session: Any, node: str) -> str:
    """Return the execution provider ORT assigned the node to ('' when it reports none)."""
    for subgraph in session.get_provider_graph_assignment_info():
        if any(n.name == node for n in subgraph.get_nodes()):
            return subgraph.ep_name
    return ""


def parse_compute_capability(text: str) -> int | None:
    """Return 10 * major + minor from '9.0', '90' or 'sm_90', else None."""
    match = re.search(r"(\d+)\.(\d)|(?:sm_?)?(\d{2,3})\b", text.strip())
    if not match:
        return None
    return int(match.group(1)) * 10 + int(match.group(2)) if match.group(1) else int(match.group(3))


def compute_capability(ort: Any) -> tuple[int | None, str]:
    """Return (sm, source): from ORT's CUDA device metadata (a key naming the compute
    capability), else nvidia-smi, else numba.cuda; (None, why) when none says."""
    devices = [d for d in ort.get_ep_devices() if d.ep_name == CUDA_EP]
    for metadata in [m for d in devices for m in (d.ep_metadata, d.device.metadata)]:
        for key, value in dict(metadata).items():
            if "compute" in key.lower() and parse_compute_capability(str(value)):
                return parse_compute_capability(str(value)), f"onnxruntime ({key}={value})"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.splitlines()
        if smi and parse_compute_capability(smi[0]):
            return parse_compute_capability(smi[0]), f"nvidia-smi ({smi[0].strip()})"
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        from numba import cuda

        major, minor = cuda.get_current_device().compute_capability
        return 10 * major + minor, "numba.cuda"
    except Exception as error:  # no driver, no numba: the caller reports the missing capability
        return None, f"unknown ({type(error).__name__}: {error})"


def preflight_model(directory: Path) -> tuple[Path, dict[str, np.ndarray], np.ndarray]:
    """Write a one-MatMul fp32 model to `directory`; return its path, feeds and expected output."""
    a, b = np.arange(32, dtype=np.float32).reshape(4, 8) / 8, np.ones((8, 4), np.float32)
    node = helper.make_node("MatMul", ["a", "b"], ["c"], name="preflight_matmul")
    graph = helper.make_graph([node], "preflight", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8]),
                                                    helper.make_tensor_value_info("b", TensorProto.FLOAT, [8, 4])],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [4, 4])])
    path = directory / "preflight.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION), path)
    return path, {"a": a, "b": b}, a @ b


def preflight_worker() -> int:
    """Run one MatMul on CUDAExecutionProvider and print RESULT_TAG + JSON facts: ORT version,
    providers, where the node ran, whether the output is right, the compute capability and
    whether ORT accepts RESOURCE_SETTING."""
    facts: dict[str, Any] = {"ort_version": None, "available": [], "placed_on": "", "output_ok": False,
                             "sm": None, "sm_source": "", "resource_accounting": False, "error": ""}
    try:
        import onnxruntime as ort

        facts["ort_version"], facts["available"] = ort.__version__, ort.get_available_providers()
        ort.preload_dlls()
        ort.set_default_logger_severity(0)
        with tempfile.TemporaryDirectory() as directory:
            path, feeds, expected = preflight_model(Path(directory))
            try:
                session = ort.InferenceSession(str(path), session_options(ort, True), providers=[CUDA_EP])
                facts["resource_accounting"] = True
            except Exception as error:  # the setting refused: run without it, say so
                facts["error"] = f"{RESOURCE_SETTING} refused: {error}"
                session = ort.InferenceSession(str(path), session_options(ort, False), providers=[CUDA_EP])
            facts["placed_on"] = placement(session, "preflight_matmul")
            facts["output_ok"] = bool(np.allclose(session.run(None, feeds)[0], expected))
        facts["sm"], facts["sm_source"] = compute_capability(ort)
    except Exception as error:  # reported, not raised: the supervisor turns it into a clear message
        facts["error"] = f"{type(error).__name__}: {error}"
    print(RESULT_TAG + json.dumps(facts), flush=True)
    return 0


def preflight(limit_s: float) -> tuple[bool, str, dict[str, Any]]:
    """Return (passed, message, facts) of the preflight, run in a fresh process."""
    try:
        done = subprocess.run([sys.executable, __file__, "--preflight"], cwd=ROOT, env=clean_environment(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              timeout=limit_s)
    except subprocess.TimeoutExpired:
        return False, f"one MatMul session did not finish within {limit_s:.0f} s", {}
    facts = worker_result(done.stdout)
    if facts is None:
        return False, f"the preflight process died (exit {done.returncode}): {done.stdout[-2000:]}", {}
    if facts["ort_version"] != ORT_VERSION:
        return False, f"onnxruntime {facts['ort_version']} is installed; this check needs {ORT_VERSION}", facts
    if CUDA_EP not in facts["available"] or facts["placed_on"] != CUDA_EP or not facts["output_ok"]:
        return False, (f"{CUDA_EP} is not usable (available: {facts['available']}, the MatMul ran on "
                       f"{facts['placed_on'] or 'nothing'}, output right: {facts['output_ok']}; {facts['error']}): "
                       "install onnxruntime-gpu, not onnxruntime, on a machine with an NVIDIA GPU"), facts
    if facts["sm"] is None:
        return False, f"the device's compute capability is {facts['sm_source']}", facts
    return True, (f"{CUDA_EP} ok on sm{facts['sm']} (from {facts['sm_source']}), onnxruntime {ORT_VERSION}"
                  + ("" if facts["resource_accounting"] else f"; {facts['error']}")), facts


def case_worker(case_dir: str, resource_accounting: bool) -> int:
    """Run one case's model once on CUDAExecutionProvider at VERBOSE logging; print RESULT_TAG +
    JSON {placed_on, error, outputs}. The environment (DEBUG_ENV) comes from the supervisor."""
    directory = Path(case_dir)
    node = json.loads((directory / "case.json").read_text())["case_id"]
    result: dict[str, Any] = {"placed_on": "", "error": "", "outputs": []}
    try:
        import onnxruntime as ort

        ort.preload_dlls()
        ort.set_default_logger_severity(0)
        session = ort.InferenceSession(str(directory / "model.onnx"), session_options(ort, resource_accounting),
                                       providers=[CUDA_EP])
        result["placed_on"] = placement(session, node)
        with np.load(directory / "feeds.npz") as feeds:
            outputs = session.run(None, dict(feeds))
        result["outputs"] = [list(o.shape) for o in outputs]
    except Exception as error:  # the verdict reads it: expected for a shape attnws says fails
        result["error"] = f"{type(error).__name__}: {error}"
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0


def write_case(case: Case, directory: Path) -> None:
    """Write the case's model, feeds and record to `directory` (what the case process reads)."""
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(case.model, directory / "model.onnx")
    np.savez(directory / "feeds.npz", **case.feeds)
    (directory / "case.json").write_text(json.dumps(case.record(), indent=1))


def clipped(log: str) -> str:
    """Return the log, or its first and last LOG_LIMIT // 2 characters when it is longer (the
    Level-1 line comes early, at session creation; the kernel line late, at the run)."""
    if len(log) <= LOG_LIMIT:
        return log
    return f"{log[:LOG_LIMIT // 2]}\n[... {len(log) - LOG_LIMIT} characters left out ...]\n{log[-LOG_LIMIT // 2:]}"


def run_case(case: Case, work: Path, logs: Path, timeout_s: float, resource_accounting: bool) -> Observation:
    """Run one case in a fresh process, its files under `work`; keep its output (clipped) in
    logs/CASE.log; return what it showed."""
    directory = work / case.case_id
    write_case(case, directory)
    command = [sys.executable, __file__, "--worker", str(directory)] + (["--resource-accounting"]
                                                                      if resource_accounting else [])
    failure = ""
    try:
        done = subprocess.run(command, cwd=ROOT, env=clean_environment(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout_s)
        raw = done.stdout
        if done.returncode:
            failure = f"the case process exited {done.returncode}"
    except subprocess.TimeoutExpired as expired:
        raw, failure = expired.stdout or b"", f"timed out after {timeout_s:.0f} s"
    log = raw.decode("utf-8", "replace")
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{case.case_id}.log").write_text(clipped(log))
    return observe(log, case.case_id, failure)


def not_run() -> Observation:
    """The observation of a case the budget left no time for."""
    return Observation(None, False, None, "not run: the --budget-s time ran out", "")


def summary(facts: dict[str, Any], sm: int, entries: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Return the JSON summary: the preflight's facts, the sm expected, verdict counts, the
    seconds the cases took and every case's entry."""
    counts = {verdict: sum(e["verdict"] == verdict for e in entries) for verdict in (OK, DISAGREE, ERROR)}
    return {"preflight": facts, "sm": sm, "counts": counts, "seconds": round(seconds, 1), "cases": entries}


def check(cases: list[Case], out: Path, facts: dict[str, Any], sm: int, deadline: float, timeout_s: float) -> bool:
    """Run and judge every case, streaming one line each to stdout and results.txt and rewriting
    ort_gpu_check.json; return whether every case agreed."""
    begin, entries = time.monotonic(), []
    with open(out / "results.txt", "w") as results, tempfile.TemporaryDirectory() as work:
        for index, case in enumerate(cases, 1):
            started = time.monotonic()
            left = deadline - started
            seen = (run_case(case, Path(work), out / "logs", min(timeout_s, left), facts["resource_accounting"])
                    if left > 1 else not_run())
            verdict, reasons = judge(case, seen)
            line = result_line(index, len(cases), case, seen, verdict, reasons, time.monotonic() - started)
            print(line, flush=True)
            results.write(line + "\n")
            results.flush()
            entries.append({**case.record(), "observed": seen.as_dict(), "verdict": verdict, "reasons": reasons})
            (out / "ort_gpu_check.json").write_text(
                json.dumps(summary(facts, sm, entries, time.monotonic() - begin), indent=1))
    return all(e["verdict"] == OK for e in entries)


def list_cases(sm: int, limit: int | None) -> int:
    """Print each case with attnws's expectations on `sm` (no GPU needed)."""
    for case in prepare_cases(sm, limit):
        failure = f" (then fails: {case.expected_failure})" if case.expected_failure else ""
        estimate = case.expected_bytes if case.has_estimator else "- (no ORT estimator)"
        print(f"{case.case_id} [{case.shape}] {case.why}: backend {case.expected_backend}{failure}; "
              f"Level-1 bytes {estimate}")
    return 0


def main(argv: Iterable[str] | None = None) -> int:
    """Run the command line (see the module docstring); return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "ort_gpu_out")))
    parser.add_argument("--cases", type=int, help="run only the first N cases")
    parser.add_argument("--sm", type=int, help="compute capability to expect (default: the device's; 90 with --list)")
    parser.add_argument("--list", action="store_true", help="print the cases and attnws's expectations, then exit")
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--case-timeout-s", type=float, default=60.0)
    ns = parser.parse_args(argv)
    if ns.list:
        return list_cases(ns.sm or 90, ns.cases)
    begin = time.monotonic()
    ns.out.mkdir(parents=True, exist_ok=True)
    passed, message, facts = preflight(min(PREFLIGHT_S, ns.budget_s / 3))
    (ns.out / "preflight.txt").write_text(message + "\n")
    print(f"preflight: {message}", flush=True)
    if not passed:
        print("ort_gpu_check: stopping before any case: setup error", file=sys.stderr)
        return EXIT_SETUP
    sm = ns.sm or facts["sm"]
    try:
        cases = prepare_cases(sm, ns.cases)
    except WorkspaceError as error:
        print(f"ort_gpu_check: attnws cannot prepare the cases for sm{sm}: {error}", file=sys.stderr)
        return EXIT_SETUP
    agreed = check(cases, ns.out, facts, sm, begin + ns.budget_s, ns.case_timeout_s)
    print(f"cases: {'all agree' if agreed else 'see DISAGREE / ERROR above'}; {ns.out / 'ort_gpu_check.json'}",
          flush=True)
    return 0 if agreed else EXIT_DISAGREE


if __name__ == "__main__":
    if sys.argv[1:] == ["--preflight"]:
        sys.exit(preflight_worker())
    if len(sys.argv) >= 3 and sys.argv[1] == "--worker":
        sys.exit(case_worker(sys.argv[2], "--resource-accounting" in sys.argv[3:]))
    sys.exit(main())
