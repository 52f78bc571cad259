"""GroupQueryAttention kernels (in progress)."""
