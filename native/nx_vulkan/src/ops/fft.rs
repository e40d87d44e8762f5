//! fft and ifft along the last axis of contiguous c128 rows, as Nx.BinaryBackend computes them
//! (shaders/fft.comp says how): the Elixir side moves the axis last, pads or slices it to the
//! length and casts to c128; this file sequences the kernel's passes.
use super::*;
use crate::shaders;
use crate::tensor::alloc;

const LEAF: u32 = 0;
const STAGE: u32 = 1;
const FINISH: u32 = 2;
const PREPARE: u32 = 3;
const MULTIPLY: u32 = 4;
const CHIRP: u32 = 5;
const FILTER: u32 = 6;

const CONJ_IN: u64 = 1;
const INVERSE: u64 = 2;
const C128: u64 = 16;

/// One pass of shaders/fft.comp reading `src` and `aux`, writing `dst` (its last binding).
fn pass(op: u32, src: &BufferRef, aux: &BufferRef, dst: &BufferRef, settings: &[(usize, u64)], invocations: u64) -> Result<()> {
    let mut push = Push::new();
    for &(at, value) in settings {
        push.set(at, value)?;
    }
    push.set(6, invocations)?;
    dispatch(shaders::fft, op, &[src, aux, dst], push, elementwise_groups(invocations))
}

/// The BinaryBackend's `fft_list_base` of `rows` rows of length `n` from `x` (conjugated on load
/// when `conj_in`): DFT leaves of the odd part `m`, then log2(n / m) butterfly stages in place.
fn radix2(x: &BufferRef, rows: u64, n: u64, conj_in: bool) -> Result<BufferRef> {
    let levels = n.trailing_zeros() as u64;
    let m = n >> levels;
    if cpu_device() && m > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!("an fft leaf of length {m} exceeds what one pass can loop over on a CPU device"));
    }
    let y = alloc(rows * n * C128)?;
    let flags = if conj_in { CONJ_IN } else { 0 };
    pass(LEAF, x, x, &y, &[(0, rows), (1, n), (2, m), (3, levels), (5, flags)], rows * n)?;
    for s in 0..levels {
        let half = m << s;
        pass(STAGE, &y, &y, &y, &[(0, rows), (1, n), (4, half)], rows * n / 2)?;
    }
    Ok(y)
}

/// fft (or ifft when `inverse`) of `rows` rows of `n` c128 values; components with magnitude
/// at most `eps` become 0, as in the BinaryBackend.
#[rustler::nif]
fn fft(env: rustler::Env, inverse: bool, rows: u64, n: u64, x: BufferRef, eps: f64) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    if !ctx()?.info.float64 {
        return Err(unsupported!("fft computes in f64, which this device lacks (shaderFloat64)"));
    }
    if n == 0 || rows == 0 {
        return Err(arg_error!("fft of an empty tensor"));
    }
    check_extent(&x, C128, 0, &[rows * n], &[1])?;
    let bluestein = !n.is_power_of_two() && n >= 1024;
    let y = if !bluestein {
        radix2(&x, rows, n, inverse)?
    } else {
        let big = (2 * n - 1).next_power_of_two();
        let a = alloc(rows * big * C128)?;
        let filter = alloc(big * C128)?;
        let flags = if inverse { CONJ_IN } else { 0 };
        pass(PREPARE, &x, &x, &a, &[(0, rows), (1, n), (5, flags), (7, big)], rows * big)?;
        pass(FILTER, &x, &x, &filter, &[(0, 1), (1, n), (7, big)], big)?;
        let fa = radix2(&a, rows, big, false)?;
        let fb = radix2(&filter, 1, big, false)?;
        pass(MULTIPLY, &fb, &fb, &fa, &[(0, rows), (1, n), (7, big)], rows * big)?;
        let g = radix2(&fa, rows, big, false)?;
        let y = alloc(rows * n * C128)?;
        pass(CHIRP, &g, &g, &y, &[(0, rows), (1, n), (7, big)], rows * n)?;
        y
    };
    let bits = eps.to_bits();
    let flags = if inverse { INVERSE } else { 0 };
    pass(
        FINISH,
        &y,
        &y,
        &y,
        &[(0, rows), (1, n), (5, flags), (8, bits & 0xffff_ffff), (9, bits >> 32)],
        rows * n,
    )?;
    Ok(y)
}
