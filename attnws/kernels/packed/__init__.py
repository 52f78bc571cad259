"""The packed family's kernels glue (PackedAttention, PackedMultiHeadAttention): one module per
name of `attnws.kernels.families.FAMILY_MODULES`, composing the backends' kernels."""
