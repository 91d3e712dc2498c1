"""Files: whether a path may be written, and writing it all or nothing (no reader sees half a file)."""
