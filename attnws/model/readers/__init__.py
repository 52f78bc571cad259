"""The node readers, one module per spec family (`attnws.spec.<family>` and
`attnws.model.readers.<family>` share the family's name), each offering `Reader` (its
`attnws.model.reader.NodeReader`) and `READERS` (one per operator of the family). The registry,
`attnws.model.registry`, lists them by ONNX op type.
"""
