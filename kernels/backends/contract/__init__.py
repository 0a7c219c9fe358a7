"""What a backend is and says of itself: the interface the harness drives (base.py), the declaration the
host reads without the library (declaration.py), and the rules both sides derive from declarations (which
directions a result holds, which precisions a backend makes, which unsupported reasons it can give)."""
