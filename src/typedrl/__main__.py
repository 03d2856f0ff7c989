"""``python -m typedrl``: the same as the ``typedrl`` command."""

from typedrl.cli import main

raise SystemExit(main())
