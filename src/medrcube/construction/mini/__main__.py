"""`python -m medrcube.construction.mini [OUT_DIR]`: rebuild the bundled mini cube."""

from medrcube.construction.mini.cube import main

raise SystemExit(main())
