"""What runs the context encoder besides eager torch: ONNX export, ONNX Runtime sessions, int8 quantization, and
the choice among them (the runtime setting). Import from the submodules."""
