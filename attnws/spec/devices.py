"""The devices attnws models."""

# The compute capabilities attnws models: those ORT 1.31.1's CUDA 13 wheel carries kernels for. Its
# libonnxruntime_providers_cuda.so holds 2,058 cubins, for sm75, sm80, sm86, sm89, sm90 and sm120,
# and no PTX, so on sm70 (CUDA 13 dropped Volta) and sm100 (B200) its kernels cannot launch. The
# TRT fused and cross-attention kernels exist for sm75 to sm89 (their tables below also keep the
# source's sm70 rows); sm90 (H100, H200) and sm120 (RTX 50xx) run Flash, MEA, cuDNN and unfused.
KNOWN_SMS = (75, 80, 86, 89, 90, 120)


# The multiprocessor count Flash's split-KV heuristic and XQA's scratch read (cudaDeviceProp::
# multiProcessorCount), by named part; `--sm-count` overrides it. Each compute capability
# defaults to a common part. Blackwell data-centre parts (sm100: B200, 148 SMs) are not listed:
# ORT 1.31.1's wheel cannot launch its kernels there.
PART_SM_COUNTS = {
    "T4": (75, 40), "A100": (80, 108), "A10": (86, 72), "L4": (89, 58), "RTX 4090": (89, 128),
    "H100 SXM": (90, 132), "H200": (90, 132), "H100 PCIe": (90, 114), "RTX 5090": (120, 170),
}
DEFAULT_PART = {75: "T4", 80: "A100", 86: "A10", 89: "L4", 90: "H100 SXM", 120: "RTX 5090"}
MAX_SM_COUNT = 2**32 - 1  # multiProcessorCount is an int; XQA keeps it in uint32


def default_sm_count(sm: int) -> int:
    """The multiprocessor count of the part a compute capability defaults to."""
    return PART_SM_COUNTS[DEFAULT_PART[sm]][1]


def part_text(sm: int, sm_count: int) -> str:
    """Name the parts with this capability and SM count ('' when none is listed)."""
    return ", ".join(name for name, (cc, count) in PART_SM_COUNTS.items() if (cc, count) == (sm, sm_count))
