"""The packed family: PackedAttention (PA) and PackedMultiHeadAttention (PMHA), which share their
problem, builders, recipes and footprint (ORT's `packed_attention_workspace`). Its modules have
the names every family has (`attnws.spec.families`); ORT's backends are in `attnws.spec.backends`.
"""
