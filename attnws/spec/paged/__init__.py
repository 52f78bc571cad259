"""The PagedAttention family (com.microsoft PagedAttention): its problem, builder, dispatch,
recipes, footprint, attnws's own bound and its fields."""
