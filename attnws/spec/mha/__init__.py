"""The MultiHeadAttention family (com.microsoft, CUDA): its own problem, builder, workspace
recipes, dispatch cascade and AOT reachability.

What this family shares with the packed operators: the arithmetic domain, the runtime
configuration (device, build, kernel options, environment), the capability tables of the TRT,
Flash and MEA kernels, the view / containment vocabulary and the solver. What is its own: every
formula below, taken from ONNX Runtime's `multihead_attention.cc`, `attention_impl.cu`
(GetAttentionWorkspaceSize), `attention_prepare_qkv.cu` (NoQkvWorkspace, PrepareQkv) and
`multihead_attention_helper.h` (CheckInputs); `docs/research/multihead-attention.md` names the
commit of every fact.
"""
