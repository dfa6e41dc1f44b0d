"""``python -m codemode.launch serve SOCKET PID`` (the warm server), or the launcher."""

import sys

if sys.argv[1:2] == ["serve"]:
    import os

    # Not the working folder `-m` put first (each run sets its own, as its script's).
    sys.path[0] = os.path.dirname(sys.executable)
    from codemode.launch.serve import main as serve

    sys.exit(serve(sys.argv[2:]))

from codemode.launch import main

main()
