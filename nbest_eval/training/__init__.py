"""What the training loops share: the early-stopping decision and its saved state, source lines matched to
gold prompts, samples for the log."""
