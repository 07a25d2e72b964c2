"""``python -m slosched.cli``: the console script, for launchers that need the interpreter explicitly."""

from slosched.cli.main import main

main()
