import sys

if sys.argv[1:] == ["case", "--stdio"]:
    # The candidate program a code round starts hundreds of times: straight to the
    # episode protocol, without the command line's imports (click, the home, ...).
    from agentd.app.case import main as case

    sys.exit(case())

from agentd.cli import main

main()
