"""The CPU layer of the runtime backends: the base that counts threads, times calls with the host clock and
reads the board (runtime.py), a board's facts and throttling (board.py, throttling.py), and where pip's wheels put
the native libraries a backend loads (wheel_libraries.py)."""
