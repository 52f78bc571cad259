"""The mha family's kernels glue (MultiHeadAttention): one module per name of
`attnws.kernels.families.FAMILY_MODULES`, composing the backends' kernels."""
