"""Encoders: where pretrained models come from, the [MASK] context encoder, the sememe-enhanced quote encoder
and the encoder-based ranker. Import from the submodules (this keeps `import quoter.encoders.X` light)."""
