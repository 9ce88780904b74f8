#!/bin/bash
# The terminal session of one document (run by runner.py on a pseudo-terminal, as the recipe
# user): reads one block folder per line from the control FIFO and runs step.sh on it in the
# foreground, on this terminal, reporting "start PID" (from step.sh) and "end STATUS" on the
# result FIFO. Staying alive between blocks, it keeps the terminal open the way a user's shell
# window does, so that what a block starts in the background outlives the block.
# Usage: controller.sh CONTROL_FIFO RESULT_FIFO STEP_SCRIPT
exec 3<"$1" 4>"$2"
while IFS= read -r -u 3 dir; do
    bash "$3" "$dir" 3<&-
    echo "end $?" >&4
done
