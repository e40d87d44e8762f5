//! Elementwise families: unary math, binary arithmetic and comparisons (broadcast through
//! strides), and select.
use super::*;
use crate::dtype::Dtype;
use crate::shaders::{self, Family};
use crate::tensor::{alloc, BufferArg};
use std::borrow::Cow;
use rustler::{Atom, Env};

/// Unary op codes: the index is the `case` in shaders/unary.comp. Which ops a dtype has: floats
/// 0..=13 and 18..=32, integers 0..=5 and 15..=17.
static UNARY_OPS: OpTable = OpTable::new(&[
    "negate", "abs", "sign", "floor", "ceil", "round", "exp", "expm1", "log", "log1p", "sqrt",
    "rsqrt", "tanh", "sigmoid", "", "bitwise_not", "count_leading_zeros", "population_count",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt",
    "erf", "erfc", "erf_inv",
]);
/// Precise f32 unary ops that keep one element per step: the rest take unary_f32p_v4's 16-byte
/// vectors. H200 (f2ce710), us for 64 M elements, scalar / vectors: exp 289 / 193, sigmoid
/// 311 / 237, sqrt 304 / 180, negate 243 / 155, log 686 / 644, expm1 531 / 511, erf 1493 / 1498;
/// but tanh 983 / 1015 and sin 465 / 506 (cos and tan share sin's reduction).
const PRECISE_SCALAR_UNARY: [u32; 4] = [12, 18, 19, 20];
/// Binary arithmetic op codes (shaders/binary.comp without OUT_U8). Floats: 0..=6; integers all
/// but divide (Nx divides integers as floats).
static ARITH_OPS: OpTable = OpTable::new(&[
    "add", "subtract", "multiply", "divide", "max", "min", "pow", "quotient", "remainder",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "atan2",
]);
/// Comparison and logical op codes (shaders/binary.comp with OUT_U8): results are u8.
static COMPARE_OPS: OpTable = OpTable::new(&[
    "equal", "not_equal", "greater", "less", "greater_equal", "less_equal", "logical_and",
    "logical_or", "logical_xor",
]);

const FLOAT_UNARY: [u32; 29] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32,
];

fn is_integer(dtype: Dtype) -> bool {
    use Dtype::*;
    matches!(dtype, S8 | S16 | S32 | S64 | U8 | U16 | U32 | U64)
}

/// The kernel of `family` for `dtype`, if that dtype has op `code` (`float_ops` / `int_ops`).
fn kernel_for(family: Family, dtype: Dtype, code: u32, name: &str, float_ops: &[u32], int_ops: &[u32]) -> Result<Kernel> {
    let has_op = if is_integer(dtype) { int_ops.contains(&code) } else { float_ops.contains(&code) };
    match shaders::numeric(family, dtype, precise_f32()) {
        Some(kernel) if has_op => Ok(kernel),
        _ => Err(unsupported!("{name} on {} has no device kernel yet", dtype.name())),
    }
}

#[rustler::nif]
fn unary_op(env: Env, op: Atom, dtype: Dtype, x: BufferArg, n: u64) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    let (code, name) = UNARY_OPS.code(env, op)?;
    let mut kernel = kernel_for(Family::Unary, dtype, code, name, &FLOAT_UNARY, &[0, 1, 2, 3, 4, 5, 15, 16, 17])?;
    if dtype == Dtype::F32 && precise_f32() && !PRECISE_SCALAR_UNARY.contains(&code) {
        kernel = shaders::unary_f32p_v4;
    }
    let mut push = Push::new();
    push.set(0, n)?;
    // A lazy view is read through its strides (element by element) where binary ops would read it
    // in place; otherwise it is copied when bound.
    if let Some((base, dims, strides)) = view_in_place(&x).filter(|(_, dims, _)| element_count(dims) == n) {
        check_extent(&base, dtype.bytes(), 0, &dims, &strides)?;
        let (dims, strides) = collapse(&dims, &[strides])?;
        push.set(1, dims.len() as u64)?;
        push.set_dims(4, &dims)?;
        push.set_strides(10, &strides[0])?;
        let out = alloc(n * dtype.bytes())?;
        dispatch_elements(kernel, code | STRIDED_UNARY, &[&base, &out], push, n, false)?;
        return Ok(out);
    }
    check_extent(&x, dtype.bytes(), 0, &[n], &[1])?;
    let out = alloc(n * dtype.bytes())?;
    dispatch_elements(kernel, code, &[&x, &out], push, n, kernel.vectorized)?;
    Ok(out)
}

