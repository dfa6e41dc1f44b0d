"""Text for the person at the terminal: what codemode prints made safe to show
(``control_chars``) and suggestions for a mistyped name (``hints``).

Leaves: nothing here imports another codemode package, and nothing is imported at
package import (the CLI's start-up path reads these)."""
