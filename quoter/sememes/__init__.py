"""Sememes for the quote encoder: lexicon sources behind one interface, word segmentation, the alignment of
words to tokens, and coverage measurement. Import from the submodules."""
