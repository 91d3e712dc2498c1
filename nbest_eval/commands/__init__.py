"""Sub-commands of the ``nbest-eval`` CLI."""
