"""`python -m medrcube.testing.server`: print the base URL, serve until killed."""

import sys

from medrcube.testing.server.process import serve_main

sys.exit(serve_main())
