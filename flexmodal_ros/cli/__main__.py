"""Allow ``python -m flexmodal_ros.cli``."""
import sys

from . import main

sys.exit(main())
