"""The devices attnws models."""

# The compute capabilities attnws models: those ORT 1.31.1's CUDA 13 wheel carries kernels for. Its
# libonnxruntime_providers_cuda.so holds 2,058 cubins, for sm75, sm80, sm86, sm89, sm90 and sm120,
# and no PTX, so on sm70 (CUDA 13 dropped Volta) and sm100 (B200) its kernels cannot launch. The
# TRT fused and cross-attention kernels exist for sm75 to sm89 (their tables below also keep the
# source's sm70 rows); sm90 (H100, H200) and sm120 (RTX 50xx) run Flash, MEA, cuDNN and unfused.
KNOWN_SMS = (75, 80, 86, 89, 90, 120)

