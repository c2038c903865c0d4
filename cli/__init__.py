"""The `tpuplane` command line. Exit statuses shared by every command: 0 done, 1 the check or action failed,
2 bad input (one message on stderr, never a traceback)."""

EXIT_BAD_INPUT = 2
