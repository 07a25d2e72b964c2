"""Step-time models (ground truth and belief) and output-length predictors."""
