"""Write the TRT attention kernel names that an onnxruntime-gpu wheel ships, one per line.

    python tools/list_ort_wheel_kernels.py onnxruntime_gpu-1.31.1-*.whl > tests/data/ort-1.31.1-trt-kernels.txt

Reads `libonnxruntime_providers_cuda.so` inside the wheel and keeps the names of the TRT fused
runner's XMMA and flash kernels and of the fused cross-attention kernels (the cubins' function
names, which ORT looks up by string). `tests/spec/test_capability.py` holds attnws's kernel
tables against the list. Not run in CI (the wheel is 250 MB); standard library only.
"""

from __future__ import annotations

import re
import sys
import zipfile

NAME = re.compile(rb"(?:fmha_v2_(?:flash_attention_)?fp16_[0-9A-Za-z_]*?_sm[0-9]+_kernel"
                  rb"|fused_multihead_attention_v2_fp16_[0-9]+_[0-9]+_kernel_sm[0-9]+"
                  rb"|fmha_mhca_fp16_[0-9]+_[0-9]+_sm[0-9]+_kernel)(?=\x00)")


def kernel_names(wheel: str) -> list[str]:
    """Return the sorted, distinct kernel names found in the wheel's CUDA provider library."""
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith("libonnxruntime_providers_cuda.so"))
        data = archive.read(member)
    return sorted({m.decode() for m in NAME.findall(data)})


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/list_ort_wheel_kernels.py WHEEL")
    print("\n".join(kernel_names(sys.argv[1])))
