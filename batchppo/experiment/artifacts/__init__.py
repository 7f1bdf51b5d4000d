"""What a run leaves and what is made from it: run dirs and their lock, checkpoints, metrics and
episode logs and how an evaluation was measured, tracking, provenance, a loaded policy, videos and
ONNX export."""
