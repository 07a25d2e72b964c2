"""Jobs: workflows and relQueries run through the dispatcher, kept in a durable store (``store/``)."""
