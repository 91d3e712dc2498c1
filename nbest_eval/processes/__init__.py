"""Scoring in other processes: worker processes for big files (score --jobs), a helper beside
training's generation."""
