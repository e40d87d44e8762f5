// Shared by every kernel: extensions, the 128-byte push-constant block and strided indexing.
// Included once (fuse.rs's generated GEMM kernels include it before the GEMM's own source does).
#ifndef NXV_COMMON_GLSL
#define NXV_COMMON_GLSL
//
// Every kernel reads its sizes, offsets and strides from `pc` (32 x u32, the 128 bytes lavapipe
// guarantees); each shader's header comment says which slots it uses. Offsets and strides are in
// elements. Strides are signed (reverse uses negative ones) and may be 0 (broadcast axes).
// Elementwise kernels run one element per invocation over a 2-D grid of workgroups (x up to
// 65535, y as many rows as needed), so any element count fits. (A grid-stride loop was 50-200x
// slower on lavapipe.)
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require

layout(push_constant) uniform PushConstants { uint pc[32]; };
// The element-wise and reduction kernels declare their bindings `restrict`, so a compiler may
// keep several iterations' loads in flight ahead of their stores: no dispatch binds one buffer as
// both an input and its output (eager results are fresh buffers; capture.rs's buffer sharing
// hands a buffer on only to commands of later levels). Views of one binding (X, X4) are all
// read-only or write disjoint elements.
// Reductions and windows accumulate in the compute type W.
#if defined(W) && !defined(ACC)
#define ACC W
#endif

#define MAX_RANK 6
// Element-per-invocation kernels run in 1-D workgroups whose size is specialization constant 3
// (`layout(local_size_x_id = 3) in;`, declared by each kernel after this file): 256 invocations
// on GPUs, 64 on CPU devices (policy::workgroup on the host, which sizes their grids by the same
// value). Lavapipe runs a workgroup's invocations a SIMD vector at a time whatever the element
// count, so a one-element dispatch of 256 paid for 256; on the H200 64 slowed strided copies and
// gathers. Results never depend on it: no such kernel combines values across invocations.
// element_index and FOR_EACH_ELEMENT are macros, not functions, so that gl_WorkGroupSize is read
// where they are used, after the kernel's declaration: glslang gives it its default (1, 1, 1)
// where it is read before, which once made rows overlap past 65535 x 256 elements.
#define element_index() \
  (gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x))

// Element-wise kernels that declare `layout(constant_id = 2) const uint PER` visit PER elements
// each, one dispatch's worth of invocations apart, so every step is as coalesced as one element
// per invocation and the grid is PER times smaller (4 on GPUs; 1 on CPU devices, where lavapipe
// runs loops slowly). The host sizes such dispatches by the same constant (ops::dispatch_elements).
// The step never overflows: it stops once the next index would pass n.
#define FOR_EACH_ELEMENT(i, n) \
  for (uint i = element_index(), step_ = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x, k_ = 0u; \
       k_ < PER && i < (n); ++k_, i = ((n) - i <= step_) ? (n) : i + step_)

// Kernels of 4-byte element types defined with T4 (its 16-byte vector) run the contiguous case
// a vec4 at a time: each invocation then loads and stores whole 16-byte vectors, the widest
// access GPUs coalesce. The host dispatches ceil(n / 4) "elements" for them
// (Dtype::vector_width in dtype.rs says which kernels have it); the last, partial vector goes
// element by element.
// Element offset of linear (row-major) index `i` over `rank` dims stored at pc[dims_at..],
// with strides at pc[strides_at..] and base offset `base`.
uint strided(uint i, uint rank, uint dims_at, uint strides_at, uint base) {
  int off = int(base);
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[dims_at + d];
    uint q = i / dim;
    off += int(i - q * dim) * int(pc[strides_at + d]);
    i = q;
  }
  return uint(off);
}

// The positive quiet NaN wherever a result is NaN, as Nx writes :nan (hardware NaNs, from
// Inf - Inf say, may carry the sign bit: x86 and lavapipe make 0xFFC00000).
#define CANONICAL_NAN(T, v) (isnan(v) ? T(uintBitsToFloat(0x7fc00000u)) : T(v))

// The GEMM kernels store each result through STORE_C: into their binding c, or, built with
// EPILOGUE (a GEMM fused with the element-wise ops on its result, fuse.rs), through the
// epilogue those ops make, which then redefines it.
#ifndef STORE_C
#define STORE_C(i, v) c[i] = T(v)
#endif
#endif
