"""Scenario files: the pydantic model of a scenario (``config``), ``--set`` overrides (``overrides``), the
checks that report every problem at once with its field path (``validation``) and the JSON schema
(``schema``). ``load_scenario`` is the way in."""
