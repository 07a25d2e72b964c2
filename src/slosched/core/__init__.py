"""Domain model, views (what policies may read) and config errors."""
