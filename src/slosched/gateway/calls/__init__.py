"""One OpenAI call: its parsed, validated body and SLO headers (``Call``), and the 4xx ``HttpError``."""
