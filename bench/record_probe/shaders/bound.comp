#version 450
// Buffers through set 0 (push descriptors or a bound set), sizes through push constants: the
// shape of every NIF kernel.
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint words[32]; } p;
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.words[0]) c[i] = a[i] + b[i];
}
