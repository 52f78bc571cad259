"""GroupQueryAttention (com.microsoft GroupQueryAttention), the family of decoder LLMs: ORT
1.31.1's graph-free workspace recipes and estimator (issue 22, in progress; see
`attnws.spec.families.IN_PROGRESS`)."""
