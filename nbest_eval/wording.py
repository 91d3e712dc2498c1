"""Counts in messages and figures spelled as English does: "1 prompt", "2 prompts", "0 prompts"."""


def counted(n: int, singular: str, plural: str = "") -> str:
    """``n`` and the noun in its number; ``plural`` where it is not ``singular`` + "s"."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"
