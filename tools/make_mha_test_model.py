"""Generate the MultiHeadAttention test models in tests/data with ONNX Runtime's own tooling.

NOT run by CI and NOT imported by any test: attnws depends on none of onnxruntime, torch or
transformers. It is kept so that the committed files can be rebuilt and audited.

What it builds: a tiny, randomly initialised Whisper (no weights are downloaded: the model is
constructed from a `WhisperConfig`; d_model 16, 2 heads of size 8, 1 encoder layer, 2 decoder
layers, FFN 32, 8 mel bins, vocabulary 64, 1500 audio positions as ORT's wrappers require). ORT's
own Whisper wrappers export two graphs with the TorchScript exporter, and ORT's transformer
optimizer (`optimize_model`, model_type "bart", `FusionOptions.use_multi_head_attention`, the
settings of ORT's `WhisperHelper.optimize_onnx`) fuses their attention:

* `mha_encoder_decoder.onnx`: encoder + the decoder's first pass (ORT's "encoder_decoder_init",
  beam-search flavour). Encoder and decoder self-attention become com.microsoft `Attention`;
  the two cross-attention layers become `MultiHeadAttention` with separate key and value
  [B, 1500, 16] and the present_key / present_value outputs. fp32.
* `mha_decoder.onnx`: the decoder with past (ORT's "decoder", no beam-search op), converted to
  fp16 with ORT's float16 converter. Per layer one self-attention `MultiHeadAttention` (query,
  key, value [B, S, 16], bias, past_key / past_value [B, 2, P, 8], present outputs,
  unidirectional) and one cross-attention `MultiHeadAttention` (key / value [B, 2, 1500, 8],
  the BNSH "cross" format, bias). ORT's `add_output_qk_to_mha` then gives the LAST cross-attention
  node the output_qk output (output 3; outputs 1 and 2 become empty names), as ORT's Whisper
  export does for word-level timestamps.

Both files then get ORT's symbolic shape inference (`SymbolicShapeInference.infer_shapes`), so
their value_info records ORT's own view of every tensor's shape; the tests compare attnws's
reading of each MultiHeadAttention input with it (and strip it to check attnws's own shape rules).

How it was run (CPU only, Python 3.11, in a throwaway venv outside the repository):

    python3.11 -m venv /tmp/mkmodel && . /tmp/mkmodel/bin/activate
    pip install onnxruntime==1.30.0 onnx==1.23.2 torch==2.14.1 transformers==4.48.3
    python tools/make_mha_test_model.py tests/data

(numpy 2.4.6, protobuf 7.36.2, tokenizers 0.21.4 came with them.) transformers 4.48.3 because
ORT 1.30's Whisper decoder wrapper passes the past key/values as a tuple of tuples, which later
transformers releases no longer accept. The output is deterministic for these versions (fixed
seed); other versions may name nodes differently.
"""

from __future__ import annotations

import os
import sys
import tempfile


def _ort_tool_paths() -> None:
    """ORT's transformer tools import each other as top-level modules; put their folders first."""
    import onnxruntime.transformers as ort_transformers

    base = os.path.dirname(ort_transformers.__file__)
    sys.path[:0] = [base, os.path.join(base, "models", "whisper")]


def tiny_whisper():
    """Return (config, model): a randomly initialised tiny Whisper with eager attention."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=8,
        max_source_positions=1500, max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        decoder_start_token_id=1, suppress_tokens=[], begin_suppress_tokens=[],
    )
    config._attn_implementation = "eager"  # the pattern ORT's fusion matches
    return config, WhisperForConditionalGeneration(config).eval()


def with_shapes(path: str) -> None:
    """Rewrite the model at `path` with ORT's symbolic shape inference stored as value_info."""
    import onnx
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    model = SymbolicShapeInference.infer_shapes(onnx.load(path), auto_merge=True, guess_output_rank=False)
    onnx.save(model, path)


def main(out_dir: str) -> None:
    _ort_tool_paths()
    import onnx
    from convert_generation import add_output_qk_to_mha
    from onnx_model import OnnxModel
    from whisper_decoder import WhisperDecoder
    from whisper_encoder_decoder_init import WhisperEncoderDecoderInit
    from whisper_helper import WhisperHelper

    config, model = tiny_whisper()
    heads, hidden, layers = config.decoder_attention_heads, config.d_model, config.decoder_layers
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # encoder + decoder first pass: cross-attention MultiHeadAttention with present outputs
        raw, fused = os.path.join(tmp, "encdec.onnx"), os.path.join(tmp, "encdec_opt.onnx")
        encdec = WhisperEncoderDecoderInit(config, model, "hf", no_beam_search_op=False).eval()
        WhisperHelper.export_onnx(encdec, raw, "CPUExecutionProvider", False, False, use_fp16_inputs=False,
                                  use_int32_inputs=True, use_encoder_hidden_states=False, use_kv_cache_inputs=False)
        WhisperHelper.optimize_onnx(raw, fused, False, heads, hidden, layers, is_decoder=False)
        target = os.path.join(out_dir, "mha_encoder_decoder.onnx")
        OnnxModel(onnx.load(fused)).save_model_to_file(target)
        with_shapes(target)

        # decoder with past: self and cross MultiHeadAttention, fp16, output_qk on the last node
        raw, fused = os.path.join(tmp, "dec.onnx"), os.path.join(tmp, "dec_opt.onnx")
        decoder = WhisperDecoder(config, model, "hf", no_beam_search_op=True).eval()
        WhisperHelper.export_onnx(decoder, raw, "CPUExecutionProvider", False, False, use_fp16_inputs=False,
                                  use_int32_inputs=True, use_encoder_hidden_states=False, use_kv_cache_inputs=True)
        WhisperHelper.optimize_onnx(raw, fused, False, heads, hidden, layers, is_decoder=True, no_beam_search_op=True)
        optimized = OnnxModel(onnx.load(fused))
        optimized.convert_float_to_float16(keep_io_types=False, use_symbolic_shape_infer=True)
        mha_count = sum(1 for node in optimized.model.graph.node if node.op_type == "MultiHeadAttention")
        target = os.path.join(out_dir, "mha_decoder.onnx")
        optimized.save_model_to_file(target)
        with_shapes(target)  # first: ORT's symbolic inference fails on the empty output names added next
        with_qk = add_output_qk_to_mha(OnnxModel(onnx.load(target)), skip_node_idxs=list(range(mha_count - 1)))
        with_qk.save_model_to_file(target)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data"))
