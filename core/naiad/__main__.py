"""``python -m naiad``: the same as the ``naiad`` command."""

from naiad.cli import main

raise SystemExit(main())
