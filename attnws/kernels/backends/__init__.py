"""The backends' kernels, written once whatever family calls them (`attnws.kernels.families`).

- `trt`: the TRT runner's fused attention over interleaved Q/K/V, its cross attention over packed
  KV, and the sequence offsets both read.
- `flash`, `mea`: Flash- and MEA-style attention over packed (varlen) planar Q, K, V; Flash writes
  its LSE, MEA accumulates in its float32 workspace when it has one.
- `strided`: Flash-, MEA- and cuDNN-style attention over strided views of padded batches, with key
  masks, causality and a past.
- `unfused`: the scores GEMM, the masked softmax and the context GEMM over the scratch regions.
- `online_softmax`, `attention_bias`: the device functions the kernels above share.
- `rotary`: rotary embedding's device function, which the families' prologues share
  (GroupQueryAttention's UnpackRoPEAppend, PagedAttention's QkNormRotaryTNH).

A backend module names no family; a family's modules (`attnws.kernels.<family>`) compose these
into the launches of each route. What a backend module defines is defined in no family (tested).
"""