static CLASSIFY_OPS: OpTable = OpTable::new(&["is_nan", "is_infinity"]);

/// is_nan / is_infinity of a floating-point tensor, as u8.
#[rustler::nif]
fn classify(env: Env, op: Atom, dtype: Dtype, x: BufferArg, n: u64) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    let (code, name) = CLASSIFY_OPS.code(env, op)?;
    let kernel = shaders::numeric(Family::Classify, dtype, false)
        .ok_or_else(|| unsupported!("{name} on {} has no device kernel yet", dtype.name()))?;
    check_extent(&x, dtype.bytes(), 0, &[n], &[1])?;
    let out = alloc(n)?;
    let mut push = Push::new();
    push.set(0, n)?;
    dispatch(kernel, code, &[&x, &out], push, elementwise_groups(n))?;
    Ok(out)
}

/// `op(a, b)` with `a` and `b` broadcast to `out_shape`. `dtype` is the type both inputs already
/// have (the Elixir side casts them); arithmetic returns that type, comparisons u8.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn binary_op(
    env: Env,
    op: Atom,
    dtype: Dtype,
    a: BufferArg,
    a_shape: Shape,
    b: BufferArg,
    b_shape: Shape,
    out_shape: Shape,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&a, &b])?;
    let _capture = crate::capture::scope(env);
    if matches!(dtype, Dtype::C64 | Dtype::C128) {
        return complex_binary(env, op, dtype, a, a_shape, b, b_shape, out_shape);
    }
    let (kernel, code, out_bytes) = match ARITH_OPS.code(env, op) {
        Ok((code, name)) => (
            kernel_for(Family::Binary, dtype, code, name, &[0, 1, 2, 3, 4, 5, 6, 8, 14], &[0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])?,
            code,
            dtype.bytes(),
        ),
        Err(_) => {
            let (code, name) = COMPARE_OPS.code(env, op)?;
            // Every dtype has every comparison (no list built on this path).
            (kernel_for(Family::Compare, dtype, code, name, &[code], &[code])?, code, 1)
        }
    };
    broadcast_dispatch(kernel, code, dtype.bytes(), out_bytes, (&a, &a_shape), (&b, &b_shape), &out_shape)
}

/// Queues a two-input kernel (binary.comp's layout of push constants) over `out_shape`, with `a`
/// and `b` broadcast through strides; returns the new output of `out_bytes`-byte elements.
fn broadcast_dispatch(
    kernel: Kernel,
    code: u32,
    in_bytes: u64,
    out_bytes: u64,
    (a, a_shape): (&BufferRef, &[u64]),
    (b, b_shape): (&BufferRef, &[u64]),
    out_shape: &[u64],
) -> Result<BufferRef> {
    let n = element_count(out_shape);
    let lazy = a.is_view || b.is_view;
    let collapsed;
    let bound;
    let (dims, strides): (&[u64], [&[i64]; 2]) = match flat_layout(a_shape, b_shape, out_shape, n).filter(|_| !lazy) {
        Some(strides) => {
            check_contiguous(a, in_bytes, a_shape)?;
            check_contiguous(b, in_bytes, b_shape)?;
            bound = None;
            (std::slice::from_ref(&n), strides)
        }
        None => {
            let (a, a_strides) = bound_operand(a, in_bytes, a_shape, out_shape)?;
            let (b, b_strides) = bound_operand(b, in_bytes, b_shape, out_shape)?;
            bound = Some((a, b));
            collapsed = collapse(out_shape, &[a_strides, b_strides])?;
            (&collapsed.0, [&collapsed.1[0], &collapsed.1[1]])
        }
    };
    let (a, b) = match &bound {
        Some((a, b)) => (&**a, &**b),
        None => (a, b),
    };
    let out = alloc(n * out_bytes)?;
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, dims.len() as u64)?;
    push.set_dims(4, dims)?;
    push.set_strides(10, strides[0])?;
    push.set_strides(16, strides[1])?;
    // binary.comp's vector path: one dim, each operand contiguous or a broadcast scalar; under
    // precise f32 only for the ops that cost one f64 instruction (add .. min): four f64 pow or
    // atan2 evaluations per step measured slower than one (as f64 exp did: 655 vs 385 us for
    // 64 M elements on the H200).
    let cheap = !precise_f32() || code <= 5;
    let vector = kernel.vectorized && cheap && dims.len() == 1 && strides.iter().all(|s| matches!(s[0], 0 | 1));
    push.set(22, vector as u64)?;
    dispatch_elements(kernel, code, &[a, b, &out], push, n, vector)?;
    Ok(out)
}

