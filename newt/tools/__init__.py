"""Host-side tools (Triton's ``triton.tools``): ``newt.tools.tensor_descriptor.TensorDescriptor``."""
