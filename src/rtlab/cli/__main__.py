import sys

from rtlab.cli import main

sys.exit(main())
