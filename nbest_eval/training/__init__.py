"""What the training loops share: the early-stopping decision and its saved state, the hand-off queue and
sidecar loop (evaluation off the training clock), source lines matched to gold prompts, samples for the log."""
