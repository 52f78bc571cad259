"""bench/ort_gpu_check.py on a machine without a GPU: the prepared cases (models, feeds and attnws's
expectations for sm80 and sm90), the parsers of ORT's log lines on synthetic text in ORT 1.31.1's
formats (a planted disagreement must be reported as one), the MHA models on ORT's CPU provider,
the case process's plumbing and the command line."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from attnws.spec import Op, RuntimeConfig, dispatch, estimate_geometry, runtime_problem

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "ort_gpu_check.py"
HAS_CUDA_EP = "CUDAExecutionProvider" in ort.get_available_providers()
CPU_UNSUPPORTED_FORMATS = {"packed_kv": "Packed KV not implemented for CPU",
                           "packed_qkv": "Packed QKV of shape (B, L, N, 3, H) not implemented for CPU"}


def load_script():
    """Import bench/ort_gpu_check.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("ort_gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module while the class is built
    spec.loader.exec_module(module)
    return module


check = load_script()


@pytest.fixture(scope="module", params=[80, 90], ids=["sm80", "sm90"])
def cases(request):
    """The prepared cases for sm80 and for sm90."""
    return check.prepare_cases(request.param)


def by_id(cases, case_id):
    """Return the case named `case_id`."""
    return next(c for c in cases if c.case_id == case_id)


def ort_log(case, kernel, level1_bytes, error="", placed_on="CUDAExecutionProvider"):
    """Return a case process's output in ORT 1.31.1's formats: the Level-1 log line (for PA and
    PMHA), the kernel options and debug-info lines (cyan, on stdout), then the worker's result."""
    g = case.geometry
    lines = ["2026-01-01 00:00:00.000000000 [I:onnxruntime:, graph_partitioner.cc:2466 Partition] Resource "
             "estimation for EP 'CUDAExecutionProvider': non-workspace memory: 0 bytes, workspace memory: 0 bytes"]
    if level1_bytes is not None:
        lines.append(f"2026-01-01 00:00:00.000000001 [V:onnxruntime:, cuda_execution_provider.cc:3120 "
                     f"GetCapability] Level-1 workspace estimate for {case.case_id}: {level1_bytes} bytes, "
                     "initialization scratch=0 bytes")
    lines += ["\x1b[36mAttentionKernelOptions: FLASH_ATTENTION=1 EFFICIENT_ATTENTION=1 TRT_FUSED_ATTENTION=1 "
              "CUDNN_FLASH_ATTENTION=0 TRT_FLASH_ATTENTION=1 TRT_CROSS_ATTENTION=1 DECODER_ATTENTION=1 MATH=1\x1b[0m",
              f"\x1b[36mOperator={g.op.onnx_name} Node={case.case_id} DataType="
              f"{'fp16' if g.element_size == 2 else 'fp32'} SdpaKernel={kernel} NumSplits=0\x1b[0m",
              check.RESULT_TAG + json.dumps({"placed_on": placed_on, "error": error, "outputs": []})]
    return "\n".join(lines) + "\n"


def ort_kernel_name(backend):
    """Return an ORT kernel name for an attnws backend value."""
    return next(name for name, b in check.ORT_KERNEL_BACKENDS.items() if b.value == backend)


def test_prepared_cases_cover_every_form_head_size_dtype_and_threshold(cases):
    assert len(cases) >= 20 and len({c.case_id for c in cases}) == len(cases)
    geometries = [c.geometry for c in cases]
    forms = {(g.op, g.mha_format.value if g.op is Op.MHA else g.pmha_format.value) for g in geometries}
    assert {(Op.PMHA, "packed"), (Op.PMHA, "separate")} <= forms and any(op is Op.PA for op, _ in forms)
    assert {"separate", "cross", "packed_kv", "packed_qkv"} <= {f for op, f in forms if op is Op.MHA}
    assert any(g.op is Op.MHA and g.mask.value != "none" for g in geometries)
    assert any(g.with_past and g.with_present for g in geometries)
    assert {32, 64, 128} <= {g.head_size for g in geometries} and {2, 4} == {g.element_size for g in geometries}
    seqs = {(g.op, g.element_size, g.seq) for g in geometries}
    assert {(Op.PA, 2, 384), (Op.PA, 2, 385), (Op.PMHA, 2, 384), (Op.PMHA, 2, 385)} <= seqs  # TRT XMMA / flash
    assert {(Op.PMHA, 2, 512), (Op.PMHA, 2, 513)} <= seqs  # packed QKV Flash threshold
    assert {(Op.PMHA, 4, 255), (Op.PMHA, 4, 256), (Op.MHA, 4, 255), (Op.MHA, 4, 256)} <= seqs  # fp32 MEA
    assert {128, 129} <= {g.l for g in geometries if g.op is Op.MHA and g.l != g.seq}  # TRT cross attention


def test_every_model_is_valid_and_every_expectation_comes_from_attnws(cases):
    for case in cases:
        onnx.checker.check_model(case.model, full_check=True)
        assert case.model.graph.node[0].name == case.case_id
        config = RuntimeConfig.make(sm=case.sm, env=check.CASE_ENV)
        outcome = dispatch(runtime_problem(case.geometry), config)
        assert case.expected_backend == outcome.backend.value and case.expected_failure == outcome.failure
        if case.has_estimator:
            assert case.expected_bytes is not None, (case.case_id, case.estimate_message)
            assert case.expected_bytes == estimate_geometry(case.geometry, config).total_workspace_bytes
        else:
            assert case.expected_bytes is None
        assert json.loads(json.dumps(case.record()))["attnws_shape"]["sm"] == case.sm


def test_feeds_are_deterministic_and_match_the_graph_inputs(cases):
    again = check.prepare_cases(cases[0].sm)
    for case, twin in zip(cases, again):
        assert case.model.SerializeToString() == twin.model.SerializeToString()
        assert case.feeds.keys() == twin.feeds.keys()
        assert all(np.array_equal(case.feeds[k], twin.feeds[k]) for k in case.feeds)
        for graph_input in case.model.graph.input:
            array = case.feeds[graph_input.name]
            dims = [d.dim_value for d in graph_input.type.tensor_type.shape.dim]
            assert list(array.shape) == dims
            assert onnx.helper.tensor_dtype_to_np_dtype(graph_input.type.tensor_type.elem_type) == array.dtype
        g = case.geometry
        if g.op is not Op.MHA:
            offsets, cumulative = case.feeds["token_offset"], case.feeds["cumulative_sequence_length"]
            assert sorted(offsets.ravel()) == list(range(g.batch * g.seq))
            assert cumulative[0] == 0 and cumulative[-1] == g.t and (np.diff(cumulative) <= g.seq).all()


def test_mha_models_run_on_the_cpu_provider():
    for case in check.prepare_cases(90):
        if case.geometry.op is not Op.MHA:
            continue
        session = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
        unsupported = CPU_UNSUPPORTED_FORMATS.get(case.geometry.mha_format.value)
        if unsupported:  # the CPU kernel accepts the node, then refuses the format at run time
            with pytest.raises(Exception, match=f"{case.case_id}.*{re.escape(unsupported)}"):
                session.run(None, case.feeds)
            continue
        outputs = session.run(None, case.feeds)
        expected = [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in case.model.graph.output]
        assert [list(o.shape) for o in outputs] == expected and all(np.isfinite(o).all() for o in outputs)


def test_parsers_read_ort_log_formats(cases):
    for case in cases:
        log = ort_log(case, ort_kernel_name(case.expected_backend), case.expected_bytes if case.has_estimator else None)
        seen = check.observe(log, case.case_id)
        assert seen.kernel == ort_kernel_name(case.expected_backend) and seen.backend == case.expected_backend
        assert seen.level1_found == case.has_estimator and seen.placed_on == "CUDAExecutionProvider"
        expected_verdict = check.DISAGREE if case.expected_failure else check.OK  # the run raised nothing
        assert check.judge(case, seen)[0] == expected_verdict, check.judge(case, seen)
    case = by_id(cases, "pa_fp16_h64_s384")
    for line, value in ((f"Level-1 workspace estimate for {case.case_id}: 4096 bytes", 4096),
                        (f"Level-1 workspace estimate for PackedAttention node '{case.case_id}': 512 bytes", 512),
                        (f"Level-1 memory estimate for {case.case_id}: runtime workspace=77 bytes, runtime "
                         "transient=5 bytes, persistent prepack=0 bytes", 77),
                        (f"Level-1 workspace estimate for {case.case_id}: unavailable", None)):
        assert check.parse_level1(line, case.case_id)[:2] == (True, value)
    assert check.parse_level1(f"Level-1 workspace estimate for {case.case_id}_5f3a: 8 bytes", case.case_id)[1] == 8
    assert not check.parse_level1(f"Level-1 workspace estimate for x{case.case_id}: 8 bytes", case.case_id)[0]
    assert not any(a.case_id.startswith(b.case_id) for a in cases for b in cases if a is not b)
    assert check.parse_kernel(ort_log(by_id(cases, "pa_fp16_h64_s385"), "MATH", 1), case.case_id)[0] is None


def test_a_planted_disagreement_is_reported(cases):
    case = by_id(cases, "pmha_packed_fp16_h64_s513")
    wrong_kernel = "MATH" if case.expected_backend != "unfused" else "FLASH_ATTENTION"
    seen = check.observe(ort_log(case, wrong_kernel, case.expected_bytes + 256), case.case_id)
    verdict, reasons = check.judge(case, seen)
    assert verdict == check.DISAGREE and len(reasons) == 2
    assert reasons[0].startswith("backend: attnws") and reasons[1].startswith("Level-1 bytes: attnws")
    line = check.result_line(1, 1, case, seen, verdict, reasons, 1.0)
    assert line.startswith(f"1/1 DISAGREE {case.case_id} [") and str(case.expected_bytes + 256) in line
    unmodelled = check.observe(ort_log(case, "LATENT_ATTENTION", case.expected_bytes), case.case_id)
    assert check.judge(case, unmodelled) == (check.DISAGREE, [
        f"backend: attnws {case.expected_backend}, ORT LATENT_ATTENTION (LATENT_ATTENTION)"])


def test_missing_observations_are_errors_not_agreements(cases):
    case = by_id(cases, "pa_fp16_h64_s384")
    kernel = ort_kernel_name(case.expected_backend)
    no_level1 = check.judge(case, check.observe(ort_log(case, kernel, None), case.case_id))
    assert no_level1 == (check.ERROR, ["ORT logged no Level-1 workspace estimate for the node"])
    crashed = check.judge(case, check.observe("Segmentation fault\n", case.case_id, "the case process exited -11"))
    assert crashed[0] == check.ERROR and "the run did not complete: the case process exited -11" in crashed[1]
    on_cpu = check.observe(ort_log(case, kernel, case.expected_bytes, placed_on="CPUExecutionProvider"), case.case_id)
    assert check.judge(case, on_cpu) == (check.ERROR, ["ORT placed the node on CPUExecutionProvider"])
    mha = by_id(cases, "mha_separate_fp16_h64_s128")
    assert check.judge(mha, check.observe(ort_log(mha, ort_kernel_name(mha.expected_backend), None), mha.case_id))[0] \
        == check.OK


def test_an_expected_runtime_failure_agrees_only_when_ort_fails(cases):
    case = by_id(cases, "pa_fp16_h32_s128")
    failing = dataclasses.replace(case, expected_failure="ORT fails at run time: no kernel")
    kernel = ort_kernel_name(case.expected_backend)
    ran = check.observe(ort_log(failing, kernel, case.expected_bytes), case.case_id)
    failed = check.observe(ort_log(failing, kernel, case.expected_bytes, error="Fail: Failed to find kernel"),
                           case.case_id)
    assert check.judge(failing, ran)[0] == check.DISAGREE and check.judge(failing, failed) == (check.OK, [])


def test_compute_capability_text():
    assert [check.parse_compute_capability(t) for t in ("9.0", "8.6\n", "90", "sm_120", "none")] == [90, 86, 90, 120,
                                                                                                     None]


def run_script(*args):
    """Run bench/ort_gpu_check.py with `args`; return the finished process (output as text)."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_help_and_list_work_without_a_gpu(capsys):
    done = run_script("--help")
    assert done.returncode == 0 and "--cases" in done.stdout and "--out" in done.stdout
    assert check.main(["--list", "--sm", "80", "--cases", "21"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 21 and listed[0].startswith("pa_fp16_h64_s384 [PA fp16 B=2 S=384 T=576 N=2 H=64]")


@pytest.mark.skipif(HAS_CUDA_EP, reason="with onnxruntime-gpu the node runs on the GPU")
def test_a_case_process_reports_what_ort_did(tmp_path):
    case = by_id(check.prepare_cases(90), "mha_past_fp32_h64_s1_p255")
    seen = check.run_case(case, tmp_path / "work", tmp_path / "logs", 60, resource_accounting=True)
    assert check.judge(case, seen)[0] == check.ERROR and seen.placed_on == "CPUExecutionProvider" and not seen.error
    assert any("Resource estimation for EP 'CUDAExecutionProvider'" in line for line in seen.lines)
    assert (tmp_path / "logs" / f"{case.case_id}.log").stat().st_size > 0
    assert json.loads((tmp_path / "work" / case.case_id / "case.json").read_text())["case_id"] == case.case_id


@pytest.mark.skipif(HAS_CUDA_EP, reason="the CUDA provider is present")
def test_no_cuda_provider_is_a_setup_error(tmp_path):
    done = run_script("--out", str(tmp_path))
    assert done.returncode == 2 and "CUDAExecutionProvider is not usable" in done.stdout
    assert not (tmp_path / "results.txt").exists()
