"""The one ONNX Runtime release attnws models, and what it assumes of the libraries beside it.

Every fact of the specification is read from ONNX Runtime 1.31.1 (docs/ort-version.md lists each
upstream file with the commit read, its date and why it is the 1.31.1 version).
"""

ORT_VERSION = "1.31.1"  # onnxruntime-gpu 1.31.1, CUDA 13 wheels, released 2026-10-23
# cuDNN's flash attention (MultiHeadAttention, off unless enabled) is modelled as cuDNN 9.6 or newer:
# ORT refuses cuDNN older than 9.3 and 9.10.0 / 9.10.1 (cudnn_sdpa::is_stable), and below 9.6 a
# bottom-right causal mask also needs S and T multiples of 64, which attnws does not model.
CUDNN_ASSUMED = "cuDNN 9.6 or newer (not 9.10.0 or 9.10.1)"
