"""What ORT's attention backends are, whatever operator family calls them: Flash, CUTLASS
memory-efficient attention (MEA), cuDNN, the TensorRT-style fused kernels (TRT) and the unfused
GEMM-softmax-GEMM route. Each module holds the backend's support predicates (kernel tables) and
the bytes of the buffers it needs, written once; the families' recipes compose them.
"""
