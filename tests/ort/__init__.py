"""attnws's MultiHeadAttention builder judged by the real engine: ONNX Runtime's CPU kernel, which
shares its input checks (multihead_attention_helper.h CheckInputs) with the CUDA kernel."""
