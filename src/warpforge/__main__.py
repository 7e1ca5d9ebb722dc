"""``python -m warpforge`` (also under ``torchrun ... -m warpforge``) runs the CLI."""

from warpforge.cli import main

main()
