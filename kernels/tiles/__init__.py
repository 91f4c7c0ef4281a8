"""2-D tiles in Triton, three ways (lesson 13, section 3): the same tiled copy written with
pointer arithmetic and a 2-D mask (as in lesson 03), with a block pointer
(``tl.make_block_ptr``, ``boundary_check``, ``padding_option``) and with a tensor descriptor
(``tl.make_tensor_descriptor``). A teaching module, not a registered op: the copy is the plainest
2-D tile there is, so that what differs is only how the tile is addressed."""
