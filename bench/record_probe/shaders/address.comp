#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
// Buffers as device addresses in the push constants: no descriptors at all.
layout(local_size_x = 64) in;
layout(buffer_reference, std430) buffer Floats { float v[]; };
layout(push_constant) uniform Push { Floats a; Floats b; Floats c; uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) p.c.v[i] = p.a.v[i] + p.b.v[i];
}
