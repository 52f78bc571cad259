"""The paged family's kernels glue (PagedAttention): one module per name of
`attnws.kernels.families.FAMILY_MODULES`, its `routes` composing a module per route
(`decode_route`, `mea_route`, `flash_route`) over the backends' kernels and the paged cache's own
(`paging`: the cumulative key lengths, ReshapeAndCache and the dense gather), and the rotary
prologue (`prologue`: QkNormRotaryTNH, rotary only, over the backends' rotary device function)."""
