#version 450
// A workgroup-scope cooperative-matrix-2 GEMM (GL_NV_cooperative_matrix2): c = a b for row-major
// M x K and K x N operands of TYPE (float16_t or bfloat16_t), f32 accumulation, c of OUT. The
// driver splits each BM x BN block over the workgroup's subgroups and stages the tensor-addressed
// loads itself (edges read as zeros). Defines: TYPE, OUT, BM, BN, BK, THREADS.
// Push: M, N, K. Dispatch: (ceil(N/BN), ceil(M/BM), 1).
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_bfloat16 : require
layout(local_size_x = THREADS) in;
layout(set = 0, binding = 0) readonly buffer A { TYPE a[]; };
layout(set = 0, binding = 1) readonly buffer B { TYPE b[]; };
layout(set = 0, binding = 2) writeonly buffer C { OUT c[]; };
layout(push_constant) uniform P { uint M, N, K; };

void main() {
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  la = setTensorLayoutDimensionNV(la, M, K);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  lb = setTensorLayoutDimensionNV(lb, K, N);
  tensorLayoutNV<2> lc = createTensorLayoutNV(2);
  lc = setTensorLayoutDimensionNV(lc, M, N);
  uint r0 = gl_WorkGroupID.y * BM, c0 = gl_WorkGroupID.x * BN;
  coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
  for (uint k = 0; k < K; k += BK) {
    coopmat<TYPE, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
    coopmat<TYPE, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
    coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(la, r0, BM, k, BK));
    coopMatLoadTensorNV(mb, b, 0, sliceTensorLayoutNV(lb, k, BK, c0, BN));
    acc = coopMatMulAdd(ma, mb, acc);
  }
  coopmat<OUT, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> o =
      coopmat<OUT, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
  coopMatStoreTensorNV(o, c, 0, sliceTensorLayoutNV(lc, r0, BM, c0, BN));
}
