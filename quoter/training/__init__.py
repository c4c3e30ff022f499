"""Training of the QuoteR model: stage 1 trains both encoders on gold + negative quotes, stage 2 freezes the
quote encoder and keeps training the context encoder over every training quote; the result is a Bundle."""
