"""Run MultiHeadAttention cases on ONNX Runtime's CPU execution provider; record their verdicts.

`ort_verdicts` runs the cases in a child process (`python -m tests.ort.engine CASES START`), so
that a kernel crash (segfault, SIGFPE) costs one case, not the test run: the child is restarted
after the case it died on, which gets a "crash" verdict. Only the child imports onnxruntime.

Models are built in memory with `onnx.helper`: one com.microsoft MultiHeadAttention node whose
inputs are given by position (absent ones as ""), fed with zeros (the key padding mask with valid
lengths, past_sequence_length with P) so that the kernel fails on shapes, never on values.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

import numpy as np
from onnx import TensorProto, helper

from .cases import INPUT_NAMES, MhaCase

REPO_ROOT = Path(__file__).resolve().parents[2]

ORT_VERSION = "1.31.1"
DEFAULT_OPSET = 21  # a recent ai.onnx opset that onnxruntime 1.31.1 supports
IR_VERSION = 10  # opset 21's IR version; onnxruntime 1.31.1 refuses onnx 1.23's default IR
INT32_INPUTS = frozenset({"key_padding_mask", "past_sequence_length", "cache_indirection"})
OUTPUT_NAMES = ("output", "present_key", "present_value")
SCHEMA_INFERENCE_MARKS = ("[ShapeInferenceError]", "[TypeInferenceError]")


@dataclass(frozen=True)
class OrtVerdict:
    """ONNX Runtime's answer for one case.

    `accepted` is True when the node ran. Otherwise `message` is ORT's status message and `stage`
    says where it failed: "session" (InferenceSession creation, e.g. the kernel constructor),
    "run", or "crash" (the process died; `message` names the signal). When the static-shape
    model failed the op schema's type/shape inference (graph resolution, which the kernels'
    CheckInputs never sees), `shape_inference` holds that message and the rest of the verdict
    comes from the same node with shapeless inputs.
    """

    accepted: bool
    stage: str
    message: str = ""
    shape_inference: str | None = None


def ort_verdicts(cases: Sequence[Any], child: str = "tests.ort.engine") -> list[OrtVerdict]:
    """Return ORT's verdict for every case, in order, each run in a child process (see the module);
    `child` is the module whose `main` runs them (each operator's cases have their own)."""
    verdicts: list[OrtVerdict] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cases.json"
        path.write_text(json.dumps([case.to_json() for case in cases]))
        while len(verdicts) < len(cases):
            verdicts += _run_child(child, path, len(verdicts), Path(folder) / "stderr.txt")
    return verdicts


def _run_child(child_module: str, path: Path, start: int, stderr_path: Path) -> list[OrtVerdict]:
    """Run cases[start:] in one child; return its verdicts, ending with a "crash" verdict if it died
    of a signal. A child that fails otherwise is a harness bug: raise with its stderr."""
    with stderr_path.open("w") as stderr:
        child = subprocess.run([sys.executable, "-m", child_module, str(path), str(start)], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=stderr, text=True, check=False, timeout=600)
    verdicts = [OrtVerdict(**json.loads(line)) for line in child.stdout.splitlines()]
    if child.returncode < 0:
        return verdicts + [OrtVerdict(False, "crash", f"killed by {signal.Signals(-child.returncode).name}")]
    if child.returncode > 0:
        raise RuntimeError(f"the ORT child process failed ({child.returncode}):\n{stderr_path.read_text()[-4000:]}")
    return verdicts


Builder = Callable[[Any, bool], bytes]
Feeder = Callable[[Any], "dict[str, np.ndarray]"]


def run_child_cases(argv: Sequence[str], from_json: Callable[[Any], Any], model: Builder, feeds: Feeder) -> None:
    """Child process: print one JSON verdict per line for cases[start:] of the JSON file argv[0]."""
    import onnxruntime

    cases = [from_json(data) for data in json.loads(Path(argv[0]).read_text())]
    for case in cases[int(argv[1]):]:
        print(json.dumps(asdict(ort_verdict(onnxruntime, case, model, feeds))), flush=True)


def main(argv: Sequence[str]) -> None:
    """Child process for MultiHeadAttention cases."""
    run_child_cases(argv, MhaCase.from_json, _model, _feeds)


def ort_verdict(ort: ModuleType, case: Any, model: Builder, feeds: Feeder) -> OrtVerdict:
    """Run the case on CPUExecutionProvider; after a type/shape-inference error, run it again with
    shapeless inputs."""
    verdict = _session_and_run(ort, case, True, model, feeds)
    if verdict.stage == "session" and any(mark in verdict.message for mark in SCHEMA_INFERENCE_MARKS):
        return replace(_session_and_run(ort, case, False, model, feeds), shape_inference=verdict.message)
    return verdict


def _session_and_run(ort: ModuleType, case: Any, static_shapes: bool, model: Builder, feeds: Feeder) -> OrtVerdict:
    """Create the session (1 thread, no graph optimisation, log severity 3) and run it once."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(model(case, static_shapes), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001  (ORT's pybind exceptions share no base but Exception)
        return OrtVerdict(False, "session", ort_message(error))
    run_options = ort.RunOptions()
    run_options.log_severity_level = 4  # the failed-kernel error log is the verdict, not noise to print
    try:
        session.run(None, feeds(case), run_options)
    except Exception as error:  # noqa: BLE001
        return OrtVerdict(False, "run", ort_message(error))
    return OrtVerdict(True, "ran")


def ort_message(error: Exception) -> str:
    """Return ORT's status message without its "[ONNXRuntimeError] : code : NAME :" prefix (and,
    for a kernel's error, without the node preamble); re-raise anything that is not ORT's."""
    text = str(error)
    if not text.startswith("[ONNXRuntimeError]"):
        raise error
    text = text.split(" : ", 3)[-1]
    return text.split("Status Message: ", 1)[-1].strip()


def _elem_type(case: MhaCase, name: str) -> int:
    """Return the ONNX element type of an input or output."""
    if name in INT32_INPUTS:
        return TensorProto.INT32
    return TensorProto.FLOAT if case.dtype == "fp32" else TensorProto.FLOAT16


def one_node_model(op_type: str, case: Any, input_names: Sequence[str], elem_type: Callable[[Any, str], int],
                   static_shapes: bool, **attributes: Any) -> bytes:
    """Return a serialized com.microsoft one-node model: the case's inputs by position (absent ones
    as ""; without shapes unless `static_shapes`), output and, when the case has them, the present
    key / value."""
    names = [name if shape is not None else "" for name, shape in zip(input_names, case.shapes)]
    while names and names[-1] == "":
        names.pop()
    inputs = [helper.make_tensor_value_info(name, elem_type(case, name), list(shape) if static_shapes else None)
              for name, shape in zip(input_names, case.shapes) if shape is not None]
    outputs = OUTPUT_NAMES[: 3 if case.has_present else 1]
    node = helper.make_node(op_type, names, list(outputs), domain="com.microsoft", **attributes)
    graph = helper.make_graph([node], op_type, inputs,
                              [helper.make_tensor_value_info(name, elem_type(case, name), None) for name in outputs])
    opsets = [helper.make_opsetid("", DEFAULT_OPSET), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION).SerializeToString()


def _model(case: MhaCase, static_shapes: bool) -> bytes:
    """MultiHeadAttention's one-node model."""
    return one_node_model("MultiHeadAttention", case, INPUT_NAMES, _elem_type, static_shapes,
                          num_heads=case.num_heads, unidirectional=int(case.unidirectional))


def _feeds(case: MhaCase) -> dict[str, np.ndarray]:
    """Return zero-filled inputs, with valid values where the kernel reads them as lengths."""
    feeds: dict[str, np.ndarray] = {}
    for name, shape in zip(INPUT_NAMES, case.shapes):
        if shape is None:
            continue
        dtype = np.int32 if name in INT32_INPUTS else (np.float32 if case.dtype == "fp32" else np.float16)
        feeds[name] = np.full(shape, _fill_value(case, name, shape), dtype=dtype)
    return feeds


def _fill_value(case: MhaCase, name: str, shape: tuple[int, ...]) -> int:
    """Key padding mask: the full length T for the 1-D kinds, 1 (keep) for 2-D and 3-D; the past
    length P for past_sequence_length; 0 for everything else."""
    if name == "key_padding_mask":
        return case.total if len(shape) == 1 else 1
    if name == "past_sequence_length":
        past_key = case.shape("past_key")
        return past_key[2] if past_key is not None and len(past_key) == 4 else 0
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