/// The op-code bit that selects unary.comp's variant reading a lazy view through strides.
const STRIDED_UNARY: u32 = 1 << 31;

/// Elements up to which an element-wise op reads a lazy view that walks its base out of order
/// (a transpose) through its strides rather than its copy; past it the copy's tiled transpose
/// reads the base faster than the op's scattered loads would (in-order views, broadcasts that
/// repeat rows, are always read in place).
const SCATTERED_VIEW_ELEMENTS: u64 = 1 << 20;

/// A lazy view's base and strides where a kernel reads `operand` of `shape` (what Elixir passed)
/// in place; None for plain tensors and for views it binds as they are (copied when bound).
fn read_through_view(operand: &BufferRef, shape: &[u64]) -> Option<(BufferRef, Vec<i64>)> {
    view_in_place(operand).and_then(|(base, dims, strides)| (dims == shape).then_some((base, strides)))
}

/// A lazy view's base, dims and strides where an element-wise kernel reads it in place (see
/// SCATTERED_VIEW_ELEMENTS); None for other tensors and for views it should copy first.
fn view_in_place(operand: &BufferRef) -> Option<(BufferRef, Vec<u64>, Vec<i64>)> {
    let (base, dims, strides) = operand.lazy_parts()?;
    let moving: Vec<i64> = dims.iter().zip(&strides).filter(|&(&d, &s)| d > 1 && s != 0).map(|(_, &s)| s).collect();
    let in_order = moving.windows(2).all(|w| w[0] > w[1]);
    (in_order || element_count(&dims) <= SCATTERED_VIEW_ELEMENTS).then_some((base, dims, strides))
}

/// What a kernel that broadcasts its operands through strides binds for `operand` of `shape`
/// (elements of `elem_bytes`) and the strides it reads it by over `out_shape`: a lazy view's
/// base where `read_through_view` says so, else the operand, whose size is checked.
fn bound_operand<'a>(
    operand: &'a BufferRef,
    elem_bytes: u64,
    shape: &[u64],
    out_shape: &[u64],
) -> Result<(Cow<'a, BufferRef>, Vec<i64>)> {
    match read_through_view(operand, shape) {
        Some((base, own)) => Ok((Cow::Owned(base), broadcast_strides_from(shape, &own, out_shape)?)),
        None => {
            check_contiguous(operand, elem_bytes, shape)?;
            Ok((Cow::Borrowed(operand), broadcast_strides(shape, out_shape)?))
        }
    }
}

/// The operands' strides when the op is one flat pass (what `collapse` would give, without
/// building stride vectors on the path every eager binary op takes): each operand either has the
/// output's shape (stride 1) or holds one element (stride 0, at a rank the output's covers), over
/// more than one element.
fn flat_layout(a_shape: &[u64], b_shape: &[u64], out_shape: &[u64], n: u64) -> Option<[&'static [i64]; 2]> {
    let stride = |shape: &[u64]| -> Option<&'static [i64]> {
        if shape == out_shape {
            Some(&[1])
        } else if shape.len() <= out_shape.len() && shape.iter().all(|&d| d == 1) {
            Some(&[0])
        } else {
            None
        }
    };
    if n <= 1 {
        return None;
    }
    Some([stride(a_shape)?, stride(b_shape)?])
}

static COMPLEX_ARITH: OpTable = OpTable::new(&["add", "subtract", "multiply", "divide", "pow"]);
static COMPLEX_COMPARE: OpTable = OpTable::new(&["equal", "not_equal"]);

#[allow(clippy::too_many_arguments)]
fn complex_binary(
    env: Env,
    op: Atom,
    dtype: Dtype,
    a: BufferArg,
    a_shape: Shape,
    b: BufferArg,
    b_shape: Shape,
    out_shape: Shape,
) -> Result<BufferRef> {
    let c64 = dtype == Dtype::C64;
    let (kernel, code, out_bytes) = match COMPLEX_ARITH.code(env, op) {
        Ok((code, _)) => (
            if c64 { shaders::complex_binary_c64 } else { shaders::complex_binary_c128 },
            code,
            dtype.bytes(),
        ),
        Err(_) => {
            let (code, _) = COMPLEX_COMPARE.code(env, op)?;
            (if c64 { shaders::complex_compare_c64 } else { shaders::complex_compare_c128 }, code, 1)
        }
    };
    broadcast_dispatch(kernel, code, dtype.bytes(), out_bytes, (&a, &a_shape), (&b, &b_shape), &out_shape)
}

