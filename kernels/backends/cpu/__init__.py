"""The CPU layer of the runtime backends: the base that counts threads, times calls with the host clock and
reads the board (runtime.py), and a board's facts and throttling (board.py, throttling.py)."""
