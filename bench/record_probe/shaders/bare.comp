#version 450
// No buffers at all: what a dispatch costs the driver with nothing to bind.
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint words[32]; } p;
shared uint sink;
void main() {
    if (gl_LocalInvocationIndex == p.words[0]) sink = p.words[1];
}