static COMPLEX_UNARY: OpTable = OpTable::new(&[
    "negate", "conjugate", "sqrt", "exp", "log", "expm1", "log1p", "sigmoid", "sin", "cos", "tan",
    "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "rsqrt", "cbrt",
]);
static COMPLEX_REAL: OpTable = OpTable::new(&["abs", "is_nan", "is_infinity"]);

/// abs (to the real type) and is_nan / is_infinity (to u8) of a complex tensor.
#[rustler::nif]
fn complex_real(env: Env, op: Atom, dtype: Dtype, x: BufferArg, n: u64) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    let (code, name) = COMPLEX_REAL.code(env, op)?;
    let (kernel, real_bytes) = match dtype {
        Dtype::C64 => (shaders::complex_real_c64, 4),
        Dtype::C128 => (shaders::complex_real_c128, 8),
        other => return Err(unsupported!("{name} on {} takes the complex kernel only", other.name())),
    };
    check_extent(&x, dtype.bytes(), 0, &[n], &[1])?;
    let out = alloc(n * if code == 0 { real_bytes } else { 1 })?;
    let mut push = Push::new();
    push.set(0, n)?;
    dispatch(kernel, code, &[&x, &out], push, elementwise_groups(n))?;
    Ok(out)
}

/// negate / conjugate of a complex tensor.
#[rustler::nif]
fn complex_unary(env: Env, op: Atom, dtype: Dtype, x: BufferArg, n: u64) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    let (code, name) = COMPLEX_UNARY.code(env, op)?;
    let kernel = match dtype {
        Dtype::C64 => shaders::complex_unary_c64,
        Dtype::C128 => shaders::complex_unary_c128,
        other => return Err(unsupported!("{name} on {} takes the complex kernel only", other.name())),
    };
    check_extent(&x, dtype.bytes(), 0, &[n], &[1])?;
    let out = alloc(n * dtype.bytes())?;
    let mut push = Push::new();
    push.set(0, n)?;
    dispatch(kernel, code, &[&x, &out], push, elementwise_groups(n))?;
    Ok(out)
}

/// `pred ? on_true : on_false`, each broadcast to `out_shape`; `pred` is u8, the values any type
/// of `elem_bytes` bytes.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn select(
    env: rustler::Env,
    elem_bytes: u64,
    pred: BufferArg,
    pred_shape: Vec<u64>,
    on_true: BufferArg,
    true_shape: Vec<u64>,
    on_false: BufferArg,
    false_shape: Vec<u64>,
    out_shape: Vec<u64>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&pred, &on_true, &on_false])?;
    let _capture = crate::capture::scope(env);
    if elem_bytes == 16 {
        // c128: pairs of 8-byte halves, the pair an innermost axis the predicate broadcasts over.
        let pair = |shape: Vec<u64>, last: u64| shape.into_iter().chain([last]).collect::<Vec<_>>();
        return select_elements(
            8,
            pred,
            pair(pred_shape, 1),
            on_true,
            pair(true_shape, 2),
            on_false,
            pair(false_shape, 2),
            pair(out_shape, 2),
        );
    }
    select_elements(elem_bytes, pred, pred_shape, on_true, true_shape, on_false, false_shape, out_shape)
}

#[allow(clippy::too_many_arguments)]
fn select_elements(
    elem_bytes: u64,
    pred: BufferArg,
    pred_shape: Vec<u64>,
    on_true: BufferArg,
    true_shape: Vec<u64>,
    on_false: BufferArg,
    false_shape: Vec<u64>,
    out_shape: Vec<u64>,
) -> Result<BufferRef> {
    let kernel = by_width(elem_bytes, shaders::select_b1, shaders::select_b2, shaders::select_b4, shaders::select_b8)?;
    let n = element_count(&out_shape);
    let (pred, pred_strides) = bound_operand(&pred, 1, &pred_shape, &out_shape)?;
    let (on_true, true_strides) = bound_operand(&on_true, elem_bytes, &true_shape, &out_shape)?;
    let (on_false, false_strides) = bound_operand(&on_false, elem_bytes, &false_shape, &out_shape)?;
    let (dims, strides) = collapse(&out_shape, &[pred_strides, true_strides, false_strides])?;
    let out = alloc(n * elem_bytes)?;
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, dims.len() as u64)?;
    push.set_dims(5, &dims)?;
    push.set_strides(11, &strides[0])?;
    push.set_strides(17, &strides[1])?;
    push.set_strides(23, &strides[2])?;
    dispatch(kernel, 0, &[&pred, &on_true, &on_false, &out], push, elementwise_groups(n))?;
    Ok(out)
}
