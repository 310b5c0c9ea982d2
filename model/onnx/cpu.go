package onnx

// QuantForm names the form of the int8 graph QuantizeDynamic writes: int8
// weights of 7 bits (WeightMax), whose result does not depend on the CPU's
// kernels. A variant made by an earlier synapse (8-bit weights, no form
// recorded) gives other vectors on a CPU without VNNI than where it was
// measured, and is made again.
const QuantForm = "int8-w7"
