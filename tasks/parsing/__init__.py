"""Answers that failed to parse: per model, the share unparsed and the score with and without them."""
