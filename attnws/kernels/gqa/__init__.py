"""The gqa family's kernels glue (GroupQueryAttention): one module per name of
`attnws.kernels.families.FAMILY_MODULES` (`layouts` is the preparation), its `routes` composing a
module per route (`xqa_route`, `flash_route`, `mea_route`, `unfused_route`) over the backends'
kernels and the preparation's (`preparation`)."""
