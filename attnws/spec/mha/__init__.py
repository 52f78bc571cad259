"""The MultiHeadAttention family (com.microsoft, CUDA): its own problem, builder, inputs, workspace
recipes, dispatch cascade, AOT reachability, footprint, estimate notes and run-time failures, in
the modules every family has (`attnws.spec.families`).

What this family shares with the packed operators: the arithmetic domain, the runtime
configuration (device, build, kernel options, environment), ORT's backends
(`attnws.spec.backends`), the view / containment vocabulary and the solver. What is its own:
every formula in these modules, taken from ONNX Runtime's `multihead_attention.cc`, `attention_impl.cu`
(GetAttentionWorkspaceSize), `attention_prepare_qkv.cu` (NoQkvWorkspace, PrepareQkv) and
`multihead_attention_helper.h` (CheckInputs); `docs/research/multihead-attention.md` names the
commit of every fact.
"""
