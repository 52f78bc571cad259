"""GroupQueryAttention (com.microsoft GroupQueryAttention), the family of decoder LLMs: its problem,
builder, inputs, workspace recipes, runtime cascade, ORT 1.31.1's own AOT estimator, footprint and
fields, in the modules every family has (`attnws.spec.families`)."""
